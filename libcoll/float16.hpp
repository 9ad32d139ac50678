// The 16-bit floating types (COLL_FLOAT16: IEEE 754 binary16; COLL_BFLOAT16:
// the top half of a binary32) held as their bits in a uint16_t, and their
// portable conversions to and from float. Rounding is to nearest, ties to
// even, in integer arithmetic: the result is the same on every CPU and
// whatever the floating-point environment (MXCSR's FTZ/DAZ do not touch it).
//
// Everything here has internal linkage on purpose: reduce_kernels.cpp is
// compiled once per instruction set and includes this file, and an inline
// function with external linkage could be kept, by the linker, from the
// AVX-512 build for the whole library (see reduce_kernels.cpp). For the
// same reason no standard-library helper is called (__builtin_bit_cast,
// not std::bit_cast).
#pragma once

#include <cstdint>

namespace coll {
namespace {

constexpr uint32_t float_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
constexpr float bits_float(uint32_t u) { return __builtin_bit_cast(float, u); }

// binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits.
struct Float16 {
  // A NaN result of a reduction, whatever the NaN operands (reduce_kernels.cpp).
  static constexpr uint16_t kQuietNan = 0x7e00;

  // Exact: every binary16 value is a binary32 value. A NaN keeps its sign
  // and payload and becomes quiet, as the F16C instruction VCVTPH2PS does.
  static constexpr float to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exponent = (h >> 10) & 0x1fu;
    const uint32_t fraction = h & 0x3ffu;
    if (exponent == 0x1f)  // infinity, NaN
      return bits_float(sign | 0x7f800000u | (fraction << 13) | (fraction ? 0x400000u : 0u));
    if (exponent != 0) return bits_float(sign | ((exponent + 127 - 15) << 23) | (fraction << 13));
    if (fraction == 0) return bits_float(sign);
    // Subnormal, fraction * 2^-24: normalise so the leading 1 is implicit.
    const int top = 31 - __builtin_clz(fraction);  // 0..9
    const uint32_t float_exponent = uint32_t(top - 24 + 127);
    return bits_float(sign | (float_exponent << 23) | ((fraction << (23 - top)) & 0x7fffffu));
  }

  // Round to nearest even; finite values from 65520 up become infinity, those
  // up to 2^-25 zero (2^-25 itself is a tie, and 0 is even). A NaN keeps its
  // sign and the top of its payload and becomes quiet, as VCVTPS2PH does.
  static constexpr uint16_t from_float(float f) {
    const uint32_t x = float_bits(f);
    const auto sign = uint16_t((x >> 16) & 0x8000u);
    const uint32_t magnitude = x & 0x7fffffffu;
    if (magnitude > 0x7f800000u)  // NaN
      return uint16_t(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
    if (magnitude >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520, infinity
    if (magnitude >= 0x38800000u) {                                 // >= 2^-14: a normal binary16
      // Rebias the exponent in place; a carry out of the fraction while
      // rounding increments the exponent, which is what rounding up means.
      const uint32_t rebiased = magnitude - ((127u - 15u) << 23);
      return uint16_t(sign | ((rebiased + 0xfffu + ((rebiased >> 13) & 1u)) >> 13));
    }
    if (magnitude < 0x33000000u) return sign;  // < 2^-25
    // Subnormal binary16: the 24-bit significand shifted to units of 2^-24.
    // A result of 0x400 is the smallest normal, correctly encoded as such.
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - (magnitude >> 23);  // 14..24
    const uint32_t kept = significand >> shift;
    const uint32_t rest = significand & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    return uint16_t(sign | (kept + (rest > half || (rest == half && (kept & 1u)))));
  }
};

// bfloat16: 1 sign, 8 exponent (bias 127), 7 fraction bits: binary32 with
// the low 16 fraction bits dropped, so subnormals and the range are float's.
struct BFloat16 {
  static constexpr uint16_t kQuietNan = 0x7fc0;

  // Exact, NaNs included (bit for bit).
  static constexpr float to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

  // Round to nearest even (a carry may reach the exponent: the largest
  // finite values round up to infinity). A NaN keeps its sign and the top of
  // its payload and becomes quiet (the truncated payload could be zero,
  // which would read as infinity).
  static constexpr uint16_t from_float(float f) {
    const uint32_t x = float_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);
    return uint16_t((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
};

}  // namespace
}  // namespace coll
