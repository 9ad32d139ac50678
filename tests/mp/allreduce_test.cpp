// Allreduce over every datatype and every valid operator, checked against
// closed-form expectations. Inputs are chosen so that results are exact in
// any order of reduction: floats hold small integers (or quarters, or
// +-1/+-2 for PROD), and integer SUM/PROD are computed in uint64_t and
// truncated, which is exactly the two's complement wrap-around the API
// promises for every integer type, signed included.
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "mp_support.hpp"

namespace {

using mp::GuardedBuffer;

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T>;

// The input of `rank` at element `index` for operator `op`.
template <typename T>
T input_value(coll_op_t op, uint64_t seed, int rank, size_t index) {
  const uint64_t bits = mp::mix(seed, static_cast<uint64_t>(rank) + 1, index);
  if constexpr (kIsFloat<T>) {
    switch (op) {
      case COLL_SUM:
        return static_cast<T>(static_cast<int>(bits % 33) - 16);
      case COLL_PROD: {
        static constexpr T kFactors[4] = {-2, -1, 1, 2};
        return kFactors[bits % 4];
      }
      default:  // MIN, MAX: quarters are exact
        return static_cast<T>(static_cast<int>(bits % 2001) - 1000) / 4;
    }
  } else {
    switch (op) {
      case COLL_PROD:
        return static_cast<T>(bits | 1);  // odd, so products stay non-zero
      case COLL_BAND:
        return static_cast<T>(bits | mp::mix(bits));  // 3/4 of bits set
      case COLL_BOR:
        return static_cast<T>(bits & mp::mix(bits));  // 1/4 of bits set
      // Logical: true is any nonzero value (odd, so that it stays nonzero in
      // any width; negative too), false 0. LAND's operands are true 7 in 8
      // and LOR's false 7 in 8, so that both results occur at every np.
      case COLL_LAND:
        return static_cast<T>(bits % 8 == 0 ? 0 : ((bits >> 8) | 1));
      case COLL_LOR:
        return static_cast<T>(bits % 8 != 0 ? 0 : ((bits >> 8) | 1));
      case COLL_LXOR:
        return static_cast<T>(bits % 2 == 0 ? 0 : ((bits >> 8) | 1));
      default:
        return static_cast<T>(bits);
    }
  }
}

// The reduction over all ranks of input_value, computed locally.
template <typename T>
T expected_value(coll_op_t op, uint64_t seed, int ranks, size_t index) {
  if constexpr (!kIsFloat<T>) {
    // Truncation commutes with + and * modulo 2^64, so this is the wrapped
    // result in T without any signed overflow in the test itself.
    if (op == COLL_SUM || op == COLL_PROD) {
      uint64_t acc = op == COLL_SUM ? 0 : 1;
      for (int r = 0; r < ranks; ++r) {
        const auto as_unsigned = static_cast<uint64_t>(
            static_cast<std::make_unsigned_t<T>>(input_value<T>(op, seed, r, index)));
        acc = op == COLL_SUM ? acc + as_unsigned : acc * as_unsigned;
      }
      return static_cast<T>(acc);
    }
  }
  T acc = input_value<T>(op, seed, 0, index);
  for (int r = 1; r < ranks; ++r) {
    const T v = input_value<T>(op, seed, r, index);
    switch (op) {
      case COLL_SUM:
        acc = static_cast<T>(acc + v);
        break;  // floats only here
      case COLL_PROD:
        acc = static_cast<T>(acc * v);
        break;
      case COLL_MIN:
        acc = v < acc ? v : acc;
        break;
      case COLL_MAX:
        acc = v > acc ? v : acc;
        break;
      default:
        if constexpr (!kIsFloat<T>) {
          if (op == COLL_BAND) acc = static_cast<T>(acc & v);
          if (op == COLL_BOR) acc = static_cast<T>(acc | v);
          if (op == COLL_BXOR) acc = static_cast<T>(acc ^ v);
          if (op == COLL_LAND) acc = static_cast<T>(acc != 0 && v != 0);
          if (op == COLL_LOR) acc = static_cast<T>(acc != 0 || v != 0);
          if (op == COLL_LXOR) acc = static_cast<T>((acc != 0) != (v != 0));
        }
    }
  }
  return acc;
}

template <typename T>
std::string show(T value) {
  std::ostringstream out;
  out << +value;  // + prints int8_t/uint8_t as numbers
  return out.str();
}

// One allreduce of `count` elements, checked element by element against
// `expected`, plus the guard zones and the untouched send buffer. Folds the
// result into `digest` for the cross-rank bitwise comparison.
template <typename T>
void run_and_check(coll_op_t op, size_t count, bool in_place, uint64_t seed,
                   const std::vector<T>& expected, uint64_t& digest) {
  const int rank = mp::world_rank();
  const std::string where = mp::rank_tag() + " " + mp::datatype_name(mp::datatype_of<T>()) + " " +
                            mp::op_name(op) + " count " + std::to_string(count) +
                            (in_place ? " in place" : " out of place");
  GuardedBuffer send(count, sizeof(T));
  GuardedBuffer recv(count, sizeof(T));
  GuardedBuffer& source = in_place ? recv : send;
  for (size_t i = 0; i < count; ++i) source.as<T>()[i] = input_value<T>(op, seed, rank, i);
  if (!in_place) recv.fill_pattern(seed ^ 0xDEADull);
  const std::vector<unsigned char> send_before(
      static_cast<const unsigned char*>(send.data()),
      static_cast<const unsigned char*>(send.data()) + send.bytes());

  const int status = coll_allreduce(in_place ? COLL_IN_PLACE : send.data(), recv.data(), count,
                                    mp::datatype_of<T>(), op, mp::world());
  EXPECT_EQ(status, COLL_SUCCESS) << where << ": " << coll_strerror(status) << " "
                                  << coll_comm_last_error(mp::world());

  size_t mismatches = 0;
  size_t first_bad = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!(recv.as<T>()[i] == expected[i])) {
      if (mismatches++ == 0) first_bad = i;
    }
  }
  EXPECT_EQ(mismatches, 0u) << where << ": first wrong element " << first_bad << " is "
                            << (mismatches ? show(recv.as<T>()[first_bad]) : "") << ", expected "
                            << (mismatches ? show(expected[first_bad]) : "");
  EXPECT_TRUE(recv.guards_intact()) << where << ": write outside recvbuf";
  if (!in_place) {
    EXPECT_TRUE(send.guards_intact()) << where << ": write outside sendbuf";
    EXPECT_TRUE(send.bytes() == 0 ||
                std::memcmp(send_before.data(), send.data(), send.bytes()) == 0)
        << where << ": sendbuf was modified";
  }
  digest = mp::fnv1a(recv.data(), recv.bytes(), digest);
}

template <typename T>
void run_case(coll_op_t op, size_t count, uint64_t seed, uint64_t& digest) {
  const int ranks = mp::world_size();
  std::vector<T> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = expected_value<T>(op, seed, ranks, i);
  run_and_check<T>(op, count, /*in_place=*/false, seed, expected, digest);
  run_and_check<T>(op, count, /*in_place=*/true, seed, expected, digest);
}

struct AllreduceCase {
  coll_datatype_t datatype;
  coll_op_t op;
};

std::vector<AllreduceCase> every_valid_case() {
  std::vector<AllreduceCase> cases;
  for (coll_datatype_t datatype : mp::typed_datatypes()) {
    for (int op = 0; op < COLL_OP_COUNT; ++op) {
      const auto coll_op = static_cast<coll_op_t>(op);
      if (!mp::op_applies(coll_op, datatype)) continue;
      cases.push_back({datatype, coll_op});
    }
  }
  return cases;
}

std::string case_name(const testing::TestParamInfo<AllreduceCase>& info) {
  return std::string(mp::datatype_name(info.param.datatype)) + "_" + mp::op_name(info.param.op);
}

class Allreduce : public testing::TestWithParam<AllreduceCase> {};

TEST_P(Allreduce, ClosedFormAtEveryInterestingCount) {
  const AllreduceCase param = GetParam();
  uint64_t digest = 0;
  mp::visit_datatype(param.datatype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t count : mp::interesting_counts(sizeof(T))) {
      const uint64_t seed = mp::mix(param.datatype, param.op, count);
      run_case<T>(param.op, count, seed, digest);
    }
  });
  EXPECT_TRUE(mp::same_on_all_ranks(digest)) << mp::rank_tag() << ": results differ between ranks";
}

INSTANTIATE_TEST_SUITE_P(EveryDatatypeAndOp, Allreduce, testing::ValuesIn(every_valid_case()),
                         case_name);

// 1 Mi elements: many chunks and slot reuse. Only a few combinations, so
// that np 8 on two cores stays quick.
class AllreduceLarge : public testing::TestWithParam<AllreduceCase> {};

TEST_P(AllreduceLarge, OneMebiElements) {
  const AllreduceCase param = GetParam();
  uint64_t digest = 0;
  mp::visit_datatype(param.datatype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    run_case<T>(param.op, mp::kLargeCount, mp::mix(param.datatype, param.op, 0x1a5e), digest);
  });
  EXPECT_TRUE(mp::same_on_all_ranks(digest)) << mp::rank_tag() << ": results differ between ranks";
}

INSTANTIATE_TEST_SUITE_P(FewCombinations, AllreduceLarge,
                         testing::Values(AllreduceCase{COLL_FLOAT, COLL_SUM},
                                         AllreduceCase{COLL_INT32, COLL_MAX},
                                         AllreduceCase{COLL_UINT8, COLL_BXOR},
                                         AllreduceCase{COLL_DOUBLE, COLL_PROD}),
                         case_name);

}  // namespace
