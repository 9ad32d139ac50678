// The scalar exact-sum kernel as it was before the SIMD work (issue 36,
// libcoll/exact_sum.cpp at f63ca8a), kept as the reference that the unit
// test (exact_sum_test.cpp) and the kernel benchmark
// (bench/exact_kernel_bench.cpp) compare the library's kernels with: the
// same definition (libcoll/exact_sum.hpp), the bits must agree. Do not
// optimise it. Phase entry points (keys only, keys + accumulation) serve the
// benchmark's breakdown.
#include "exact_sum_reference.hpp"

#include <cstring>

#include "coll/coll.h"

namespace coll::reference {
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

template <typename F>
typename F::Bits load(const void* p, size_t i) {
  typename F::Bits b;
  std::memcpy(&b, static_cast<const char*>(p) + i * sizeof b, sizeof b);
  return b;
}

// Without branches (selects): keys are taken of every contribution, and
// their classes are as mixed as the data.
template <typename F>
uint16_t key_of(typename F::Bits b) {
  using Bits = typename F::Bits;
  const auto negative = uint32_t((b >> F::sign_shift) & 1);
  const uint32_t biased = uint32_t(b >> F::fraction) & F::max_biased;
  const bool zero = Bits(b << 1) == 0;  // the sign shifted out
  uint32_t key = biased + 1 + (biased == 0);  // a subnormal counts as biased 1
  key = zero ? 1 - negative : key;
  key = biased == F::max_biased ? kSpecial : key;
  return uint16_t(key);
}

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
bool round_normal(Fixed s, int g, typename F::Bits& out) {
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

// acc[i] += contribution i of a row on the grid of keys[i] (step 2).
template <typename F, typename A>
void accumulate(const char* row, const uint16_t* keys, typename A::Fixed* acc, size_t count) {
  using Fixed = typename A::Fixed;
  using Bits = typename F::Bits;
  constexpr Bits fraction_mask = (Bits(1) << F::fraction) - 1;
  for (size_t i = 0; i < count; ++i) {
    const Bits b = load<F>(row, i);
    const uint16_t key = keys[i];
    const uint32_t biased = uint32_t(b >> F::fraction) & F::max_biased;
    // A normal x within P - fraction bits of its key: a shift left (the
    // general case's first branch, without its tests).
    const int shift = int(biased) - int(key) + 1 + A::p - F::fraction;
    if (biased != 0 && biased != F::max_biased && key != kSpecial && shift >= 0) [[likely]] {
      const Fixed magnitude = Fixed(uint64_t(b & fraction_mask) | uint64_t(1) << F::fraction)
                              << shift;
      // Negated without a branch: signs are as random as the data.
      const Fixed negate = Fixed(0) - Fixed((b >> F::sign_shift) & 1);
      acc[i] += (magnitude ^ negate) - negate;
    } else {
      acc[i] += fix_one<F, A>(b, key);
    }
  }
}

// acc[i] += contribution i of a row, for double: the common case (a
// normal x within 42 bits of its key, so q = m * 2^shift exactly, shift in
// [0, 42], m < 2^53) in two 64-bit limbs without a carry between them,
// q = hi * 2^47 + lo with hi < 2^48 and lo < 2^47 - shifts, masks and adds
// that a compiler can vectorise, where a 128-bit shift and add cannot be;
// the rest straight into the 128-bit total.
void accumulate_double(const char* row, const uint16_t* keys, int64_t* hi, int64_t* lo,
                       u128* total, size_t count) {
  using F = Double;
  constexpr uint64_t fraction_mask = (uint64_t(1) << F::fraction) - 1;
  constexpr uint64_t low_mask = (uint64_t(1) << 47) - 1;
  for (size_t i = 0; i < count; ++i) {
    const uint64_t b = load<F>(row, i);
    const uint16_t key = keys[i];
    const auto biased = int(uint32_t(b >> F::fraction) & F::max_biased);
    const int shift = biased - int(key) + 1 + Wide::p - F::fraction;
    if (biased != 0 && biased != int(F::max_biased) && key != kSpecial && shift >= 0)
        [[likely]] {
      const uint64_t m = (b & fraction_mask) | (uint64_t(1) << F::fraction);
      const auto h = int64_t(m >> (47 - shift)), l = int64_t((m << shift) & low_mask);
      const int64_t negate = -int64_t(b >> 63);  // without a branch
      hi[i] += (h ^ negate) - negate;
      lo[i] += (l ^ negate) - negate;
    } else {
      total[i] += fix_one<F, Wide>(b, key);
    }
  }
}

// The tile's keys: a MAX over the rows.
template <typename F>
void tile_keys(const char* base, size_t rows, size_t stride, size_t i0, size_t t,
               uint16_t* keys) {
  for (size_t i = 0; i < t; ++i) keys[i] = 0;
  for (size_t r = 0; r < rows; ++r) {
    const char* row = base + (r * stride + i0) * sizeof(typename F::Bits);
    for (size_t i = 0; i < t; ++i) {
      // A MAX without a branch: which row holds the largest is random.
      const uint32_t k = key_of<F>(load<F>(row, i)), m = keys[i];
      keys[i] = uint16_t(m ^ ((m ^ k) & (0u - uint32_t(k > m))));
    }
  }
}

constexpr size_t kTile = 256;

// Steps 1-3 over tiles of elements: the tile's keys, then its accumulators
// (a sum over the rows), then its results. The accumulators stay in the
// tile (on the stack): nothing wide is stored or sent. A tile reads all
// its inputs before it writes a result, so out may be the one row of in.
uint64_t g_sink = 0;  // the benchmark's phases without the rounding

template <typename F, typename A, bool kRound = true>
void sum_rows(const void* in, size_t rows, size_t stride, size_t count, void* out) {
  using Fixed = typename A::Fixed;
  using Bits = typename F::Bits;
  uint16_t keys[kTile];
  Fixed acc[kTile];
  const auto* base = static_cast<const char*>(in);
  for (size_t i0 = 0; i0 < count; i0 += kTile) {
    const size_t t = count - i0 < kTile ? count - i0 : kTile;
    tile_keys<F>(base, rows, stride, i0, t, keys);
    for (size_t i = 0; i < t; ++i) acc[i] = 0;
    for (size_t r = 0; r < rows; ++r)
      accumulate<F, A>(base + (r * stride + i0) * sizeof(Bits), keys, acc, t);
    if constexpr (kRound) {
      for (size_t i = 0; i < t; ++i) {
        const Bits r = result_of<F, A>(acc[i], keys[i]);
        std::memcpy(static_cast<char*>(out) + (i0 + i) * sizeof r, &r, sizeof r);
      }
    } else {
      for (size_t i = 0; i < t; ++i) g_sink += uint64_t(acc[i]);
    }
  }
}

// Double: the limbs of accumulate_double, folded into the 128-bit total
// every 2^14 rows (hi's terms are below 2^48, lo's below 2^47: 2^14 of
// them stay below 2^62) and at the end.
template <bool kRound>
void sum_rows_double(const void* in, size_t rows, size_t stride, size_t count, void* out) {
  constexpr size_t kGroup = size_t(1) << 14;
  uint16_t keys[kTile];
  int64_t hi[kTile], lo[kTile];
  u128 total[kTile];
  const auto* base = static_cast<const char*>(in);
  for (size_t i0 = 0; i0 < count; i0 += kTile) {
    const size_t t = count - i0 < kTile ? count - i0 : kTile;
    tile_keys<Double>(base, rows, stride, i0, t, keys);
    for (size_t i = 0; i < t; ++i) hi[i] = lo[i] = 0, total[i] = 0;
    for (size_t r = 0; r < rows; ++r) {
      accumulate_double(base + (r * stride + i0) * 8, keys, hi, lo, total, t);
      if ((r + 1) % kGroup == 0 || r + 1 == rows)
        for (size_t i = 0; i < t; ++i) {
          // Two's complement: the signed limbs' sum, wrapped as the total.
          total[i] += (u128(i128(hi[i])) << 47) + u128(i128(lo[i]));
          hi[i] = lo[i] = 0;
        }
    }
    if constexpr (kRound) {
      for (size_t i = 0; i < t; ++i) {
        const uint64_t r = result_of<Double, Wide>(total[i], keys[i]);
        std::memcpy(static_cast<char*>(out) + (i0 + i) * 8, &r, 8);
      }
    } else {
      for (size_t i = 0; i < t; ++i) g_sink += uint64_t(total[i]);
    }
  }
}

template <>
void sum_rows<Double, Wide, true>(const void* in, size_t rows, size_t stride, size_t count,
                                  void* out) {
  sum_rows_double<true>(in, rows, stride, count, out);
}
template <>
void sum_rows<Double, Wide, false>(const void* in, size_t rows, size_t stride, size_t count,
                                   void* out) {
  sum_rows_double<false>(in, rows, stride, count, out);
}

// Calls fn.template operator()<Format, Accumulator>() for the datatype.
template <typename Fn>
void dispatch(int datatype, Fn&& fn) {
  switch (datatype) {
    case COLL_DOUBLE: fn.template operator()<Double, Wide>(); break;
    case COLL_FLOAT: fn.template operator()<Single, Narrow>(); break;
    case COLL_FLOAT16: fn.template operator()<Half, Narrow>(); break;
    case COLL_BFLOAT16: fn.template operator()<Brain, Narrow>(); break;
    default: break;
  }
}

}  // namespace

void exact_sum_rows(int datatype, const void* in, size_t rows, size_t stride, size_t count,
                    void* out) {
  dispatch(datatype,
           [&]<typename F, typename A>() { sum_rows<F, A>(in, rows, stride, count, out); });
}

// Step 1 alone (keys over tiles), the keys' XOR returned so that it is not
// optimised away.
unsigned keys_only(int datatype, const void* in, size_t rows, size_t stride, size_t count) {
  unsigned x = 0;
  dispatch(datatype, [&]<typename F, typename A>() {
    uint16_t keys[kTile];
    const auto* base = static_cast<const char*>(in);
    for (size_t i0 = 0; i0 < count; i0 += kTile) {
      const size_t t = count - i0 < kTile ? count - i0 : kTile;
      tile_keys<F>(base, rows, stride, i0, t, keys);
      for (size_t i = 0; i < t; ++i) x ^= keys[i];
    }
  });
  return x;
}

// Steps 1 and 2 (no rounding).
void keys_and_accumulate(int datatype, const void* in, size_t rows, size_t stride, size_t count) {
  dispatch(datatype, [&]<typename F, typename A>() {
    sum_rows<F, A, false>(in, rows, stride, count, nullptr);
  });
}

}  // namespace coll::reference
