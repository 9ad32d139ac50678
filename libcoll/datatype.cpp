#include "datatype.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "error.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace coll {
namespace {

struct TypeInfo {
  const char* name;
  size_t size;
  bool integer;
};

constexpr TypeInfo kTypes[COLL_DATATYPE_COUNT] = {
    {"int8", 1, true},    {"int16", 2, true},   {"int32", 4, true},
    {"int64", 8, true},   {"uint8", 1, true},   {"uint16", 2, true},
    {"uint32", 4, true},  {"uint64", 8, true},  {"float", 4, false},
    {"double", 8, false}, {"float16", 2, false}, {"bfloat16", 2, false},
    {"float_int", sizeof(coll_float_int_t), false},
    {"double_int", sizeof(coll_double_int_t), false},
    {"long_int", sizeof(coll_long_int_t), false},
    {"2int", sizeof(coll_2int_t), false},
    {"short_int", sizeof(coll_short_int_t), false},
    {"long_double_int", sizeof(coll_long_double_int_t), false},
};

constexpr const char* kOps[COLL_OP_COUNT] = {"sum",  "prod", "min",  "max", "band",   "bor",
                                             "bxor", "land", "lor",  "lxor", "maxloc", "minloc"};
static_assert(kOps[COLL_OP_COUNT - 1] != nullptr, "a name for every operator");
static_assert(kTypes[COLL_DATATYPE_COUNT - 1].name != nullptr, "an entry for every datatype");

}  // namespace

// The sizes in line in the header are these.
constexpr bool sizes_agree() {
  for (int t = 0; t < COLL_DATATYPE_COUNT; ++t)
    if (kTypes[t].size != detail::kDatatypeSizes[t]) return false;
  return true;
}
static_assert(sizes_agree(), "datatype.hpp's kDatatypeSizes disagrees with kTypes");

bool is_integer_type(int datatype) {
  return valid_datatype(datatype) && kTypes[datatype].integer;
}
const char* datatype_name(int datatype) {
  return valid_datatype(datatype) ? kTypes[datatype].name : "unknown";
}
const char* op_name(int op) { return valid_op(op) ? kOps[op] : "unknown"; }

const char* op_rule(int datatype, int op) {
  if (is_pair_type(datatype) && op != COLL_MAXLOC && op != COLL_MINLOC)
    return "not on the value-index pair types";
  switch (op) {
    case COLL_BAND:
    case COLL_BOR:
    case COLL_BXOR:
    case COLL_LAND:
    case COLL_LOR:
    case COLL_LXOR:
      return "integer types only";
    case COLL_MAXLOC:
    case COLL_MINLOC:
      return "the value-index pair types only: float_int, double_int, long_int, 2int, "
             "short_int, long_double_int";
    default:
      return "not on the value-index pair types";
  }
}

bool cpu_has_f16c() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
#else
  return false;
#endif
}

namespace {

// The widest kernels this CPU runs (reduce_kernels.hpp).
const ReduceTable* best_reduce_table() {
#if defined(COLL_HAVE_AVX512_KERNELS)
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return &reduce_table_avx512();
#endif
#if defined(COLL_HAVE_AVX2_KERNELS)
  if (__builtin_cpu_supports("avx2")) return &reduce_table_avx2();
#endif
  return &reduce_table_baseline();
}

const ReduceTable* g_reduce_table = nullptr;

const ReduceTable& active_reduce_table() {
  if (!g_reduce_table) g_reduce_table = best_reduce_table();
  return *g_reduce_table;
}

}  // namespace

std::vector<std::string> reduce_kernel_sets() {
  std::vector<std::string> names{"baseline"};
#if defined(COLL_HAVE_AVX2_KERNELS)
  if (__builtin_cpu_supports("avx2")) names.push_back("avx2");
#endif
  const std::string best = best_reduce_table()->isa;
  if (best != names.back()) names.push_back(best);
  return names;
}

void select_reduce_kernels(const std::string& isa) {
  if (isa.empty() || isa == "auto") {
    g_reduce_table = best_reduce_table();
    return;
  }
  std::string valid;
  for (const std::string& name : reduce_kernel_sets()) {
    if (name == isa) {
      if (name == "baseline") g_reduce_table = &reduce_table_baseline();
#if defined(COLL_HAVE_AVX2_KERNELS)
      if (name == "avx2") g_reduce_table = &reduce_table_avx2();
#endif
#if defined(COLL_HAVE_AVX512_KERNELS)
      if (name == "avx512") g_reduce_table = &reduce_table_avx512();
#endif
      return;
    }
    valid += name + ", ";
  }
  fail(COLL_ERR_INVALID_ARG,
       "COLL_REDUCE_KERNELS=%s: not built or not supported by this CPU (here: %sauto)",
       isa.c_str(), valid.c_str());
}

const char* reduce_kernels_name() { return active_reduce_table().isa; }

// b must not change (a peer's message in a window slot, or the caller's
// sendbuf) and the function writes its second operand: with dst == a the
// higher operand goes through a bounded scratch, a chunk at a time.
void Reducer::apply_user(void* dst, const void* a, const void* b, size_t count) const {
  const auto type = static_cast<coll_datatype_t>(datatype);
  if (count == 0) return;
  if (dst == b) {
    user(a, dst, count, type, ctx);
    return;
  }
  if (dst != a) {
    std::memcpy(dst, b, count * elem_size);
    user(a, dst, count, type, ctx);
    return;
  }
  const size_t chunk = std::max<size_t>(1, (size_t{64} << 10) / elem_size);
  const size_t first = std::min(chunk, count);
  std::unique_ptr<char[]> scratch(new char[first * elem_size]);
  auto* d = static_cast<char*>(dst);
  const auto* y = static_cast<const char*>(b);
  for (size_t at = 0; at < count; at += chunk) {
    const size_t k = std::min(chunk, count - at);
    std::memcpy(scratch.get(), y + at * elem_size, k * elem_size);
    user(d + at * elem_size, scratch.get(), k, type, ctx);
    std::memcpy(d + at * elem_size, scratch.get(), k * elem_size);
  }
}

ReduceFn reduce_function(int datatype, int op) {
  if (!valid_datatype(datatype) || !valid_op(op)) return nullptr;
  return active_reduce_table().fn[datatype][op];
}

}  // namespace coll
