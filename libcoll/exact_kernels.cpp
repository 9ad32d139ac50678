// The kernels of COLL_REPRODUCIBLE=exact (exact_kernels.hpp; exact_sum.hpp
// has the definition). This file is compiled once per instruction set;
// COLL_EXACT_TABLE names the table it defines and COLL_KERNEL_ISA its
// instruction set. As in reduce_kernels.cpp: no inline functions from
// headers (the linker could keep an AVX-512 build's copy for the whole
// library), everything here has internal linkage.
//
// Integer arithmetic throughout: the bits do not depend on the CPU, the
// compiler's contraction of floating-point expressions or the
// floating-point environment (FTZ/DAZ, rounding mode), nor on the order in
// which the integer terms are added (two's complement sums wrap alike).
// One exception, with the same bits: two rows of float or double (np 2)
// are added by the FPU where that add is the definition's result and
// MXCSR holds the default environment (add_pair_tile, sum_pair).
//
// Per tile of kTile elements: (1) the keys, a MAX over the rows; (2) each
// row's contributions on the grid, in the common case - a normal x within
// P - fraction bits of its element's key, whose grid value is its mantissa
// shifted left - by branch-free loops over 64-bit lanes that the compiler
// vectorises (variable shifts, selects); the rest (subnormals, infinities
// and NaN, contributions far below the largest, which round) marked, and
// added by the scalar general case (fix_one) in a second pass over the row
// only where the row has any; (3) the rounding, once per element. The
// accumulators stay in the tile (on the stack).
#include "exact_kernels.hpp"

#include <cstdint>
#include <cstring>

// Two rows in the FPU's add (add_pair_tile) where its bits are the
// definition's: x86-64 with SSE2 arithmetic (no x87 extended precision),
// checked against MXCSR at each call.
#if defined(__x86_64__) && defined(__SSE2_MATH__)
#include <xmmintrin.h>
#define COLL_EXACT_FPU_PAIRS 1
#endif

#ifndef COLL_EXACT_TABLE
#error "compile with -DCOLL_EXACT_TABLE=<function name> -DCOLL_KERNEL_ISA=<name>"
#endif

namespace coll {
namespace {

// GCC and Clang on 64-bit targets (__extension__: -Wpedantic).
__extension__ typedef unsigned __int128 u128;
__extension__ typedef __int128 i128;

// An IEEE binary format held as its bits.
template <typename BitsT, int kFraction, int kExponent>
struct Format {
  using Bits = BitsT;
  static constexpr int fraction = kFraction;  // stored fraction bits
  static constexpr int bias = (1 << (kExponent - 1)) - 1;
  static constexpr uint32_t max_biased = (1u << kExponent) - 1;  // infinity, NaN
  static constexpr int sign_shift = kFraction + kExponent;
  static constexpr Bits quiet_nan = Bits(Bits(max_biased) << kFraction) | Bits(Bits(1) << (kFraction - 1));
};
using Double = Format<uint64_t, 52, 11>;
using Single = Format<uint32_t, 23, 8>;
using Half = Format<uint16_t, 10, 5>;
using Brain = Format<uint16_t, 7, 8>;

// The accumulator: its unsigned carrier (wrapping two's complement), the
// grid's bits below the largest magnitude (P), and where an infinity or
// NaN is counted when the element is special (fields of `field` bits).
// Headroom: each |q| <= 2^(P+1), so the wide one's sum over at most 2^31
// ranks (a rank is an int) stays below 2^126, and the narrow one's over
// fewer than 2^21 ranks (its fields' bound: exact_algorithm leaves larger
// communicators to the rank-order algorithms) below 2^62.
template <typename FixedT, int kP, int kField>
struct Accumulator {
  using Fixed = FixedT;
  static constexpr int p = kP;
  static constexpr int width = int(sizeof(Fixed) * 8);
  static constexpr Fixed plus_inf = 1;
  static constexpr Fixed minus_inf = Fixed(1) << kField;
  static constexpr Fixed nan = Fixed(1) << (2 * kField);
  static constexpr Fixed field_mask = (Fixed(1) << kField) - 1;
};
using Wide = Accumulator<u128, 94, 42>;
using Narrow = Accumulator<uint64_t, 40, 21>;

constexpr uint16_t kSpecial = 0xffff;

// The unbiased exponent of the largest magnitude's leading bit for a key
// of a finite non-zero element (key >= 2).
template <typename F>
int exponent_of_key(uint16_t key) {
  return int(key) - 1 - F::bias;
}

// x rounded to nearest even at 2^-shift of its integer mantissa (shift > 0).
template <typename T>
T shift_right_even(T m, int shift) {
  if (shift >= int(sizeof(T) * 8)) return 0;  // m < 2^(width) / 2 <= half: rounds to 0
  const T q = m >> shift;
  const T rem = m & ((T(1) << shift) - 1);
  const T half = T(1) << (shift - 1);
  return q + (rem > half || (rem == half && (q & 1)));
}

// One contribution on the grid of its element's key: the general case.
template <typename F, typename A>
typename A::Fixed fix_one(typename F::Bits b, uint16_t key) {
  using Fixed = typename A::Fixed;
  const bool negative = (b >> F::sign_shift) & 1;
  const uint32_t biased = uint32_t(b >> F::fraction) & F::max_biased;
  const auto fraction = b & ((typename F::Bits(1) << F::fraction) - 1);
  if (key == kSpecial)  // only which specials occur matters; finite values count nothing
    return biased != F::max_biased ? 0 : fraction ? A::nan : negative ? A::minus_inf : A::plus_inf;
  if (key < 2 || (biased == 0 && fraction == 0)) return 0;
  // x = m * 2^(exp - fraction), m with its leading bit; the grid step is
  // 2^g, g = e(key) - P; q = x / 2^g rounded.
  const uint64_t m = uint64_t(fraction) | (biased ? uint64_t(1) << F::fraction : 0);
  const int exp = (biased ? int(biased) : 1) - F::bias;
  const int shift = (exp - F::fraction) - (exponent_of_key<F>(key) - A::p);
  // x <= the largest magnitude < 2^(e + 1): shift <= P - fraction.
  const Fixed magnitude =
      shift >= 0 ? Fixed(m) << shift : Fixed(shift_right_even<uint64_t>(m, -shift));
  return negative ? Fixed(0) - magnitude : magnitude;
}

template <typename T>
int top_bit(T v) {  // v != 0
  if constexpr (sizeof(T) == 16) {
    const auto high = uint64_t(v >> 64);
    return high ? 127 - __builtin_clzll(high) : 63 - __builtin_clzll(uint64_t(v));
  } else {
    return 63 - __builtin_clzll(uint64_t(v));
  }
}

// S * 2^g rounded to nearest even into F.
template <typename F, typename Fixed>
typename F::Bits round_into(Fixed s, int g) {
  using Bits = typename F::Bits;
  constexpr int width = int(sizeof(Fixed) * 8);
  const bool negative = (s >> (width - 1)) & 1;
  const Bits sign = Bits(Bits(negative) << F::sign_shift);
  const Fixed m = negative ? Fixed(0) - s : s;  // |S| < 2^(width - 1)
  if (m == 0) return 0;                          // an exact zero: +0
  const int lead = top_bit(m) + g;               // exponent of S's leading bit
  constexpr int emin = 1 - F::bias;
  const Bits infinity = Bits(Bits(F::max_biased) << F::fraction);
  if (lead > F::bias) return sign | infinity;
  int lsb = (lead >= emin ? lead : emin) - F::fraction;  // the result's last bit
  const int drop = lsb - g;
  Fixed q = drop <= 0 ? m << -drop : shift_right_even<Fixed>(m, drop);
  if (q >> (F::fraction + 1)) {  // rounded up to 2^(fraction + 1)
    q >>= 1;
    ++lsb;
  }
  if (q >> F::fraction) {  // normal
    const int biased = lsb + F::fraction + F::bias;
    if (biased >= int(F::max_biased)) return sign | infinity;
    return sign | Bits(Bits(biased) << F::fraction) |
           Bits(uint64_t(q) & ((uint64_t(1) << F::fraction) - 1));
  }
  // Subnormal (or zero after rounding): q < 2^fraction at lsb = emin - fraction.
  return sign | Bits(uint64_t(q));
}

// round_into for a result in F's normal range, in 64-bit steps: the top
// 64 bits of |S| (a window w with its leading bit at 63) and whether any
// bit below them is set decide the rounding. Returns false where the
// result is subnormal, overflows or is zero (round_into decides those).
template <typename F, typename Fixed>
[[gnu::always_inline]] inline bool round_normal(Fixed s, int g, typename F::Bits& out) {
  using Bits = typename F::Bits;
  constexpr int width = int(sizeof(Fixed) * 8);
  const bool negative = (s >> (width - 1)) & 1;
  const Fixed negate = Fixed(0) - Fixed(negative);  // |S| without a branch
  const Fixed m = (s ^ negate) - negate;
  uint64_t w;
  bool sticky;
  int top;
  if constexpr (width == 128) {
    const auto high = uint64_t(m >> 64), low = uint64_t(m);
    if (high) {
      const int lz = __builtin_clzll(high);
      w = lz ? (high << lz) | (low >> (64 - lz)) : high;
      sticky = (low << lz) != 0;
      top = 127 - lz;
    } else {
      if (!low) return false;
      const int lz = __builtin_clzll(low);
      w = low << lz;
      sticky = false;
      top = 63 - lz;
    }
  } else {
    if (!m) return false;
    const int lz = __builtin_clzll(uint64_t(m));
    w = uint64_t(m) << lz;
    sticky = false;
    top = 63 - lz;
  }
  int lead = top + g;
  if (lead < 1 - F::bias || lead >= F::bias) return false;
  constexpr int drop = 63 - F::fraction;
  uint64_t q = w >> drop;
  const uint64_t rem = w & ((uint64_t(1) << drop) - 1), half = uint64_t(1) << (drop - 1);
  // Bitwise, not ||: a short circuit is a branch that random data
  // mispredicts half the time.
  q += uint64_t((rem > half) | ((rem == half) & (sticky | bool(q & 1))));
  if (q >> (F::fraction + 1)) {  // rounded up to the next power of two
    q >>= 1;
    ++lead;
  }
  out = Bits(Bits(Bits(negative) << F::sign_shift) | Bits(Bits(lead + F::bias) << F::fraction) |
             Bits(q & ((uint64_t(1) << F::fraction) - 1)));
  return true;
}

// The element's sum from its accumulator and key (step 3).
template <typename F, typename A>
typename F::Bits result_of(typename A::Fixed s, uint16_t key) {
  using Fixed = typename A::Fixed;
  using Bits = typename F::Bits;
  Bits r;
  if (key >= 2 && key != kSpecial) [[likely]] {
    const int g = exponent_of_key<F>(key) - A::p;
    if (!round_normal<F>(s, g, r)) r = round_into<F>(s, g);
    return r;
  }
  if (key == 0) return Bits(Bits(1) << F::sign_shift);  // every contribution -0
  if (key == 1) return 0;
  const Fixed plus = s & A::field_mask, minus = (s / A::minus_inf) & A::field_mask;
  const Bits infinity = Bits(Bits(F::max_biased) << F::fraction);
  if (s / A::nan != 0 || (plus && minus)) return F::quiet_nan;
  return plus ? infinity : Bits(infinity | Bits(Bits(1) << F::sign_shift));
}


template <typename F>
typename F::Bits load(const char* p, size_t i) {
  typename F::Bits b;
  std::memcpy(&b, p + i * sizeof b, sizeof b);
  return b;
}

// key(x) (exact_sum.hpp) without branches, in x's width.
template <typename F>
uint32_t key_of(typename F::Bits b) {
  using Bits = typename F::Bits;
  const Bits negative = Bits(b >> F::sign_shift) & 1;
  const Bits biased = Bits(b >> F::fraction) & Bits(F::max_biased);
  const bool zero = Bits(b << 1) == 0;  // the sign shifted out
  Bits key = Bits(biased + 1 + Bits(biased == 0));  // a subnormal counts as biased 1
  key = zero ? Bits(1 - negative) : key;
  key = biased == Bits(F::max_biased) ? Bits(kSpecial) : key;
  return uint32_t(key);
}

constexpr size_t kTile = 512;

// The tile's keys: a MAX over the rows.
template <typename F>
void tile_keys(const char* base, size_t rows, size_t stride, size_t i0, size_t t,
               uint32_t* __restrict keys) {
  constexpr size_t size = sizeof(typename F::Bits);
  const char* __restrict row = base + i0 * size;
  for (size_t i = 0; i < t; ++i) keys[i] = key_of<F>(load<F>(row, i));
  for (size_t r = 1; r < rows; ++r) {
    const char* __restrict next = base + (r * stride + i0) * size;
    for (size_t i = 0; i < t; ++i) {
      const uint32_t k = key_of<F>(load<F>(next, i)), m = keys[i];
      keys[i] = k > m ? k : m;
    }
  }
}

// Whether contribution b takes the general case: an infinity or NaN (its
// element's key is 0xffff; only which specials occur is counted). Every
// finite contribution - normal, subnormal, zero, near the largest or far
// below it - is grid_value's.
template <typename F>
bool rare(typename F::Bits b) {
  return (uint32_t(b >> F::fraction) & F::max_biased) == F::max_biased;
}

// The general case for the rare contributions of a row.
template <typename F, typename A>
void add_rare(const char* __restrict row, const uint32_t* __restrict keys,
              typename A::Fixed* __restrict acc, size_t t) {
  for (size_t i = 0; i < t; ++i) {
    const typename F::Bits b = load<F>(row, i);
    if (rare<F>(b)) acc[i] += fix_one<F, A>(b, uint16_t(keys[i]));
  }
}

// fix_one for a finite contribution (b's bits widened to 64) on the grid
// of its element's key, without a branch, as 64-bit words: its magnitude
// m * 2^shift with m the mantissa (no leading bit for a subnormal, which
// counts as biased exponent 1) and shift = biased - key + 1 + P -
// fraction <= P - fraction (key >= biased + 1). Where shift >= 0 the
// value is m shifted left, returned as the pair (m, shift) in `left` form;
// below, m shifted right by -shift rounded to nearest even (0 from 64 on:
// m < 2^53 is below half of 2^63). Zeros give m = 0. finite is 0 where b
// is an infinity or NaN or the element's key is 0xffff: no value then.
struct GridTerm {
  uint64_t m;         // the mantissa (0 where not finite)
  uint64_t s;         // the left shift (0 where right)
  uint64_t right;     // the right-shifted, rounded value (where shift < 0)
  uint64_t is_left;   // 1 where shift >= 0
  uint64_t negate;    // all ones for a negative x
};
template <typename F>
[[gnu::always_inline]] inline GridTerm grid_term(uint64_t b, uint64_t key, int64_t p) {
  constexpr uint64_t fraction_mask = (uint64_t(1) << F::fraction) - 1;
  const uint64_t biased = (b >> F::fraction) & F::max_biased;
  const uint64_t normal = uint64_t(biased != 0);
  const uint64_t finite = uint64_t(biased != F::max_biased) & uint64_t(key != kSpecial);
  const int64_t shift = int64_t(biased + (normal ^ 1)) - int64_t(key) + (1 + p - F::fraction);
  GridTerm g;
  g.m = finite ? (b & fraction_mask) | (normal << F::fraction) : 0;
  g.is_left = uint64_t(shift >= 0);
  g.s = g.is_left ? uint64_t(shift) : 0;
  const uint64_t down = uint64_t(0) - uint64_t(shift);
  const uint64_t r = g.is_left ? 1 : (down < 63 ? down : 63);  // in [1, 63]
  // Rounded to nearest even: the dropped bits, left-aligned, against half
  // (2^63 there), plus the last kept bit so that a tie goes up from odd
  // only (dropped is even: no overflow). Written so for GCC: a variable
  // 2^(r - 1), or (dropped == half) & odd, keeps it from vectorising.
  const uint64_t q = g.m >> r, dropped = g.m << (64 - r);
  g.right = q + uint64_t(dropped + (q & 1) > (uint64_t(1) << 63));
  g.negate = 0 - ((b >> F::sign_shift) & 1);
  return g;
}

// Double: q = m * 2^shift (< 2^95) in two 64-bit limbs without a carry
// between them, q = hi * 2^47 + lo with hi < 2^48 and lo < 2^47 (signed
// sums of 2^14 of them stay below 2^62); a right-shifted q < 2^53 splits
// alike. Returns whether the row has a rare contribution.
bool accumulate_double(const char* __restrict row, const uint32_t* __restrict keys,
                       uint64_t* __restrict hi, uint64_t* __restrict lo, size_t t) {
  constexpr uint64_t low_mask = (uint64_t(1) << 47) - 1;
  uint64_t any_rare = 0;
  for (size_t i = 0; i < t; ++i) {
    const uint64_t b = load<Double>(row, i);
    const GridTerm g = grid_term<Double>(b, keys[i], Wide::p);
    const uint64_t h = g.is_left ? g.m >> (47 - g.s) : g.right >> 47;
    const uint64_t l = g.is_left ? (g.m << g.s) & low_mask : g.right & low_mask;
    hi[i] += (h ^ g.negate) - g.negate;  // negated without a branch
    lo[i] += (l ^ g.negate) - g.negate;
    any_rare |= uint64_t(((b >> Double::fraction) & Double::max_biased) == Double::max_biased);
  }
  return any_rare != 0;
}

// float, float16, bfloat16: q = m * 2^shift < 2^(P + 1) in one 64-bit
// lane (the sum of fewer than 2^21 stays below 2^62).
template <typename F>
bool accumulate_narrow(const char* __restrict row, const uint32_t* __restrict keys,
                       uint64_t* __restrict acc, size_t t) {
  uint64_t any_rare = 0;
  for (size_t i = 0; i < t; ++i) {
    const auto b = uint64_t(load<F>(row, i));
    const GridTerm g = grid_term<F>(b, keys[i], Narrow::p);
    const uint64_t q = g.is_left ? g.m << g.s : g.right;
    acc[i] += (q ^ g.negate) - g.negate;
    any_rare |= uint64_t(((b >> F::fraction) & F::max_biased) == F::max_biased);
  }
  return any_rare != 0;
}

template <typename Bits>
void store(void* out, size_t i, Bits r) {
  std::memcpy(static_cast<char*>(out) + i * sizeof r, &r, sizeof r);
}

// The number of leading zeros of v | 1 (63 for 0), without a branch. The
// AVX2 build has no vector instruction for it: a binary search by selects,
// which vectorises; elsewhere the builtin (lzcnt or bsr, or AVX-512CD's
// vplzcntq in the AVX-512 build).
[[gnu::always_inline]] inline uint64_t leading_zeros(uint64_t v) {
#if defined(__AVX2__) && !defined(__AVX512CD__)
  v |= 1;
  uint64_t n = 0, e;
  e = uint64_t((v >> 32) == 0), n += e << 5, v = e ? v << 32 : v;
  e = uint64_t((v >> 48) == 0), n += e << 4, v = e ? v << 16 : v;
  e = uint64_t((v >> 56) == 0), n += e << 3, v = e ? v << 8 : v;
  e = uint64_t((v >> 60) == 0), n += e << 2, v = e ? v << 4 : v;
  e = uint64_t((v >> 62) == 0), n += e << 1, v = e ? v << 2 : v;
  e = uint64_t((v >> 63) == 0), n += e;
  return n;
#else
  return uint64_t(__builtin_clzll(v | 1));
#endif
}

// round_normal (the rounding of a result in F's normal range, from the top
// 64 bits of |S| and a sticky bit) on the 128-bit sums of a tile, held as
// their high and low words, in 64-bit lanes without a branch: the loop
// vectorises (every value a 64-bit word: mixed widths and bools keep GCC
// from it). ok[i] is 0 where the element is not in that case - its key is
// not finite and non-zero, or S is 0, or the result is subnormal or
// overflows - and result_of decides it (returns whether any is). Every step
// is round_normal's, on words: the bits are its bits.
template <typename F>
bool round_tile_words(const uint64_t* __restrict sh, const uint64_t* __restrict sl,
                      const uint32_t* __restrict keys, typename F::Bits* __restrict out,
                      uint64_t* __restrict ok, size_t t, int64_t p) {
  using Bits = typename F::Bits;
  constexpr uint64_t drop = 63 - F::fraction;
  constexpr int64_t bias = F::bias;
  uint64_t any_not_ok = 0;
  for (size_t i = 0; i < t; ++i) {
    const uint64_t negative = sh[i] >> 63, negate = 0 - negative;
    // |S| = (S ^ negate) - negate, as two words.
    const uint64_t low = (sl[i] ^ negate) + negative;
    const uint64_t high = (sh[i] ^ negate) + (negative & uint64_t(low == 0));
    const uint64_t high_zero = uint64_t(high == 0);
    // The word holding the leading one, and its leading zeros (one count).
    const uint64_t v = high_zero ? low : high, below = high_zero ? 0 : low;
    const uint64_t lz_v = leading_zeros(v);
    const uint64_t lz = lz_v + (high_zero << 6);  // of the 128-bit |S|
    // The top 64 bits from the leading one, and whether any bit below is set.
    const uint64_t w = (v << lz_v) | ((below >> 1) >> (63 - lz_v));
    const uint64_t sticky = uint64_t((below << lz_v) != 0);
    const auto key = int64_t(keys[i]);
    int64_t lead = int64_t(127 - lz) + (key - 1 - bias - p);
    const uint64_t fine = uint64_t(key >= 2) & uint64_t(key != kSpecial) &
                          uint64_t((high | low) != 0) & uint64_t(lead >= 1 - bias) &
                          uint64_t(lead < bias);
    uint64_t q = w >> drop;
    const uint64_t rem = w & ((uint64_t(1) << drop) - 1), half = uint64_t(1) << (drop - 1);
    q += uint64_t(rem > half) | (uint64_t(rem == half) & (sticky | (q & 1)));
    const uint64_t up = q >> (F::fraction + 1);  // rounded up to the next power of two
    q >>= up;
    lead += int64_t(up);
    const uint64_t bits = (negative << F::sign_shift) | (uint64_t(lead + bias) << F::fraction) |
                          (q & ((uint64_t(1) << F::fraction) - 1));
    out[i] = Bits(fine ? bits : 0);
    ok[i] = fine;
    any_not_ok |= fine ^ 1;
  }
  return any_not_ok != 0;
}

// Step 3 for a tile: round_tile_words, then result_of where it declined.
template <typename F, typename A>
void round_tile(const uint64_t* __restrict sh, const uint64_t* __restrict sl,
                const uint32_t* __restrict keys, void* out, size_t i0, size_t t) {
  using Bits = typename F::Bits;
  using Fixed = typename A::Fixed;
  Bits r[kTile];
  uint64_t ok[kTile];
  if (round_tile_words<F>(sh, sl, keys, r, ok, t, A::p))
    for (size_t i = 0; i < t; ++i)
      if (!ok[i]) {
        Fixed s;
        if constexpr (sizeof(Fixed) == 16)
          s = (Fixed(sh[i]) << 64) | sl[i];
        else
          s = Fixed(sl[i]);
        r[i] = result_of<F, A>(s, uint16_t(keys[i]));
      }
  std::memcpy(static_cast<char*>(out) + i0 * sizeof(Bits), r, t * sizeof(Bits));
}

// Two rows (np 2's by-owner blocks and gathers): where both contributions
// to an element lie on its grid - each zero or within 2^(P - fraction) of
// the larger, and neither an infinity nor NaN - the integer sum S is
// exact, so the definition's result is x0 + x1 correctly rounded to
// nearest, ties to even: the one IEEE add (subnormal results, overflow to
// infinity, +0 for x + -x and -0 for -0 + -0 included). The FPU gives it
// where MXCSR holds the default environment (fpu_default); a tile with any
// other element (a far or special contribution) is computed again by the
// integer kernel, whose bits these are: results never depend on which path
// ran. Writes out before knowing: out must not overlap the rows (rows is 2).
// Returns whether the tile must be computed again.
template <typename F, typename A, typename T>
bool add_pair_tile(const char* __restrict r0, const char* __restrict r1, char* __restrict out,
                   size_t t) {
  using Bits = typename F::Bits;
  static_assert(sizeof(T) == sizeof(Bits), "T is F's floating-point type");
  constexpr auto limit = Bits(A::p - F::fraction);  // the grid holds x exactly within this
  constexpr auto max_biased = Bits(F::max_biased);
  Bits off = 0;
  for (size_t i = 0; i < t; ++i) {
    const Bits b0 = load<F>(r0, i), b1 = load<F>(r1, i);
    const auto e0 = Bits(Bits(b0 >> F::fraction) & max_biased);
    const auto e1 = Bits(Bits(b1 >> F::fraction) & max_biased);
    const auto k0 = Bits(e0 + Bits(e0 == 0)), k1 = Bits(e1 + Bits(e1 == 0));  // subnormal: 1
    const Bits k = k0 > k1 ? k0 : k1;
    const auto far0 = Bits(Bits(Bits(k - k0) > limit) & Bits(Bits(b0 << 1) != 0));
    const auto far1 = Bits(Bits(Bits(k - k1) > limit) & Bits(Bits(b1 << 1) != 0));
    off |= Bits(far0 | far1 | Bits(e0 == max_biased) | Bits(e1 == max_biased));
    T x0, x1;
    std::memcpy(&x0, r0 + i * sizeof x0, sizeof x0);
    std::memcpy(&x1, r1 + i * sizeof x1, sizeof x1);
    const T s = x0 + x1;
    std::memcpy(out + i * sizeof s, &s, sizeof s);
  }
  return off != 0;
}

#if defined(COLL_EXACT_FPU_PAIRS)
// Whether the FPU adds as add_pair_tile needs: round to nearest, no
// flush-to-zero, no denormals-are-zero, every exception masked (an
// unmasked inexact or overflow would trap). csr: MXCSR, to restore (the
// flags the adds raise: the integer kernel raises none).
bool fpu_default(unsigned& csr) {
  csr = _mm_getcsr();
  return (csr & 0xffc0u) == 0x1f80u;
}
#endif

// exact_sum_rows of two rows by add_pair_tile, and `general` (the integer
// kernel) for the tiles it declines. False where the FPU's environment is
// not the default (or not on x86-64): the caller runs `general` on all.
template <typename F, typename A, typename T>
bool sum_pair(const void* in, size_t stride, size_t count, void* out,
              void (*general)(const void*, size_t, size_t, size_t, void*)) {
#if defined(COLL_EXACT_FPU_PAIRS)
  unsigned csr;
  if (!fpu_default(csr)) return false;
  constexpr size_t size = sizeof(T);
  const auto* r0 = static_cast<const char*>(in);
  const char* r1 = r0 + stride * size;
  auto* o = static_cast<char*>(out);
  for (size_t i0 = 0; i0 < count; i0 += kTile) {
    const size_t t = count - i0 < kTile ? count - i0 : kTile;
    if (add_pair_tile<F, A, T>(r0 + i0 * size, r1 + i0 * size, o + i0 * size, t))
      general(r0 + i0 * size, 2, stride, t, o + i0 * size);
  }
  _mm_setcsr(csr);
  return true;
#else
  (void)in, (void)stride, (void)count, (void)out, (void)general;
  return false;
#endif
}

// Steps 1-3 for float, float16 and bfloat16. A tile reads all its inputs
// before it writes a result, so out may be the one row of in.
template <typename F>
void sum_rows_narrow(const void* in, size_t rows, size_t stride, size_t count, void* out) {
  uint32_t keys[kTile];
  uint64_t acc[kTile], high[kTile];
  const auto* base = static_cast<const char*>(in);
  constexpr size_t size = sizeof(typename F::Bits);
  for (size_t i0 = 0; i0 < count; i0 += kTile) {
    const size_t t = count - i0 < kTile ? count - i0 : kTile;
    tile_keys<F>(base, rows, stride, i0, t, keys);
    for (size_t i = 0; i < t; ++i) acc[i] = 0;
    for (size_t r = 0; r < rows; ++r) {
      const char* row = base + (r * stride + i0) * size;
      if (accumulate_narrow<F>(row, keys, acc, t)) add_rare<F, Narrow>(row, keys, acc, t);
    }
    for (size_t i = 0; i < t; ++i) high[i] = 0 - (acc[i] >> 63);  // sign-extended
    round_tile<F, Narrow>(high, acc, keys, out, i0, t);
  }
}

// Steps 1-3 for double: the limbs folded into the 128-bit total every 2^14
// rows; the rare contributions straight into the total. Where neither
// happened in a tile (the usual case) the total is not used.
void sum_rows_double_general(const void* in, size_t rows, size_t stride, size_t count,
                             void* out) {
  constexpr size_t kGroup = size_t(1) << 14;
  uint32_t keys[kTile];
  uint64_t hi[kTile], lo[kTile], sh[kTile], sl[kTile];
  u128 total[kTile];
  const auto* base = static_cast<const char*>(in);
  for (size_t i0 = 0; i0 < count; i0 += kTile) {
    const size_t t = count - i0 < kTile ? count - i0 : kTile;
    tile_keys<Double>(base, rows, stride, i0, t, keys);
    for (size_t i = 0; i < t; ++i) hi[i] = lo[i] = 0;
    bool wide = false;  // whether total holds anything
    for (size_t r = 0; r < rows; ++r) {
      const char* row = base + (r * stride + i0) * 8;
      if (accumulate_double(row, keys, hi, lo, t)) {
        if (!wide) {
          for (size_t i = 0; i < t; ++i) total[i] = 0;
          wide = true;
        }
        add_rare<Double, Wide>(row, keys, total, t);
      }
      if ((r + 1) % kGroup == 0 && r + 1 < rows) {
        if (!wide) {
          for (size_t i = 0; i < t; ++i) total[i] = 0;
          wide = true;
        }
        for (size_t i = 0; i < t; ++i) {
          // Two's complement: the signed limbs' sum, wrapped as the total.
          total[i] += (u128(i128(int64_t(hi[i]))) << 47) + u128(i128(int64_t(lo[i])));
          hi[i] = lo[i] = 0;
        }
      }
    }
    // The sums as words: the limbs' (S = hi * 2^47 + lo, signed), and the
    // total's where it holds anything.
    for (size_t i = 0; i < t; ++i) {
      const uint64_t h = hi[i] << 47, l = h + lo[i];
      // hi >> 17 and lo >> 63 arithmetic, by logical shifts (AVX2 has no
      // 64-bit arithmetic shift): (x + 2^63) >> k, less 2^(63 - k).
      const uint64_t top = uint64_t(1) << 63;
      sh[i] = (((hi[i] ^ top) >> 17) - (top >> 17)) - (lo[i] >> 63) + uint64_t(l < h);
      sl[i] = l;
    }
    if (wide)
      for (size_t i = 0; i < t; ++i) {
        const u128 s = ((u128(sh[i]) << 64) | sl[i]) + total[i];
        sh[i] = uint64_t(s >> 64);
        sl[i] = uint64_t(s);
      }
    round_tile<Double, Wide>(sh, sl, keys, out, i0, t);
  }
}

void sum_rows_double(const void* in, size_t rows, size_t stride, size_t count, void* out) {
  if (rows == 2 && sum_pair<Double, Wide, double>(in, stride, count, out, sum_rows_double_general))
    return;
  sum_rows_double_general(in, rows, stride, count, out);
}

void sum_rows_float(const void* in, size_t rows, size_t stride, size_t count, void* out) {
  if (rows == 2 &&
      sum_pair<Single, Narrow, float>(in, stride, count, out, sum_rows_narrow<Single>))
    return;
  sum_rows_narrow<Single>(in, rows, stride, count, out);
}

}  // namespace

const ExactTable& COLL_EXACT_TABLE() {
  static const ExactTable table = [] {
    ExactTable t{COLL_KERNEL_ISA, {}};
    t.fn[COLL_DOUBLE] = sum_rows_double;
    t.fn[COLL_FLOAT] = sum_rows_float;
    t.fn[COLL_FLOAT16] = sum_rows_narrow<Half>;
    t.fn[COLL_BFLOAT16] = sum_rows_narrow<Brain>;
    return t;
  }();
  return table;
}

}  // namespace coll
