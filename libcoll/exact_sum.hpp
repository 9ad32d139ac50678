// COLL_REPRODUCIBLE=exact: a floating-point sum whose bits depend on the
// multiset of contributions alone - not on their order, the number of
// ranks, the algorithm, chunks or transport. The arithmetic only
// (exact_kernels.cpp; the scalar code it replaced is the unit test's
// reference, tests/unit/exact_sum_reference.cpp); the schedules that move
// it are algorithms/exact_reduction.cpp.
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
//      any schedule gives it (exact_kernels.cpp, Accumulator, has the headroom).
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
#include <string>
#include <vector>

namespace coll {

// Whether exact mode reduces (datatype, op): SUM of float, double, float16
// and bfloat16 (the others are exact anyway or, as PROD and user
// operators, run in the rank-order mode).
bool exact_sum_applies(int datatype, int op);

// The definition applied to `rows` contributions to each of `count`
// elements: contribution r of element i is element r * stride + i of `in`
// (rows of a matrix); out[i] gets element i's sum. out may be in when
// rows is 1.
// The kernels are exact_kernels.cpp's, built per instruction set; the
// widest that the CPU runs is used (all give the same bits).
void exact_sum_rows(int datatype, const void* in, size_t rows, size_t stride, size_t count,
                    void* out);

// For the tests and the kernel benchmark: the kernel builds this CPU runs
// ("baseline", "avx2", "avx512"), and exact_sum_rows with one of them
// (false: not built, not supported here, or not an exact-mode type).
std::vector<std::string> exact_sum_kernel_sets();
bool exact_sum_rows_with(const std::string& isa, int datatype, const void* in, size_t rows,
                         size_t stride, size_t count, void* out);

}  // namespace coll
