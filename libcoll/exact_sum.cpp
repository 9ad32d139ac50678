// The arithmetic of COLL_REPRODUCIBLE=exact (exact_sum.hpp has the
// definition). Integer arithmetic throughout: the bits do not depend on the
// CPU, the compiler's contraction of floating-point expressions or the
// floating-point environment (FTZ/DAZ, rounding mode).
#include "exact_sum.hpp"

#include <cstring>

#include "coll/coll.h"

namespace coll {
namespace {

// GCC and Clang on 64-bit targets (__extension__: -Wpedantic).
__extension__ typedef unsigned __int128 u128;

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

template <typename F>
uint16_t key_of(typename F::Bits b) {
  const bool negative = (b >> F::sign_shift) & 1;
  const uint32_t biased = uint32_t(b >> F::fraction) & F::max_biased;
  const auto fraction = b & ((typename F::Bits(1) << F::fraction) - 1);
  if (biased == F::max_biased) return kSpecial;
  if (biased == 0 && fraction == 0) return negative ? 0 : 1;
  return uint16_t(2 + (biased == 0 ? 0 : biased - 1));
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

template <typename F, typename A>
void to_fixed(const void* in, const uint16_t* keys, void* out, size_t count) {
  using Fixed = typename A::Fixed;
  for (size_t i = 0; i < count; ++i) {
    const typename F::Bits b = load<F>(in, i);
    const uint16_t key = keys[i];
    Fixed q = 0;
    const bool negative = (b >> F::sign_shift) & 1;
    const uint32_t biased = uint32_t(b >> F::fraction) & F::max_biased;
    const auto fraction = b & ((typename F::Bits(1) << F::fraction) - 1);
    if (key == kSpecial) {
      // Only which specials occur matters; finite values count nothing.
      if (biased == F::max_biased) q = fraction ? A::nan : negative ? A::minus_inf : A::plus_inf;
    } else if (key >= 2 && !(biased == 0 && fraction == 0)) {
      // x = m * 2^(exp - fraction), m with its leading bit; the grid step
      // is 2^g, g = e(key) - P; q = x / 2^g rounded.
      const uint64_t m = uint64_t(fraction) | (biased ? uint64_t(1) << F::fraction : 0);
      const int exp = (biased ? int(biased) : 1) - F::bias;
      const int shift = (exp - F::fraction) - (exponent_of_key<F>(key) - A::p);
      // x <= the largest magnitude < 2^(e + 1): shift <= P - fraction.
      const Fixed magnitude = shift >= 0 ? Fixed(m) << shift : Fixed(shift_right_even<uint64_t>(m, -shift));
      q = negative ? Fixed(0) - magnitude : magnitude;
    }
    std::memcpy(static_cast<char*>(out) + i * sizeof q, &q, sizeof q);
  }
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

template <typename F, typename A>
void from_fixed(const void* in, const uint16_t* keys, void* out, size_t count) {
  using Fixed = typename A::Fixed;
  using Bits = typename F::Bits;
  for (size_t i = 0; i < count; ++i) {
    Fixed s;
    std::memcpy(&s, static_cast<const char*>(in) + i * sizeof s, sizeof s);
    const uint16_t key = keys[i];
    Bits r;
    if (key == 0) {
      r = Bits(Bits(1) << F::sign_shift);  // every contribution -0
    } else if (key == 1) {
      r = 0;
    } else if (key == kSpecial) {
      const Fixed plus = s & A::field_mask, minus = (s / A::minus_inf) & A::field_mask;
      const Bits infinity = Bits(Bits(F::max_biased) << F::fraction);
      if (s / A::nan != 0 || (plus && minus))
        r = F::quiet_nan;
      else
        r = plus ? infinity : Bits(infinity | Bits(Bits(1) << F::sign_shift));
    } else {
      r = round_into<F>(s, exponent_of_key<F>(key) - A::p);
    }
    std::memcpy(static_cast<char*>(out) + i * sizeof r, &r, sizeof r);
  }
}

template <typename F>
void keys_of(const void* in, uint16_t* keys, size_t count) {
  for (size_t i = 0; i < count; ++i) keys[i] = key_of<F>(load<F>(in, i));
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

bool exact_sum_applies(int datatype, int op) {
  return op == COLL_SUM && (datatype == COLL_DOUBLE || datatype == COLL_FLOAT ||
                            datatype == COLL_FLOAT16 || datatype == COLL_BFLOAT16);
}

size_t exact_fixed_size(int datatype) { return datatype == COLL_DOUBLE ? 16 : 8; }

int exact_fixed_datatype(int datatype) { return datatype == COLL_DOUBLE ? 0 : COLL_INT64; }

void exact_sum_fixed128(void* dst, const void* a, const void* b, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    u128 x, y;
    std::memcpy(&x, static_cast<const char*>(a) + 16 * i, 16);
    std::memcpy(&y, static_cast<const char*>(b) + 16 * i, 16);
    x += y;
    std::memcpy(static_cast<char*>(dst) + 16 * i, &x, 16);
  }
}

void exact_keys(int datatype, const void* in, uint16_t* keys, size_t count) {
  dispatch(datatype, [&]<typename F, typename A>() { keys_of<F>(in, keys, count); });
}

void exact_to_fixed(int datatype, const void* in, const uint16_t* keys, void* fixed,
                    size_t count) {
  dispatch(datatype, [&]<typename F, typename A>() { to_fixed<F, A>(in, keys, fixed, count); });
}

void exact_from_fixed(int datatype, const void* fixed, const uint16_t* keys, void* out,
                      size_t count) {
  dispatch(datatype, [&]<typename F, typename A>() { from_fixed<F, A>(fixed, keys, out, count); });
}

}  // namespace coll
