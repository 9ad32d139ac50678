// COLL_FLOAT16 and COLL_BFLOAT16: the conversions of float16.hpp and the
// reduction kernels of every kernel set, against references written here
// another way: a value is the nearest entry of the sorted table of the
// format's finite values (ties to the even encoding), found by search in
// double arithmetic, not by bit manipulation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "datatype.hpp"
#include "float16.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace coll {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// What distinguishes the two formats for the references.
template <class Format>
struct Traits;
template <>
struct Traits<Float16> {
  static constexpr uint16_t kExponentMask = 0x7c00;
  static constexpr uint16_t kQuietBit = 0x200;
  static constexpr int kMaxExponent = 15;   // of the largest finite value
  static constexpr int kFractionBits = 10;  // below the binary point
  static constexpr int kMinExponent = -14;  // of the smallest normal value
  static constexpr int kDatatype = COLL_FLOAT16;
  static constexpr bool kWideningQuiets = true;  // as VCVTPH2PS
  // The float NaN's payload as the 16-bit NaN keeps it.
  static uint16_t payload(uint32_t float_bits) { return uint16_t((float_bits >> 13) & 0x3ff); }
};
template <>
struct Traits<BFloat16> {
  static constexpr uint16_t kExponentMask = 0x7f80;
  static constexpr uint16_t kQuietBit = 0x40;
  static constexpr int kMaxExponent = 127;
  static constexpr int kFractionBits = 7;
  static constexpr int kMinExponent = -126;
  static constexpr int kDatatype = COLL_BFLOAT16;
  static constexpr bool kWideningQuiets = false;  // a shift: the bits are kept
  static uint16_t payload(uint32_t float_bits) { return uint16_t((float_bits >> 16) & 0x7f); }
};

template <class Format>
bool is_nan16(uint16_t h) {
  constexpr uint16_t e = Traits<Format>::kExponentMask;
  return (h & e) == e && (h & ~e & 0x7fff) != 0;
}

// The value of a 16-bit encoding from its fields, with ldexp.
template <class Format>
double value_from_fields(uint16_t h) {
  using T = Traits<Format>;
  const int fraction_bits = T::kFractionBits;
  const int bias = 1 - T::kMinExponent;
  const int exponent = (h & 0x7fff) >> fraction_bits;
  const int fraction = h & ((1 << fraction_bits) - 1);
  const double magnitude =
      exponent == 0 ? std::ldexp(fraction, T::kMinExponent - fraction_bits)
                    : std::ldexp((1 << fraction_bits) + fraction, exponent - bias - fraction_bits);
  return (h & 0x8000) ? -magnitude : magnitude;
}

// The positive finite values of the format in increasing order (encodings
// 0 .. largest finite), then the power of two above the largest finite
// value standing for infinity: IEEE rounding with an unbounded exponent
// gives it to values from halfway between the two, ties included (the
// largest finite value has an odd encoding).
template <class Format>
const std::vector<double>& positive_values() {
  static const std::vector<double> table = [] {
    std::vector<double> t;
    for (uint32_t h = 0; h < Traits<Format>::kExponentMask; ++h)
      t.push_back(value_from_fields<Format>(uint16_t(h)));
    t.push_back(std::ldexp(1.0, Traits<Format>::kMaxExponent + 1));
    return t;
  }();
  return table;
}

// Round to nearest, ties to even, by search. x is not a NaN.
template <class Format>
uint16_t nearest(double x) {
  const auto sign = uint16_t(std::signbit(x) ? 0x8000 : 0);
  const double m = std::fabs(x);
  const std::vector<double>& t = positive_values<Format>();
  if (m >= t.back()) return sign | Traits<Format>::kExponentMask;
  const size_t hi = size_t(std::lower_bound(t.begin(), t.end(), m) - t.begin());
  if (t[hi] == m || hi == 0) return uint16_t(sign | hi);
  const size_t lo = hi - 1;
  const double below = m - t[lo], above = t[hi] - m;  // exact (Sterbenz)
  const size_t pick = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
  return uint16_t(sign | pick);  // the encoding of t[i] is i; infinity's too
}

template <class Format>
uint16_t expected_from_float(float f) {
  if (std::isnan(f)) {
    const uint32_t u = bits_of(f);
    return uint16_t(((u >> 16) & 0x8000) | Traits<Format>::kExponentMask |
                    Traits<Format>::kQuietBit | Traits<Format>::payload(u));
  }
  return nearest<Format>(double(f));
}

template <class Format>
class Conversion : public testing::Test {};
using Formats = testing::Types<Float16, BFloat16>;
TYPED_TEST_SUITE(Conversion, Formats);

// Every encoding: to_float gives the value of its fields (infinities, and
// NaNs with sign and payload kept, float16's made quiet), and from_float
// gives the encoding back (a NaN made quiet).
TYPED_TEST(Conversion, EveryEncodingRoundTrips) {
  using F = TypeParam;
  using T = Traits<F>;
  size_t wrong = 0;
  for (uint32_t i = 0; i < 0x10000; ++i) {
    const auto h = uint16_t(i);
    const float f = F::to_float(h);
    const bool negative = (h & 0x8000) != 0;
    if (is_nan16<F>(h)) {
      const uint32_t u = bits_of(f);
      wrong += !std::isnan(f) || std::signbit(f) != negative ||
               T::payload(u) !=
                   ((h & ~T::kExponentMask & 0x7fff) | (T::kWideningQuiets ? T::kQuietBit : 0));
      wrong += F::from_float(f) != (h | T::kQuietBit);
    } else if ((h & 0x7fff) == T::kExponentMask) {
      wrong += !std::isinf(f) || std::signbit(f) != negative;
      wrong += F::from_float(f) != h;
    } else {
      wrong += double(f) != value_from_fields<F>(h) || std::signbit(f) != negative;
      wrong += F::from_float(f) != h;
    }
  }
  EXPECT_EQ(wrong, 0u);
}

// from_float against the search, at every tie (the midpoint between two
// neighbours, exact in float), one float step either side of it, and on
// random float bit patterns (every exponent: overflow, subnormals, NaNs).
TYPED_TEST(Conversion, RoundsToNearestEven) {
  using F = TypeParam;
  std::vector<float> inputs;
  const std::vector<double>& t = positive_values<F>();
  for (size_t i = 0; i + 1 < t.size(); ++i) {
    const auto mid = float((t[i] + t[i + 1]) / 2);
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      inputs.push_back(f);
      inputs.push_back(-f);
    }
  }
  std::mt19937 rng(16);
  for (int i = 0; i < 1 << 20; ++i) inputs.push_back(float_of(uint32_t(rng())));
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 3.4028235e38f, 1e-45f, 65504.0f,
                  65519.996f, 65520.0f, 0x1p-25f, 0x1.000002p-25f, 0x1p-24f, 0x1.8p-24f})
    inputs.push_back(f);
  size_t wrong = 0;
  for (float f : inputs) {
    const uint16_t want = expected_from_float<F>(f), got = F::from_float(f);
    if (got != want && ++wrong <= 5)
      ADD_FAILURE() << std::hexfloat << f << " (0x" << std::hex << bits_of(f) << "): got 0x" << got
                    << ", want 0x" << want;
  }
  EXPECT_EQ(wrong, 0u);
}

TEST(Float16Conversion, EdgeCases) {
  EXPECT_EQ(Float16::from_float(65504.0f), 0x7bff);               // largest finite
  EXPECT_EQ(Float16::from_float(65519.996f), 0x7bff);             // just under the tie
  EXPECT_EQ(Float16::from_float(65520.0f), 0x7c00);               // the tie: to even, infinity
  EXPECT_EQ(Float16::from_float(-1e10f), 0xfc00);                 // overflow
  EXPECT_EQ(Float16::from_float(0x1p-24f), 0x0001);               // smallest subnormal
  EXPECT_EQ(Float16::from_float(0x1p-25f), 0x0000);               // tie with zero: even
  EXPECT_EQ(Float16::from_float(0x1.8p-24f), 0x0002);             // tie 1.5: to even 2
  EXPECT_EQ(Float16::from_float(0x1.ffep-15f), 0x0400);           // rounds up into the normals
  EXPECT_EQ(Float16::from_float(1.0f + 0x1p-11f), 0x3c00);        // tie: to even 1
  EXPECT_EQ(Float16::from_float(1.0f + 3 * 0x1p-11f), 0x3c02);    // tie: to even
  EXPECT_EQ(Float16::from_float(float_of(0x7f800001u)), 0x7e00);  // signalling: quiet
  EXPECT_EQ(Float16::to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(Float16::to_float(0x7bff), 65504.0f);
  EXPECT_EQ(bits_of(Float16::to_float(0x7c01)), 0x7fc02000u);  // made quiet
}

TEST(BFloat16Conversion, EdgeCases) {
  EXPECT_EQ(BFloat16::from_float(float_of(0x7f7fffffu)), 0x7f80);  // FLT_MAX: infinity
  EXPECT_EQ(BFloat16::from_float(float_of(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(BFloat16::from_float(float_of(0x00008000u)), 0x0000);  // subnormal tie: even
  EXPECT_EQ(BFloat16::from_float(float_of(0x00018000u)), 0x0002);
  EXPECT_EQ(BFloat16::from_float(float_of(0x3f808000u)), 0x3f80);  // tie after 1: even
  EXPECT_EQ(BFloat16::from_float(float_of(0x3f818000u)), 0x3f82);
  EXPECT_EQ(BFloat16::from_float(float_of(0x7f800001u)), 0x7fc0);  // payload truncated away
  EXPECT_EQ(BFloat16::from_float(float_of(0xff800000u)), 0xff80);
}

#if defined(__x86_64__)
// The F16C instructions the AVX2 and AVX-512 kernels use convert exactly
// as float16.hpp does, NaNs included.
// (The 128-bit forms: clang's _cvtss_sh is a compound literal, which
// -Wpedantic rejects in C++.)
__attribute__((target("f16c"))) float f16c_to_float(uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}
__attribute__((target("f16c"))) uint16_t f16c_from_float(float f) {
  return uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}

TEST(Float16Conversion, SameAsF16C) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "no F16C on this CPU";
  size_t wrong = 0;
  for (uint32_t i = 0; i < 0x10000; ++i)
    wrong += bits_of(f16c_to_float(uint16_t(i))) != bits_of(Float16::to_float(uint16_t(i)));
  std::mt19937 rng(0xf16c);
  for (int i = 0; i < 1 << 22; ++i) {
    const float f = float_of(uint32_t(rng()));
    wrong += f16c_from_float(f) != Float16::from_float(f);
  }
  EXPECT_EQ(wrong, 0u);
}
#endif

// The reduction of two encodings, in double (exact for SUM and PROD of two
// float16 values and PROD of two bfloat16; a bfloat16 SUM rounded to 53
// bits first still rounds correctly, 53 >= 2 * 8 + 2), rounded by search.
template <class Format>
uint16_t reference(int op, uint16_t a, uint16_t b) {
  const double x = value_from_fields<Format>(a), y = value_from_fields<Format>(b);
  const bool x_inf = (a & 0x7fff) == Traits<Format>::kExponentMask;
  const bool y_inf = (b & 0x7fff) == Traits<Format>::kExponentMask;
  if (is_nan16<Format>(a) || is_nan16<Format>(b)) return Format::kQuietNan;
  const double xv = x_inf ? std::copysign(INFINITY, x) : x;
  const double yv = y_inf ? std::copysign(INFINITY, y) : y;
  double r = 0;
  switch (op) {
    case COLL_SUM:
      r = xv + yv;
      break;
    case COLL_PROD:
      r = xv * yv;
      break;
    case COLL_MIN:
      return yv < xv ? b : a;
    case COLL_MAX:
      return xv < yv ? b : a;
  }
  return std::isnan(r) ? Format::kQuietNan : nearest<Format>(r);
}

// Random bit patterns, one in four a special value of either format (zeros
// of both signs, so that MIN and MAX meet +0 against -0; infinities and
// NaNs of both; the largest finite and smallest subnormal float16 values).
std::vector<uint16_t> random_encodings(std::mt19937& rng, size_t n) {
  static constexpr uint16_t kSpecial[] = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x7f80,
                                          0xff80, 0x7fc0, 0x7f81, 0x7bff, 0x0001, 0x3c00, 0xbc00};
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) {
    const uint32_t r = uint32_t(rng());
    x = (r >> 16) % 4 == 0 ? kSpecial[(r >> 18) % std::size(kSpecial)] : uint16_t(r);
  }
  return v;
}

const int kArithmeticOps[] = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX};

TEST(Float16Datatypes, SizesNamesAndOps) {
  EXPECT_EQ(datatype_size(COLL_FLOAT16), 2u);
  EXPECT_EQ(datatype_size(COLL_BFLOAT16), 2u);
  EXPECT_EQ(coll_datatype_size(COLL_BFLOAT16), 2u);
  EXPECT_STREQ(datatype_name(COLL_FLOAT16), "float16");
  EXPECT_STREQ(datatype_name(COLL_BFLOAT16), "bfloat16");
  EXPECT_FALSE(is_integer_type(COLL_FLOAT16));
  for (int dt : {COLL_FLOAT16, COLL_BFLOAT16}) {
    for (int op : kArithmeticOps) EXPECT_NE(reduce_function(dt, op), nullptr);
    for (int op : {COLL_BAND, COLL_BOR, COLL_BXOR, COLL_LAND, COLL_LOR, COLL_LXOR})
      EXPECT_EQ(reduce_function(dt, op), nullptr);
  }
}

// Every kernel set against the reference, bit for bit: every encoding as the
// first operand against random second ones, then random inputs at odd
// counts around the vector widths with the destination disjoint from or
// equal to either input and a canary after it.
template <class Format>
void check_kernels(const std::string& set) {
  constexpr int dt = Traits<Format>::kDatatype;
  std::mt19937 rng(uint32_t(dt * 31 + set.size()));
  for (int op : kArithmeticOps) {
    const ReduceFn f = reduce_function(dt, op);
    ASSERT_NE(f, nullptr);
    std::vector<uint16_t> every(0x10000);
    for (uint32_t i = 0; i < every.size(); ++i) every[i] = uint16_t(i);
    const std::vector<uint16_t> seconds = random_encodings(rng, every.size());
    std::vector<uint16_t> out(every.size());
    f(out.data(), every.data(), seconds.data(), every.size());
    const std::string what = "kernels " + set + ", " + datatype_name(dt) + " " + op_name(op);
    size_t wrong = 0;
    for (size_t i = 0; i < every.size(); ++i)
      wrong += out[i] != reference<Format>(op, every[i], seconds[i]);
    EXPECT_EQ(wrong, 0u) << what << ", every encoding";

    constexpr uint16_t kCanary = 0x5a5a;
    for (size_t count : {1, 3, 7, 9, 15, 17, 31, 33, 63, 65, 1001, 4099}) {
      const std::vector<uint16_t> a = random_encodings(rng, count),
                                  b = random_encodings(rng, count);
      for (int alias = 0; alias < 3; ++alias) {  // dst: fresh, == a, == b
        std::vector<uint16_t> x = a, y = b, dst_fresh(count);
        for (std::vector<uint16_t>* v : {&x, &y, &dst_fresh}) v->push_back(kCanary);
        std::vector<uint16_t>& dst = alias == 0 ? dst_fresh : alias == 1 ? x : y;
        f(dst.data(), x.data(), y.data(), count);
        wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += dst[i] != reference<Format>(op, a[i], b[i]);
        EXPECT_EQ(wrong, 0u) << what << ", count " << count << ", alias " << alias;
        EXPECT_EQ(dst[count], kCanary) << what << ", count " << count << ": written past the end";
      }
    }
  }
}

TEST(Float16Datatypes, EveryKernelSetMatchesTheReference) {
  for (const std::string& set : reduce_kernel_sets()) {
    select_reduce_kernels(set);
    check_kernels<Float16>(set);
    check_kernels<BFloat16>(set);
  }
  select_reduce_kernels("auto");
}

// The vector kernels against the scalar ones (the baseline set) on the same
// random inputs, odd counts: bit for bit.
TEST(Float16Datatypes, VectorKernelsEqualTheScalarOnes) {
  std::mt19937 rng(7);
  for (int dt : {COLL_FLOAT16, COLL_BFLOAT16}) {
    for (int op : kArithmeticOps) {
      for (size_t count : {5, 13, 127, 999, 10007}) {
        const std::vector<uint16_t> a = random_encodings(rng, count),
                                    b = random_encodings(rng, count);
        select_reduce_kernels("baseline");
        std::vector<uint16_t> want(count);
        reduce_function(dt, op)(want.data(), a.data(), b.data(), count);
        for (const std::string& set : reduce_kernel_sets()) {
          select_reduce_kernels(set);
          std::vector<uint16_t> got(count);
          reduce_function(dt, op)(got.data(), a.data(), b.data(), count);
          EXPECT_EQ(got, want) << set << " " << datatype_name(dt) << " " << op_name(op) << " count "
                               << count;
        }
      }
    }
  }
  select_reduce_kernels("auto");
}

}  // namespace
}  // namespace coll
