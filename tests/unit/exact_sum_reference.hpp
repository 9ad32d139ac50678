// The scalar reference of the exact-sum kernel (exact_sum_reference.cpp).
#pragma once

#include <cstddef>

namespace coll::reference {

// libcoll/exact_sum.hpp's exact_sum_rows, as it was (scalar).
void exact_sum_rows(int datatype, const void* in, size_t rows, size_t stride, size_t count,
                    void* out);
// Step 1 alone, for the benchmark's breakdown.
unsigned keys_only(int datatype, const void* in, size_t rows, size_t stride, size_t count);

// Steps 1 and 2 without the rounding, for the benchmark's breakdown.
void keys_and_accumulate(int datatype, const void* in, size_t rows, size_t stride, size_t count);

}  // namespace coll::reference
