// The kernels of COLL_REPRODUCIBLE=exact (exact_sum.hpp has the
// definition). exact_kernels.cpp is compiled once per instruction set, as
// reduce_kernels.cpp is (baseline, and on x86-64 also AVX2 and AVX-512 with CD), at
// -O3 so that its loops vectorise; exact_sum.cpp picks a table at run time.
// Integer arithmetic only: every table gives the same bits (the unit test
// exact_sum checks each against the scalar reference).
#pragma once

#include <coll/coll.h>

#include <cstddef>

namespace coll {

// exact_sum_rows for one datatype (exact_sum.hpp).
using ExactSumFn = void (*)(const void* in, size_t rows, size_t stride, size_t count, void* out);

struct ExactTable {
  const char* isa;  // "baseline", "avx2", "avx512"
  ExactSumFn fn[COLL_DATATYPE_COUNT];  // nullptr: not an exact-mode type
};

const ExactTable& exact_table_baseline();
#if defined(COLL_HAVE_EXACT_AVX2_KERNELS)
const ExactTable& exact_table_avx2();
#endif
#if defined(COLL_HAVE_EXACT_AVX512_KERNELS)
const ExactTable& exact_table_avx512();
#endif

}  // namespace coll
