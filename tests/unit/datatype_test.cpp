// Reduction kernels against values computed here, including wrap-around of
// signed integer sums and products (which must not be undefined behaviour:
// the sanitizer build checks that).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "datatype.hpp"
#include "error.hpp"

namespace coll {
namespace {

template <class T>
std::vector<T> run(int dt, int op, std::vector<T> a, std::vector<T> b) {
  ReduceFn f = reduce_function(dt, op);
  EXPECT_NE(f, nullptr);
  std::vector<T> out(a.size());
  if (f) f(out.data(), a.data(), b.data(), a.size());
  return out;
}

TEST(Datatype, SizesAndNames) {
  EXPECT_EQ(datatype_size(COLL_INT8), 1u);
  EXPECT_EQ(datatype_size(COLL_UINT16), 2u);
  EXPECT_EQ(datatype_size(COLL_FLOAT), 4u);
  EXPECT_EQ(datatype_size(COLL_INT64), 8u);
  EXPECT_EQ(datatype_size(COLL_DOUBLE), 8u);
  EXPECT_EQ(datatype_size(-1), 0u);
  EXPECT_EQ(datatype_size(COLL_DATATYPE_COUNT), 0u);
  EXPECT_STREQ(datatype_name(COLL_UINT32), "uint32");
  EXPECT_STREQ(op_name(COLL_BXOR), "bxor");
}

TEST(Datatype, BitwiseOpsOnlyOnIntegers) {
  for (int op : {COLL_BAND, COLL_BOR, COLL_BXOR}) {
    EXPECT_EQ(reduce_function(COLL_FLOAT, op), nullptr);
    EXPECT_EQ(reduce_function(COLL_DOUBLE, op), nullptr);
    for (int dt = COLL_INT8; dt <= COLL_UINT64; ++dt) EXPECT_NE(reduce_function(dt, op), nullptr);
  }
  EXPECT_EQ(reduce_function(COLL_INT32, COLL_OP_COUNT), nullptr);
  EXPECT_EQ(reduce_function(COLL_DATATYPE_COUNT, COLL_SUM), nullptr);
}

// MPI allows the logical operators on C integer (and logical) types only.
TEST(Datatype, LogicalOpsOnlyOnIntegers) {
  for (int op : {COLL_LAND, COLL_LOR, COLL_LXOR}) {
    for (int dt : {COLL_FLOAT, COLL_DOUBLE, COLL_FLOAT16, COLL_BFLOAT16})
      EXPECT_EQ(reduce_function(dt, op), nullptr) << datatype_name(dt) << " " << op_name(op);
    for (int dt = COLL_INT8; dt <= COLL_UINT64; ++dt) EXPECT_NE(reduce_function(dt, op), nullptr);
  }
  EXPECT_STREQ(op_name(COLL_LAND), "land");
  EXPECT_STREQ(op_name(COLL_LOR), "lor");
  EXPECT_STREQ(op_name(COLL_LXOR), "lxor");
}

// Any nonzero value is true (negative ones, and ones whose low byte is 0);
// the result is 1 or 0.
TEST(Datatype, LogicalOpsTakeNonzeroAsTrueAndGiveOneOrZero) {
  const std::vector<int16_t> a = {0, 0, -1, 256, 7, -32768};
  const std::vector<int16_t> b = {0, 5, 0, 2, -3, 0};
  EXPECT_EQ(run<int16_t>(COLL_INT16, COLL_LAND, a, b), (std::vector<int16_t>{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(run<int16_t>(COLL_INT16, COLL_LOR, a, b), (std::vector<int16_t>{0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(run<int16_t>(COLL_INT16, COLL_LXOR, a, b), (std::vector<int16_t>{0, 1, 1, 0, 0, 1}));
  const std::vector<uint64_t> x = {uint64_t(1) << 63, 0, ~uint64_t(0)};
  const std::vector<uint64_t> y = {uint64_t(1) << 32, uint64_t(1) << 40, 0};
  EXPECT_EQ(run<uint64_t>(COLL_UINT64, COLL_LAND, x, y), (std::vector<uint64_t>{1, 0, 0}));
  EXPECT_EQ(run<uint64_t>(COLL_UINT64, COLL_LOR, x, y), (std::vector<uint64_t>{1, 1, 1}));
  EXPECT_EQ(run<uint64_t>(COLL_UINT64, COLL_LXOR, x, y), (std::vector<uint64_t>{0, 1, 1}));
}

// The pairs are MPI's C structs, padding included: an MPI program's
// buffers pass as they are.
TEST(Datatype, PairTypesHaveTheLayoutOfMpisStructs) {
  EXPECT_EQ(datatype_size(COLL_FLOAT_INT), 8u);
  EXPECT_EQ(datatype_size(COLL_DOUBLE_INT), 16u);
  EXPECT_EQ(datatype_size(COLL_2INT), 8u);
  EXPECT_EQ(datatype_size(COLL_SHORT_INT), 8u);
  struct LongInt {  // MPI_LONG_INT's C layout
    long v;
    int i;
  };
  struct LongDoubleInt {  // MPI_LONG_DOUBLE_INT's
    long double v;
    int i;
  };
  EXPECT_EQ(datatype_size(COLL_LONG_INT), sizeof(LongInt));
  EXPECT_EQ(datatype_size(COLL_LONG_DOUBLE_INT), sizeof(LongDoubleInt));
#if defined(__x86_64__)
  EXPECT_EQ(datatype_size(COLL_LONG_INT), 16u);
  EXPECT_EQ(datatype_size(COLL_LONG_DOUBLE_INT), 32u);
#endif
  EXPECT_EQ(offsetof(coll_double_int_t, index), 8u);
  EXPECT_EQ(offsetof(coll_short_int_t, index), 4u);
  EXPECT_STREQ(datatype_name(COLL_2INT), "2int");
  EXPECT_STREQ(datatype_name(COLL_LONG_DOUBLE_INT), "long_double_int");
  EXPECT_STREQ(op_name(COLL_MAXLOC), "maxloc");
  EXPECT_STREQ(op_name(COLL_MINLOC), "minloc");
}

// MAXLOC / MINLOC on the pairs only; nothing else on the pairs.
TEST(Datatype, LocOpsOnPairsOnlyAndNothingElseOnPairs) {
  for (int dt = 0; dt < COLL_DATATYPE_COUNT; ++dt) {
    for (int op = 0; op < COLL_OP_COUNT; ++op) {
      const bool loc = op == COLL_MAXLOC || op == COLL_MINLOC;
      if (loc || is_pair_type(dt)) {
        EXPECT_EQ(reduce_function(dt, op) != nullptr, loc && is_pair_type(dt))
            << datatype_name(dt) << " " << op_name(op);
      }
    }
  }
  EXPECT_STREQ(op_rule(COLL_DOUBLE_INT, COLL_SUM), "not on the value-index pair types");
  EXPECT_STREQ(op_rule(COLL_DOUBLE_INT, COLL_LAND), "not on the value-index pair types");
  EXPECT_STREQ(op_rule(COLL_FLOAT, COLL_LAND), "integer types only");
}

// MPI's rule on every pair type and every kernel set: the better value
// wins; equal values give the lower index; the result is one operand's
// bits. Destination fresh, equal to a, or to b.
template <class P>
void check_loc(int dt) {
  using V = decltype(P::value);
  // (a, b) -> maxloc, minloc: as index of the winner, 0 = a, 1 = b.
  struct Case {
    V av;
    int ai;
    V bv;
    int bi;
    int max_winner, min_winner;
  };
  const Case cases[] = {
      {V(1), 5, V(2), 3, 1, 0},     {V(2), 5, V(1), 3, 0, 1},   {V(7), 4, V(7), 9, 0, 0},
      {V(7), 9, V(7), 4, 1, 1},     {V(-3), 0, V(-3), 0, 0, 0}, {V(-1), -2, V(0), 7, 1, 0},
      {V(100), 1, V(-100), 0, 0, 1},
  };
  for (const std::string& set : reduce_kernel_sets()) {
    select_reduce_kernels(set);
    for (int op : {COLL_MAXLOC, COLL_MINLOC}) {
      const ReduceFn f = reduce_function(dt, op);
      ASSERT_NE(f, nullptr);
      std::vector<P> a, b;
      for (const Case& c : cases) {
        P x, y;
        std::memset(&x, 0x11, sizeof x);  // padding too: the winner is copied whole
        std::memset(&y, 0x22, sizeof y);
        x.value = c.av, x.index = c.ai, y.value = c.bv, y.index = c.bi;
        a.push_back(x), b.push_back(y);
      }
      for (int alias = 0; alias < 3; ++alias) {
        std::vector<P> x = a, y = b, out(a.size());
        std::vector<P>& dst = alias == 0 ? out : alias == 1 ? x : y;
        f(dst.data(), x.data(), y.data(), a.size());
        for (size_t i = 0; i < a.size(); ++i) {
          const int w = op == COLL_MAXLOC ? cases[i].max_winner : cases[i].min_winner;
          EXPECT_EQ(std::memcmp(&dst[i], w == 0 ? &a[i] : &b[i], sizeof(P)), 0)
              << set << " " << datatype_name(dt) << " " << op_name(op) << " case " << i
              << " alias " << alias;
        }
      }
    }
  }
  select_reduce_kernels("auto");
}

TEST(Datatype, MaxlocMinlocFollowMpisRule) {
  check_loc<coll_float_int_t>(COLL_FLOAT_INT);
  check_loc<coll_double_int_t>(COLL_DOUBLE_INT);
  check_loc<coll_long_int_t>(COLL_LONG_INT);
  check_loc<coll_2int_t>(COLL_2INT);
  check_loc<coll_short_int_t>(COLL_SHORT_INT);
  check_loc<coll_long_double_int_t>(COLL_LONG_DOUBLE_INT);
}

// Unaligned elements (a pair in the middle of a byte buffer, as in a
// window slot): long double's pair is 16-aligned, and must not be assumed.
TEST(Datatype, MaxlocOnUnalignedElements) {
  const ReduceFn f = reduce_function(COLL_LONG_DOUBLE_INT, COLL_MAXLOC);
  ASSERT_NE(f, nullptr);
  alignas(64) unsigned char buf[3 * sizeof(coll_long_double_int_t) + 1];
  coll_long_double_int_t x{}, y{};
  x.value = 2.5L, x.index = 3, y.value = 2.5L, y.index = 1;
  std::memcpy(buf + 1, &x, sizeof x);
  std::memcpy(buf + 1 + sizeof x, &y, sizeof y);
  f(buf + 1, buf + 1, buf + 1 + sizeof x, 1);
  coll_long_double_int_t r;
  std::memcpy(&r, buf + 1, sizeof r);
  EXPECT_EQ(r.index, 1);
  EXPECT_EQ(r.value, 2.5L);
}

TEST(Datatype, SignedSumAndProdWrap) {
  const int32_t max = std::numeric_limits<int32_t>::max();
  EXPECT_EQ(run<int32_t>(COLL_INT32, COLL_SUM, {max}, {1})[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(run<int64_t>(COLL_INT64, COLL_PROD, {int64_t(1) << 62}, {4})[0], 0);
  EXPECT_EQ(run<int8_t>(COLL_INT8, COLL_SUM, {127}, {1})[0], -128);
  EXPECT_EQ(run<uint16_t>(COLL_UINT16, COLL_PROD, {65535}, {65535})[0], 1);
  EXPECT_EQ(run<int16_t>(COLL_INT16, COLL_PROD, {-32768}, {-1})[0], -32768);
}

TEST(Datatype, MinMaxAndBitwise) {
  EXPECT_EQ(run<int16_t>(COLL_INT16, COLL_MIN, {-5, 7}, {3, -9}), (std::vector<int16_t>{-5, -9}));
  EXPECT_EQ(run<uint8_t>(COLL_UINT8, COLL_MAX, {5, 200}, {250, 3}), (std::vector<uint8_t>{250, 200}));
  EXPECT_EQ(run<double>(COLL_DOUBLE, COLL_MIN, {1.5, -2}, {1.25, 3}), (std::vector<double>{1.25, -2}));
  EXPECT_EQ(run<uint32_t>(COLL_UINT32, COLL_BAND, {0xf0f0u}, {0xff00u})[0], 0xf000u);
  EXPECT_EQ(run<uint32_t>(COLL_UINT32, COLL_BOR, {0xf0f0u}, {0xff00u})[0], 0xfff0u);
  EXPECT_EQ(run<int64_t>(COLL_INT64, COLL_BXOR, {-1}, {1})[0], -2);
  EXPECT_EQ(run<float>(COLL_FLOAT, COLL_PROD, {1.5f}, {-2.0f})[0], -3.0f);
}

TEST(Datatype, DestinationMayAliasAnInput) {
  std::vector<int32_t> a = {1, 2, 3}, b = {10, 20, 30};
  reduce_function(COLL_INT32, COLL_SUM)(a.data(), a.data(), b.data(), a.size());
  EXPECT_EQ(a, (std::vector<int32_t>{11, 22, 33}));
}

// Every kernel set this build has and this CPU runs (baseline, AVX2,
// AVX-512) against a scalar reference written here: bitwise equal for every
// datatype x op, on random bit patterns (NaNs, infinities and denormals
// included for floats), at counts around the vector widths, with the
// destination disjoint from or equal to either input, and nothing written
// past the end.
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
T reference(int op, T a, T b) {
  switch (op) {
    case COLL_SUM:
      if constexpr (std::is_integral_v<T>) return T(Wide<T>(a) + Wide<T>(b));
      else return a + b;
    case COLL_PROD:
      if constexpr (std::is_integral_v<T>) return T(Wide<T>(a) * Wide<T>(b));
      else return a * b;
    case COLL_MIN: return b < a ? b : a;
    case COLL_MAX: return a < b ? b : a;
  }
  if constexpr (std::is_integral_v<T>) {
    if (op == COLL_BAND) return T(a & b);
    if (op == COLL_BOR) return T(a | b);
    if (op == COLL_BXOR) return T(a ^ b);
    if (op == COLL_LAND) return T(a != 0 && b != 0);
    if (op == COLL_LOR) return T(a != 0 || b != 0);
    if (op == COLL_LXOR) return T((a != 0) != (b != 0));
  }
  ADD_FAILURE() << "no reference for op " << op;
  return T{};
}

// Bitwise equal; for floats two NaNs also count as equal, because which
// input's NaN payload an operation returns depends on the operand order
// the compiler picked for a commutative op (IEEE 754 leaves it open).
template <class T>
bool same_value(T x, T y) {
  if constexpr (std::is_floating_point_v<T>)
    if (x != x && y != y) return true;
  return std::memcmp(&x, &y, sizeof x) == 0;
}

template <class T>
void check_kernels(int dt, const std::string& set) {
  std::mt19937_64 rng(uint64_t(dt) * 1000003u + set.size());
  auto random_values = [&](size_t n) {
    std::vector<T> v(n);
    for (T& x : v) {
      const uint64_t bits = rng();
      std::memcpy(&x, &bits, sizeof x);
      if (bits >> 62 == 0) x = T(0);  // a quarter zeros: the logical ops' false
    }
    return v;
  };
  constexpr T kCanary = T(0x5a);
  for (int op = 0; op < COLL_OP_COUNT; ++op) {
    const ReduceFn f = reduce_function(dt, op);
    // Every set has every valid pair: a missing one must fail, not be skipped.
    const bool valid = op <= COLL_MAX || (std::is_integral_v<T> && op <= COLL_LXOR);
    EXPECT_EQ(f != nullptr, valid)
        << "kernels " << set << ", " << datatype_name(dt) << " " << op_name(op);
    if (!f) continue;
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(15), size_t(16), size_t(17),
                         size_t(63), size_t(64), size_t(65), size_t(1000), size_t(4099)}) {
      const std::vector<T> a = random_values(count), b = random_values(count);
      std::vector<T> want(count);
      for (size_t i = 0; i < count; ++i) want[i] = reference<T>(op, a[i], b[i]);
      for (int alias = 0; alias < 3; ++alias) {  // dst: fresh, == a, == b
        // Each buffer one element longer, holding a canary: whichever is
        // the destination, a write past count is seen.
        std::vector<T> x = a, y = b, out(count);
        for (std::vector<T>* v : {&x, &y, &out}) v->push_back(kCanary);
        std::vector<T>& dst = alias == 0 ? out : alias == 1 ? x : y;
        f(dst.data(), x.data(), alias == 2 ? dst.data() : y.data(), count);
        const std::string what = "kernels " + set + ", " + datatype_name(dt) + " " + op_name(op) +
                                 ", count " + std::to_string(count) + ", alias " +
                                 std::to_string(alias);
        size_t wrong = 0;
        for (size_t i = 0; i < count; ++i) wrong += !same_value(dst[i], want[i]);
        EXPECT_EQ(wrong, 0u) << what;
        EXPECT_EQ(std::memcmp(&dst[count], &kCanary, sizeof(T)), 0)
            << what << ": written past the end";
      }
    }
  }
}

TEST(Datatype, EveryKernelSetMatchesTheScalarReference) {
  const std::vector<std::string> sets = reduce_kernel_sets();
  ASSERT_FALSE(sets.empty());
  EXPECT_EQ(sets.front(), "baseline");
  for (const std::string& set : sets) {
    select_reduce_kernels(set);
    EXPECT_EQ(set, reduce_kernels_name());
    check_kernels<int8_t>(COLL_INT8, set);
    check_kernels<int16_t>(COLL_INT16, set);
    check_kernels<int32_t>(COLL_INT32, set);
    check_kernels<int64_t>(COLL_INT64, set);
    check_kernels<uint8_t>(COLL_UINT8, set);
    check_kernels<uint16_t>(COLL_UINT16, set);
    check_kernels<uint32_t>(COLL_UINT32, set);
    check_kernels<uint64_t>(COLL_UINT64, set);
    check_kernels<float>(COLL_FLOAT, set);
    check_kernels<double>(COLL_DOUBLE, set);
  }
  select_reduce_kernels("auto");
  EXPECT_EQ(std::string(reduce_kernels_name()), sets.back());
  EXPECT_THROW(select_reduce_kernels("sse9"), Error);
}

}  // namespace
}  // namespace coll
