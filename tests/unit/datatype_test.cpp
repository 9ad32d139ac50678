// Reduction kernels against values computed here, including wrap-around of
// signed integer sums and products (which must not be undefined behaviour:
// the sanitizer build checks that).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "datatype.hpp"

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

}  // namespace
}  // namespace coll
