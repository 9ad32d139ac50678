// Reduction kernels: dst[i] = a[i] op b[i], one function per (datatype,
// op). reduce_kernels.cpp is compiled once per instruction set (baseline,
// and on x86-64 also AVX2 and AVX-512) at -O3, so that the loops vectorise
// at the widest width the CPU has; datatype.cpp picks a table at run time.
// Each element is computed on its own (no reassociation across elements),
// so every table gives bitwise the same results.
#pragma once

#include <coll/coll.h>

#include <cstddef>

namespace coll {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b (exactly, not
// partially).
using ReduceFn = void (*)(void* dst, const void* a, const void* b, size_t count);

struct ReduceTable {
  const char* isa;  // "baseline", "avx2", "avx512"
  ReduceFn fn[COLL_DATATYPE_COUNT][COLL_OP_COUNT];  // nullptr: invalid pair
};

const ReduceTable& reduce_table_baseline();

// Whether the CPU has F16C (CPUID: clang 15's __builtin_cpu_supports does
// not know "f16c"). The AVX2 and AVX-512 tables take their F16C kernels for
// COLL_FLOAT16 only then; the OS's AVX support is what those tables are
// chosen on already. Defined in datatype.cpp, outside the per-ISA builds.
bool cpu_has_f16c();
#if defined(COLL_HAVE_AVX2_KERNELS)
const ReduceTable& reduce_table_avx2();
#endif
#if defined(COLL_HAVE_AVX512_KERNELS)
const ReduceTable& reduce_table_avx512();
#endif

}  // namespace coll
