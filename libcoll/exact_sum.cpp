// COLL_REPRODUCIBLE=exact: which (datatype, op) it reduces, and the
// choice of kernel table (exact_kernels.cpp, one build per instruction set,
// has the arithmetic; exact_sum.hpp the definition).
#include "exact_sum.hpp"

#include "coll/coll.h"
#include "exact_kernels.hpp"

namespace coll {
namespace {

// The widest kernels this CPU runs (as datatype.cpp's reduction kernels).
const ExactTable* best_exact_table() {
#if defined(COLL_HAVE_EXACT_AVX512_KERNELS)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return &exact_table_avx512();
#endif
#if defined(COLL_HAVE_EXACT_AVX2_KERNELS)
  if (__builtin_cpu_supports("avx2")) return &exact_table_avx2();
#endif
  return &exact_table_baseline();
}

const ExactTable* exact_table_named(const std::string& isa) {
  if (isa == "baseline") return &exact_table_baseline();
#if defined(COLL_HAVE_EXACT_AVX2_KERNELS)
  if (isa == "avx2" && __builtin_cpu_supports("avx2")) return &exact_table_avx2();
#endif
#if defined(COLL_HAVE_EXACT_AVX512_KERNELS)
  if (isa == "avx512" && best_exact_table() == &exact_table_avx512())
    return &exact_table_avx512();
#endif
  return nullptr;
}

}  // namespace

bool exact_sum_applies(int datatype, int op) {
  return op == COLL_SUM && (datatype == COLL_DOUBLE || datatype == COLL_FLOAT ||
                            datatype == COLL_FLOAT16 || datatype == COLL_BFLOAT16);
}

void exact_sum_rows(int datatype, const void* in, size_t rows, size_t stride, size_t count,
                    void* out) {
  static const ExactTable* const table = best_exact_table();
  if (datatype >= 0 && datatype < COLL_DATATYPE_COUNT && table->fn[datatype])
    table->fn[datatype](in, rows, stride, count, out);
}

std::vector<std::string> exact_sum_kernel_sets() {
  std::vector<std::string> names;
  for (const char* isa : {"baseline", "avx2", "avx512"})
    if (exact_table_named(isa)) names.emplace_back(isa);
  return names;
}

bool exact_sum_rows_with(const std::string& isa, int datatype, const void* in, size_t rows,
                         size_t stride, size_t count, void* out) {
  const ExactTable* table = exact_table_named(isa);
  if (!table || datatype < 0 || datatype >= COLL_DATATYPE_COUNT || !table->fn[datatype])
    return false;
  table->fn[datatype](in, rows, stride, count, out);
  return true;
}

}  // namespace coll
