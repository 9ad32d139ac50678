// The exact-sum kernels (libcoll/exact_kernels.cpp, every build this CPU
// runs: baseline, AVX2, AVX-512) against the scalar reference they replaced
// (exact_sum_reference.cpp): bitwise the same results on random data with
// wide exponent ranges, cancellation, subnormals, zeros of both signs,
// infinities and NaN, overflow, every length 0-70 and larger ones, row
// counts 1-9 and past the double kernel's fold of 2^14 rows, strided rows
// and the in-place form.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "exact_sum.hpp"
#include "exact_sum_reference.hpp"

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace {

enum class Kind {
  kUniform,      // x in [-1, 1)
  kWide,         // x * 2^[-60, 60]
  kBits,         // any bit pattern: every exponent, subnormals, specials
  kCancel,       // pairs x, -x and a few small terms: results near 0, subnormal
  kFar,          // magnitudes 2^[-200, 200]: contributions far below the largest round
  kSpecials,     // mostly finite, some zeros, infinities and NaN
  kHuge,         // near the largest finite: sums overflow
  kTiny,         // subnormals and the smallest normals
};

struct Type {
  int datatype;
  size_t size;
  const char* name;
};
const Type kTypes[] = {{COLL_DOUBLE, 8, "double"},
                       {COLL_FLOAT, 4, "float"},
                       {COLL_FLOAT16, 2, "float16"},
                       {COLL_BFLOAT16, 2, "bfloat16"}};

// One element's bits in the type, from a double (float16/bfloat16: by
// truncation of the float's bits - any pattern will do; kBits uses raw bits).
void put(const Type& t, std::vector<char>& buf, size_t i, double x) {
  if (t.datatype == COLL_DOUBLE) {
    std::memcpy(buf.data() + i * 8, &x, 8);
  } else {
    const auto f = float(x);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    if (t.datatype == COLL_FLOAT) {
      std::memcpy(buf.data() + i * 4, &b, 4);
    } else if (t.datatype == COLL_BFLOAT16) {
      const auto h = uint16_t(b >> 16);
      std::memcpy(buf.data() + i * 2, &h, 2);
    } else {  // float16 from the float's sign, exponent (rebiased, clamped) and fraction
      const uint32_t sign = b >> 31;
      int e = int((b >> 23) & 0xff) - 127 + 15;
      uint32_t frac = (b >> 13) & 0x3ff;
      if (((b >> 23) & 0xff) == 0xff) e = 31;
      else if (e >= 31) e = 31, frac = 0;  // infinity
      else if (e <= 0) e = 0;               // a subnormal (or zero) pattern
      const auto h = uint16_t((sign << 15) | (uint32_t(e) << 10) | frac);
      std::memcpy(buf.data() + i * 2, &h, 2);
    }
  }
}

void fill(const Type& t, Kind kind, std::vector<char>& buf, size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  const double inf = std::numeric_limits<double>::infinity();
  const double big = t.datatype == COLL_DOUBLE ? 1e308
                     : t.datatype == COLL_FLOAT16 ? 6.0e4
                                                  : 3.0e38;
  const int min_exp = t.datatype == COLL_DOUBLE ? -1074
                      : t.datatype == COLL_FLOAT16 ? -24
                                                   : -149;
  buf.assign(n * t.size, 0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    double x = u(rng);
    switch (kind) {
      case Kind::kUniform: break;
      case Kind::kWide: x = std::ldexp(x, int(r % 121) - 60); break;
      case Kind::kBits: {
        const uint64_t bits = rng();
        std::memcpy(buf.data() + i * t.size, &bits, t.size);
        continue;
      }
      case Kind::kCancel:
        // Element i of a row: +-v(i) in alternate rows (the row count
        // changes which), a small term now and then.
        x = std::ldexp(double(1 + (i * 2654435761u) % 1000003) / 1000003.0, int(i % 40) - 20);
        if (r % 2) x = -x;
        if (r % 7 == 0) x = std::ldexp(u(rng), -40);
        break;
      case Kind::kFar: x = std::ldexp(x, int(r % 401) - 200); break;
      case Kind::kSpecials:
        switch (r % 16) {
          case 0: x = 0.0; break;
          case 1: x = -0.0; break;
          case 2: x = inf; break;
          case 3: x = -inf; break;
          case 4: x = std::nan(""); break;
          case 5: x = -std::nan(""); break;
          default: break;
        }
        break;
      case Kind::kHuge: x = (r % 2 ? big : -big) * (0.5 + std::fabs(x) / 2); break;
      case Kind::kTiny: x = std::ldexp(x, min_exp + int(r % 30)); break;
    }
    put(t, buf, i, x);
  }
}

// out of every kernel build == the reference's, bitwise.
void check(const Type& t, const std::vector<char>& in, size_t rows, size_t stride, size_t count,
           const std::string& what) {
  std::vector<char> want(count * t.size + 1, 0x5a), got(count * t.size + 1, 0x5a);
  coll::reference::exact_sum_rows(t.datatype, in.data(), rows, stride, count, want.data());
  for (const std::string& isa : coll::exact_sum_kernel_sets()) {
    std::fill(got.begin(), got.end(), char(0x33));
    got.back() = 0x5a;
    ASSERT_TRUE(
        coll::exact_sum_rows_with(isa, t.datatype, in.data(), rows, stride, count, got.data()));
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(0, std::memcmp(want.data() + i * t.size, got.data() + i * t.size, t.size))
          << t.name << " " << isa << " " << what << " rows " << rows << " count " << count
          << " stride " << stride << ": element " << i << " differs";
    ASSERT_EQ(got.back(), 0x5a) << "wrote past the end";
  }
  // exact_sum_rows (the build chosen here) agrees as well.
  coll::exact_sum_rows(t.datatype, in.data(), rows, stride, count, got.data());
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), count * t.size)) << t.name << " " << what;
}

const Kind kKinds[] = {Kind::kUniform, Kind::kWide,     Kind::kBits, Kind::kCancel,
                       Kind::kFar,     Kind::kSpecials, Kind::kHuge, Kind::kTiny};

TEST(ExactSum, KernelSetsIncludeBaseline) {
  const auto sets = coll::exact_sum_kernel_sets();
  ASSERT_FALSE(sets.empty());
  EXPECT_EQ(sets.front(), "baseline");
  for (const auto& s : sets) std::printf("exact kernels: %s\n", s.c_str());
}

TEST(ExactSum, EveryShortLengthAndRowCount) {
  std::mt19937_64 rng(1);
  std::vector<char> in;
  for (const Type& t : kTypes)
    for (Kind kind : kKinds)
      for (size_t rows = 1; rows <= 9; ++rows)
        for (size_t count = 0; count <= 70; ++count) {
          fill(t, kind, in, rows * count, rng);
          check(t, in, rows, count, count, "kind " + std::to_string(int(kind)));
          if (::testing::Test::HasFatalFailure()) return;
        }
}

TEST(ExactSum, LargeAndStrided) {
  std::mt19937_64 rng(2);
  std::vector<char> in;
  for (const Type& t : kTypes)
    for (Kind kind : kKinds)
      for (size_t rows : {1, 2, 3, 4, 7, 16})
        for (size_t count : {511, 512, 513, 1000, 4097, 20011}) {
          const size_t stride = count + (rows % 2 ? 0 : 5);  // a gap between rows
          fill(t, kind, in, rows * stride, rng);
          check(t, in, rows, stride, count, "kind " + std::to_string(int(kind)));
          if (::testing::Test::HasFatalFailure()) return;
        }
}

// Past 2^14 rows the double kernel folds its limbs into the 128-bit total.
TEST(ExactSum, ManyRows) {
  std::mt19937_64 rng(3);
  std::vector<char> in;
  for (const Type& t : kTypes)
    for (Kind kind : {Kind::kUniform, Kind::kWide, Kind::kFar, Kind::kHuge, Kind::kSpecials})
      for (size_t rows : {16383, 16384, 16385, 40000}) {
        const size_t count = 3;
        fill(t, kind, in, rows * count, rng);
        check(t, in, rows, count, count, "kind " + std::to_string(int(kind)));
        if (::testing::Test::HasFatalFailure()) return;
      }
}

// Same-sign terms of the largest magnitude in many rows: sums far above the
// largest contribution (the limbs' headroom, the rounding's leading bit).
TEST(ExactSum, SameSignMax) {
  std::mt19937_64 rng(4);
  std::vector<char> in;
  for (const Type& t : kTypes)
    for (size_t rows : {2, 100, 16385}) {
      const size_t count = 600;
      in.assign(rows * count * t.size, 0);
      for (size_t i = 0; i < rows * count; ++i) {
        // Every fraction bit set, the same exponent per element.
        const uint64_t exp_field = t.datatype == COLL_DOUBLE ? 0x7fe : t.datatype == COLL_FLOAT ? 0xfe
                                   : t.datatype == COLL_FLOAT16 ? 0x1e : 0xfe;
        const uint64_t e = (i % count) % 3 == 0 ? exp_field : 1 + rng() % exp_field;
        const int fraction = t.datatype == COLL_DOUBLE ? 52 : t.datatype == COLL_FLOAT ? 23
                             : t.datatype == COLL_FLOAT16 ? 10 : 7;
        const uint64_t bits = (uint64_t((i % count) & 1) << (t.size * 8 - 1)) |
                              ((e % (exp_field + 1)) << fraction) |
                              ((uint64_t(1) << fraction) - 1);
        std::memcpy(in.data() + i * t.size, &bits, t.size);
      }
      check(t, in, rows, count, count, "same-sign max");
      if (::testing::Test::HasFatalFailure()) return;
    }
}

// One row, out == in (exact_local's form).
TEST(ExactSum, InPlace) {
  std::mt19937_64 rng(5);
  std::vector<char> in;
  for (const Type& t : kTypes)
    for (Kind kind : kKinds)
      for (size_t count : {0, 1, 17, 513, 3001}) {
        fill(t, kind, in, count, rng);
        std::vector<char> want(count * t.size + 1);
        coll::reference::exact_sum_rows(t.datatype, in.data(), 1, count, count, want.data());
        for (const std::string& isa : coll::exact_sum_kernel_sets()) {
          std::vector<char> io = in;
          ASSERT_TRUE(coll::exact_sum_rows_with(isa, t.datatype, io.data(), 1, count, count,
                                                io.data()));
          if (count == 0) continue;  // io.data() may be null: no memcmp
          ASSERT_EQ(0, std::memcmp(want.data(), io.data(), count * t.size))
              << t.name << " " << isa << " in place, count " << count;
        }
      }
}

// Two rows of float and double: the FPU's add where both contributions
// lie on the grid, the integer kernel for a tile with any other element.
// Pairs at the boundary of the grid (the smaller contribution 2^(P -
// fraction) below the larger's exponent, and one more: there the grid
// rounds it, and a tie after that rounding goes to even where the one add
// would round up) placed at tile edges, zeros beside far values, exact
// cancellation, -0 + -0, overflow, subnormal sums; every count of interest.
template <typename T>
std::vector<char> pair_rows(size_t count, size_t at, std::mt19937_64& rng, bool far) {
  constexpr bool dbl = sizeof(T) == 8;
  constexpr int limit = dbl ? 94 - 52 : 40 - 23;  // P - fraction
  constexpr int fraction = dbl ? 52 : 23;
  std::uniform_real_distribution<double> u(0.5, 1.0);
  std::vector<char> in(2 * count * sizeof(T));
  auto set = [&](size_t r, size_t i, T x) { std::memcpy(in.data() + (r * count + i) * sizeof(T), &x, sizeof x); };
  for (size_t i = 0; i < count; ++i) {
    // Near pairs: every gap from 0 to the limit, both signs.
    const int gap = int(rng() % (limit + 1));
    const T a = T(u(rng)) * (rng() % 2 ? 1 : -1), b = std::ldexp(T(u(rng)), -gap) * (rng() % 2 ? 1 : -1);
    set(0, i, rng() % 2 ? a : b);
    set(1, i, rng() % 2 ? b : a);
  }
  // Element `at`: 1 + (2^-(limit + 1) + 2^-(fraction + 1) + 2^-(limit + 1 + fraction)):
  // the one add rounds up (above half an ulp of 1), the definition's grid
  // rounds the last bit away (a tie, to even: down) and then the sum is a
  // tie, to even: 1. Or, not far: the same shape one step nearer (exact).
  if (at < count) {
    const int g = far ? limit + 1 : limit;
    const T x = std::ldexp(T(1), -g) + std::ldexp(T(1), -(fraction + 1)) +
                std::ldexp(T(1), -(g + fraction));
    set(0, at, T(1));
    set(1, at, x);
  }
  return in;
}

template <typename T>
void set_pair(std::vector<char>& in, size_t count, size_t i, T a, T b) {
  std::memcpy(in.data() + i * sizeof(T), &a, sizeof a);
  std::memcpy(in.data() + (count + i) * sizeof(T), &b, sizeof b);
}

TEST(ExactSum, PairsAtTheGridBoundary) {
  std::mt19937_64 rng(6);
  for (const Type& t : {kTypes[0], kTypes[1]})
    for (size_t count : {0, 1, 2, 3, 511, 512, 513, 1024, 1025, 1537})
      for (size_t at : {size_t(0), size_t(510), size_t(511), size_t(512), size_t(1023), count - 1})
        for (bool far : {false, true}) {
          std::vector<char> in = t.datatype == COLL_DOUBLE ? pair_rows<double>(count, at, rng, far)
                                                            : pair_rows<float>(count, at, rng, far);
          check(t, in, 2, count, count,
                "pair at " + std::to_string(at) + (far ? " far" : " near"));
          if (::testing::Test::HasFatalFailure()) return;
        }
}

template <typename T>
void pair_cases(const Type& t) {
  const T inf = std::numeric_limits<T>::infinity(), big = std::numeric_limits<T>::max();
  const T tiny = std::numeric_limits<T>::min(), sub = std::numeric_limits<T>::denorm_min();
  const T pairs[][2] = {
      {T(0), T(1e-30)},        {T(-0.0), big},          {T(0), T(-0.0)},  {T(-0.0), T(-0.0)},
      {T(1.5), T(-1.5)},       {big, big},              {-big, -big},     {big, -big},
      {tiny * T(1.5), -tiny},  {sub, sub * T(3)},       {tiny, sub},      {sub, T(1)},
      {inf, T(1)},             {inf, -inf},             {std::numeric_limits<T>::quiet_NaN(), T(2)},
      {T(1), std::ldexp(T(1), -200)},
  };
  const size_t n = sizeof pairs / sizeof pairs[0];
  // Each case alone in a tile of near pairs, and all of them in one tile.
  for (size_t k = 0; k <= n; ++k) {
    const size_t count = 700;
    std::mt19937_64 rng(7 + k);
    std::vector<char> in = pair_rows<T>(count, count, rng, false);
    for (size_t j = 0; j < n; ++j)
      if (k == n || j == k) set_pair<T>(in, count, 600 + j, pairs[j][0], pairs[j][1]);
    check(t, in, 2, count, count, "pair case " + std::to_string(k));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(ExactSum, PairSpecialCases) {
  pair_cases<double>(kTypes[0]);
  pair_cases<float>(kTypes[1]);
}

// The FPU's add is the definition's only in the default environment:
// another rounding mode, flush-to-zero or denormals-are-zero must not
// change the bits (the kernels fall back to integers), and the kernels
// leave the environment, flags included, as they found it.
TEST(ExactSum, PairsWhateverTheFloatingPointEnvironment) {
  const size_t count = 1500;
  std::mt19937_64 rng(8);
  for (const Type& t : {kTypes[0], kTypes[1]}) {
    const bool dbl = t.datatype == COLL_DOUBLE;
    std::vector<char> in = dbl ? pair_rows<double>(count, count, rng, false)
                               : pair_rows<float>(count, count, rng, false);
    // Subnormal sums and subnormal contributions, for FTZ and DAZ.
    for (size_t i = 0; i < 100; ++i) {
      if (dbl)
        set_pair<double>(in, count, 1000 + i, std::ldexp(1.0 + double(i) / 128, -1022),
                         -std::ldexp(1.0 + double(i + 1) / 256, -1022));
      else
        set_pair<float>(in, count, 1000 + i, std::ldexp(float(i + 1), -149),
                        std::ldexp(1.0f + float(i) / 128, -120));
    }
    for (int mode : {FE_TONEAREST, FE_UPWARD, FE_DOWNWARD, FE_TOWARDZERO}) {
      ASSERT_EQ(0, std::fesetround(mode));
      check(t, in, 2, count, count, "rounding mode " + std::to_string(mode));
      std::feclearexcept(FE_ALL_EXCEPT);
      std::vector<char> out(count * t.size);
      coll::exact_sum_rows(t.datatype, in.data(), 2, count, count, out.data());
      const int raised = std::fetestexcept(FE_ALL_EXCEPT);
      const int now = std::fegetround();
      std::fesetround(FE_TONEAREST);
      ASSERT_EQ(now, mode) << "the kernel changed the rounding mode";
      ASSERT_EQ(raised, 0) << t.name << ": the kernel left floating-point flags raised";
    }
#if defined(__x86_64__)
    const unsigned csr = _mm_getcsr();
    for (unsigned bits : {0x8000u, 0x0040u, 0x8040u}) {  // FTZ, DAZ, both
      _mm_setcsr(csr | bits);
      std::vector<char> want(count * t.size), got(count * t.size);
      coll::exact_sum_rows(t.datatype, in.data(), 2, count, count, got.data());
      const unsigned after = _mm_getcsr();
      _mm_setcsr(csr);
      coll::reference::exact_sum_rows(t.datatype, in.data(), 2, count, count, want.data());
      ASSERT_EQ(after & 0xffc0u, (csr | bits) & 0xffc0u);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), count * t.size))
          << t.name << " MXCSR bits " << bits << ": not the reference's bits";
    }
#endif
  }
}

}  // namespace
