// COLL_REPRODUCIBLE=exact: a floating-point sum whose bits depend on the
// multiset of contributions alone - not on their order, the number of
// ranks, the algorithm, chunks or transport. The arithmetic only; the
// schedules that move it are algorithms/exact_reduction.cpp.
//
// The definition (docs/architecture.md, "Reproducible reductions"), per
// element of the vector:
//   1. key(x): 0 for -0, 1 for +0, 2 + (biased exponent - 1) for a finite
//      non-zero x (a subnormal counts as biased exponent 1), 0xffff for an
//      infinity or NaN. E = the largest key over all contributions: the
//      exponent of the largest magnitude (or "special"). MAX is exact and
//      order-free, so E is the same at every rank, for any schedule.
//   2. Each contribution x is rounded (to nearest, ties to even) to an
//      integer multiple q of 2^g, g = e(E) - P: P bits below the largest
//      magnitude's leading bit (P = 94 for double in a signed 128-bit
//      integer, 40 for float, float16 and bfloat16 in a signed 64-bit one).
//      A contribution within 2^(P - 52) (double; 2^(P - 23) float) of the
//      largest is exact on that grid; a smaller one moves by at most half a
//      grid step. The sum S of the q is an integer sum: exact, associative,
//      any schedule gives it (exact_sum.cpp, Accumulator, has the headroom).
//   3. The result is S * 2^g rounded once, to nearest, ties to even, into
//      the type (overflow: infinity; S = 0: +0). With E = 0 (every
//      contribution -0) it is -0; with E = 0xffff it is NaN if any
//      contribution is NaN or both infinities occur, else that infinity.
//      NaN payloads are not kept (the quiet NaN of the type).
// So the result is the correctly rounded sum of the contributions whenever
// each is within 2^(P-52) (double) of the largest in magnitude, and within
// (n / 2) * 2^g of it otherwise: rank 0 alone summing the n contributions
// with this definition gets the same bits as n ranks each holding one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll {

// Whether exact mode reduces (datatype, op): SUM of float, double, float16
// and bfloat16 (the others are exact anyway or, as PROD and user
// operators, run in the rank-order mode).
bool exact_sum_applies(int datatype, int op);
// Bytes of one element's accumulator (16 for double, 8 for the others).
size_t exact_fixed_size(int datatype);
// COLL_INT64 or 0 (a 128-bit one: reduce with exact_fixed_reducer()).
int exact_fixed_datatype(int datatype);
// The integer sum of 128-bit accumulators (two's complement, wrapping:
// no sum of up to 2^31 contributions wraps).
void exact_sum_fixed128(void* dst, const void* a, const void* b, size_t count);

// Step 1: keys[i] = key(in[i]).
void exact_keys(int datatype, const void* in, uint16_t* keys, size_t count);
// Step 2: fixed[i] = in[i] on the grid of keys[i] (the reduced keys).
void exact_to_fixed(int datatype, const void* in, const uint16_t* keys, void* fixed,
                    size_t count);
// Step 3: out[i] = the rounded sum fixed[i] (reduced) on the grid of keys[i].
void exact_from_fixed(int datatype, const void* fixed, const uint16_t* keys, void* out,
                      size_t count);

}  // namespace coll
