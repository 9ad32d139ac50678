// libcoll against Open MPI, in one process started by mpirun: the same
// random inputs go through MPI_Allreduce / MPI_Bcast and coll_allreduce /
// coll_bcast, for every datatype and operator (bitwise ones on integers
// only), counts 0, 1, 7, 1000 and 100003, several roots.
//
// What must hold:
// - integers: libcoll's result equals Open MPI's, element for element
//   (SUM and PROD wrap in both; see the note on Open MPI's AVX operators in
//   meson.build: the job runs with --mca op ^avx);
// - floating point MIN and MAX: equal to the bit (no rounding happens);
// - floating point SUM and PROD: within the bound derived at
//   sum_tolerance() and prod_tolerance(); the two may differ because they
//   add in different orders;
// - libcoll's result is the same on every rank, to the bit (its ranks
//   must agree even where rounding makes the value order-dependent);
// - broadcasts: equal to the root's data, to the bit, in both.
//
// Every rank draws its inputs from a generator seeded by (case, rank), so
// any rank can recompute every other rank's input, which the floating
// point bounds need (they scale with the inputs).
//
// main() initializes MPI and libcoll in the order the command line asks:
// by default MPI_Init then coll_init; with --coll-first, coll_init then
// MPI_Init. Both share the PMIx client underneath.
#include <coll/coll.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "datatypes.hpp"
#include "mpi_map.hpp"
#include "rank_failure_printer.hpp"

using bench::datatype_name;
using bench::is_bitwise;
using bench::is_floating;
using bench::mpi_datatype;
using bench::mpi_op;
using bench::op_name;
using bench::visit_datatype;

namespace {

int world_rank = -1;
int world_size = 0;

coll_comm_t world() { return coll_comm_world(); }

// A generator that depends only on what identifies one rank's input.
std::mt19937_64 generator_for(unsigned salt, coll_datatype_t type, coll_op_t op, size_t count,
                              int rank) {
  std::seed_seq seed{salt, static_cast<unsigned>(type), static_cast<unsigned>(op),
                     static_cast<unsigned>(count), static_cast<unsigned>(rank)};
  return std::mt19937_64(seed);
}

// One rank's allreduce input. Integers: any bits (so SUM and PROD wrap,
// MIN and MAX see both signs). Floating point: SUM gets magnitudes over
// 2^-8..2^8 with both signs, so that the order of additions changes the
// rounding; PROD gets factors near 1 (|x| in [0.75, 1.25]), so that no
// product of a few of them under- or overflows; MIN and MAX get non-zero
// values (a -0.0 against +0.0 is a tie either side may break).
template <typename T>
std::vector<T> allreduce_input(coll_datatype_t type, coll_op_t op, size_t count, int rank) {
  std::mt19937_64 random = generator_for(1, type, op, count, rank);
  std::vector<T> values(count);
  for (T& value : values) {
    if constexpr (std::is_integral_v<T>) {
      value = static_cast<T>(random());
    } else {
      std::uniform_real_distribution<double> unit(-1.0, 1.0);
      double x = unit(random);
      if (op == COLL_SUM) {
        x = std::ldexp(x, static_cast<int>(random() % 17) - 8);
      } else if (op == COLL_PROD) {
        x = (x < 0 ? -1.0 : 1.0) * (0.75 + std::fabs(x) / 2);
      } else {
        x = x == 0.0 ? 1.0 : x * 1000;
      }
      value = static_cast<T>(x);
    }
  }
  return values;
}

// Tolerances for floating point SUM and PROD over n ranks, with
// eps = std::numeric_limits<T>::epsilon() and u = eps / 2 the unit
// roundoff (round to nearest).
//
// SUM: n values added in any order (a chain, a ring, a tree: n - 1
// additions, each rounding once with relative error at most u) give a
// result s' with |s' - s| <= (n - 1) u sum|x_i| + O(u^2) (Higham, Accuracy
// and Stability of Numerical Algorithms, 4.2). Two such results, Open
// MPI's and libcoll's, differ by at most twice that: (n - 1) eps sum|x_i|;
// n eps sum|x_i| also covers the O(u^2) terms.
template <typename T>
long double sum_tolerance(int n, long double sum_of_magnitudes) {
  return n * static_cast<long double>(std::numeric_limits<T>::epsilon()) * sum_of_magnitudes;
}
// PROD: each of the n - 1 multiplications has relative error at most u,
// so a product in any order is within (n - 1) u |p| + O(u^2) of the exact
// p; two of them differ by at most (n - 1) eps |p|, and n eps |p| covers
// the rest. Factors near 1 keep every partial product normal.
template <typename T>
long double prod_tolerance(int n, long double exact_product) {
  return n * static_cast<long double>(std::numeric_limits<T>::epsilon()) * std::fabs(exact_product);
}

// The first few differences, for a failure message.
class Mismatches {
 public:
  template <typename T>
  void add(size_t index, T mine, T reference, const std::string& detail = "") {
    if (count_++ < kShown) {
      out_ << "\n  [" << index << "] libcoll " << printable(mine) << ", Open MPI "
           << printable(reference) << detail;
    }
  }
  size_t count() const { return count_; }
  std::string report() const {
    return std::to_string(count_) + " element(s) differ" + out_.str() +
           (count_ > kShown ? "\n  ..." : "");
  }

 private:
  static constexpr size_t kShown = 5;
  template <typename T>
  static auto printable(T value) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>>(
          value);
    else
      return static_cast<double>(value);
  }
  size_t count_ = 0;
  std::ostringstream out_;
};

std::string describe(coll_datatype_t type, coll_op_t op, size_t count, bool in_place) {
  return std::string(datatype_name(type)) + " " + op_name(op) + " of " + std::to_string(count) +
         (in_place ? " in place" : "") + " on " + std::to_string(world_size) + " ranks";
}

template <typename T>
void compare_allreduce(coll_datatype_t type, coll_op_t op, size_t count, bool in_place) {
  const std::string what = describe(type, op, count, in_place);
  const std::vector<T> input = allreduce_input<T>(type, op, count, world_rank);

  // Every rank makes the same calls in the same order whatever fails, so
  // that a failure on one rank cannot leave the others waiting.
  std::vector<T> by_mpi(count);
  const int mpi_status = MPI_Allreduce(input.data(), by_mpi.data(), static_cast<int>(count),
                                       mpi_datatype(type), mpi_op(op), MPI_COMM_WORLD);
  // Poisoned, so that an element libcoll never writes cannot pass.
  std::vector<T> by_coll(count);
  if (count != 0) std::memset(by_coll.data(), 0xA5, count * sizeof(T));
  int coll_status;
  if (in_place) {
    by_coll = input;
    coll_status = coll_allreduce(COLL_IN_PLACE, by_coll.data(), count, type, op, world());
  } else {
    coll_status = coll_allreduce(input.data(), by_coll.data(), count, type, op, world());
  }
  // Rank 0's libcoll result, to compare with this rank's bit for bit.
  std::vector<T> rank0_coll = by_coll;
  const int bcast_status = MPI_Bcast(rank0_coll.data(), static_cast<int>(count * sizeof(T)),
                                     MPI_BYTE, 0, MPI_COMM_WORLD);

  ASSERT_EQ(mpi_status, MPI_SUCCESS) << what;
  ASSERT_EQ(bcast_status, MPI_SUCCESS) << what;
  ASSERT_EQ(coll_status, COLL_SUCCESS)
      << what << ": " << coll_strerror(coll_status) << ": " << coll_comm_last_error(world());

  EXPECT_TRUE(count == 0 || std::memcmp(by_coll.data(), rank0_coll.data(), count * sizeof(T)) == 0)
      << what << ": libcoll's result on rank " << world_rank << " differs from rank 0's";

  Mismatches mismatches;
  if (std::is_integral_v<T> || op == COLL_MIN || op == COLL_MAX) {
    // No rounding: equal to the bit.
    for (size_t i = 0; i < count; ++i)
      if (std::memcmp(&by_coll[i], &by_mpi[i], sizeof(T)) != 0)
        mismatches.add(i, by_coll[i], by_mpi[i]);
  } else {
    // Every rank's input, for the exact result (long double: 64-bit
    // significand, far finer than the tolerances) and the tolerance.
    std::vector<std::vector<T>> inputs;
    for (int rank = 0; rank < world_size; ++rank)
      inputs.push_back(allreduce_input<T>(type, op, count, rank));
    for (size_t i = 0; i < count; ++i) {
      long double exact = op == COLL_SUM ? 0.0L : 1.0L;
      long double magnitudes = 0.0L;
      for (const std::vector<T>& rank_input : inputs) {
        exact = op == COLL_SUM ? exact + rank_input[i] : exact * rank_input[i];
        magnitudes += std::fabs(static_cast<long double>(rank_input[i]));
      }
      const long double tolerance = op == COLL_SUM ? sum_tolerance<T>(world_size, magnitudes)
                                                   : prod_tolerance<T>(world_size, exact);
      const long double coll_value = by_coll[i];
      const long double mpi_value = by_mpi[i];
      // Each within half the pairwise bound of the exact value says which
      // side is off when they disagree.
      if (!(std::fabs(coll_value - mpi_value) <= tolerance) ||
          !(std::fabs(coll_value - exact) <= tolerance / 2) ||
          !(std::fabs(mpi_value - exact) <= tolerance / 2)) {
        std::ostringstream detail;
        detail.precision(21);
        detail << ", exact " << static_cast<double>(exact) << ", |libcoll - Open MPI| "
               << static_cast<double>(std::fabs(coll_value - mpi_value)) << ", tolerance "
               << static_cast<double>(tolerance);
        mismatches.add(i, by_coll[i], by_mpi[i], detail.str());
      }
    }
  }
  EXPECT_EQ(mismatches.count(), 0u)
      << what << " on rank " << world_rank << ": " << mismatches.report();
}

template <typename T>
void compare_bcast(coll_datatype_t type, size_t count, int root) {
  const std::string what = std::string("bcast of ") + std::to_string(count) + " " +
                           datatype_name(type) + " from root " + std::to_string(root) + " of " +
                           std::to_string(world_size);
  // Any bits will do (a broadcast interprets nothing): each rank starts
  // from its own, and the root's must arrive.
  auto data_of = [&](int rank) {
    std::mt19937_64 random = generator_for(2, type, COLL_OP_COUNT, count, rank);
    std::vector<unsigned char> bytes(count * sizeof(T));
    for (unsigned char& byte : bytes) byte = static_cast<unsigned char>(random());
    return bytes;
  };
  const std::vector<unsigned char> roots = data_of(root);
  std::vector<unsigned char> by_mpi = data_of(world_rank);
  std::vector<unsigned char> by_coll = by_mpi;

  const int mpi_status =
      MPI_Bcast(by_mpi.data(), static_cast<int>(count), mpi_datatype(type), root, MPI_COMM_WORLD);
  const int coll_status = coll_bcast(by_coll.data(), count, type, root, world());

  ASSERT_EQ(mpi_status, MPI_SUCCESS) << what;
  ASSERT_EQ(coll_status, COLL_SUCCESS)
      << what << ": " << coll_strerror(coll_status) << ": " << coll_comm_last_error(world());
  EXPECT_TRUE(by_mpi == roots) << what << ": Open MPI's result is not the root's data";
  EXPECT_TRUE(by_coll == roots) << what << ": libcoll's result on rank " << world_rank
                                << " is not the root's data";
}

const coll_datatype_t kTypes[] = {COLL_INT8,   COLL_INT16,  COLL_INT32,  COLL_INT64, COLL_UINT8,
                                  COLL_UINT16, COLL_UINT32, COLL_UINT64, COLL_FLOAT, COLL_DOUBLE};
const coll_op_t kOps[] = {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_BAND, COLL_BOR, COLL_BXOR};
// Empty, one, an odd few, more than a small slot, and a large prime that
// divides evenly by no rank count.
const size_t kCounts[] = {0, 1, 7, 1000, 100003};

TEST(Launch, LibcollSeesTheJobOpenMpiSees) {
  EXPECT_STREQ(coll_comm_bootstrap_name(world()), "pmix");
  int rank = -1;
  int size = 0;
  ASSERT_EQ(coll_comm_rank(world(), &rank), COLL_SUCCESS);
  ASSERT_EQ(coll_comm_size(world(), &size), COLL_SUCCESS);
  EXPECT_EQ(rank, world_rank) << "libcoll and Open MPI number this process differently";
  EXPECT_EQ(size, world_size);
}

using AllreduceCase = std::tuple<coll_datatype_t, coll_op_t, size_t>;

std::string allreduce_case_name(const testing::TestParamInfo<AllreduceCase>& info) {
  auto [type, op, count] = info.param;
  return std::string(datatype_name(type)) + "_" + op_name(op) + "_" + std::to_string(count);
}

// Every valid (datatype, operator) pair: bitwise operators on integers only.
template <typename Ops, typename Counts>
std::vector<AllreduceCase> allreduce_cases(const Ops& ops, const Counts& counts) {
  std::vector<AllreduceCase> cases;
  for (coll_datatype_t type : kTypes)
    for (coll_op_t op : ops)
      if (!(is_floating(type) && is_bitwise(op)))
        for (size_t count : counts) cases.emplace_back(type, op, count);
  return cases;
}

class Allreduce : public testing::TestWithParam<AllreduceCase> {};

TEST_P(Allreduce, MatchesOpenMpi) {
  // Named variables, not a structured binding: the lambda captures them,
  // which clang 14 does not allow for bindings (C++20 does).
  const coll_datatype_t type = std::get<0>(GetParam());
  const coll_op_t op = std::get<1>(GetParam());
  const size_t count = std::get<2>(GetParam());
  visit_datatype(type, [&](auto tag) {
    compare_allreduce<typename decltype(tag)::type>(type, op, count, false);
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesOpsCounts, Allreduce,
                         testing::ValuesIn(allreduce_cases(kOps, kCounts)), allreduce_case_name);

class AllreduceInPlace : public testing::TestWithParam<AllreduceCase> {};

TEST_P(AllreduceInPlace, MatchesOpenMpi) {
  // Named variables, not a structured binding: the lambda captures them,
  // which clang 14 does not allow for bindings (C++20 does).
  const coll_datatype_t type = std::get<0>(GetParam());
  const coll_op_t op = std::get<1>(GetParam());
  const size_t count = std::get<2>(GetParam());
  visit_datatype(type, [&](auto tag) {
    compare_allreduce<typename decltype(tag)::type>(type, op, count, true);
  });
}

const coll_op_t kInPlaceOps[] = {COLL_SUM, COLL_MAX, COLL_BXOR};
const size_t kInPlaceCounts[] = {7, 100003};
INSTANTIATE_TEST_SUITE_P(AllTypesSomeOps, AllreduceInPlace,
                         testing::ValuesIn(allreduce_cases(kInPlaceOps, kInPlaceCounts)),
                         allreduce_case_name);

// Roots named by position, resolved against the world size at run time.
enum class RootAt { kFirst, kMiddle, kLast };

int resolve(RootAt at) {
  switch (at) {
    case RootAt::kFirst:
      return 0;
    case RootAt::kMiddle:
      return world_size / 2;
    case RootAt::kLast:
      return world_size - 1;
  }
  return 0;
}

using BcastCase = std::tuple<coll_datatype_t, size_t, RootAt>;

std::string bcast_case_name(const testing::TestParamInfo<BcastCase>& info) {
  auto [type, count, root] = info.param;
  static const char* const roots[] = {"first", "middle", "last"};
  return std::string(datatype_name(type)) + "_" + std::to_string(count) + "_root_" +
         roots[static_cast<int>(root)];
}

class Bcast : public testing::TestWithParam<BcastCase> {};

TEST_P(Bcast, MatchesOpenMpi) {
  // Named variables (see Allreduce above).
  const coll_datatype_t type = std::get<0>(GetParam());
  const size_t count = std::get<1>(GetParam());
  const RootAt root = std::get<2>(GetParam());
  visit_datatype(type, [&](auto tag) {
    compare_bcast<typename decltype(tag)::type>(type, count, resolve(root));
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesCountsRoots, Bcast,
                         testing::Combine(testing::ValuesIn(kTypes), testing::ValuesIn(kCounts),
                                          testing::Values(RootAt::kFirst, RootAt::kMiddle,
                                                          RootAt::kLast)),
                         bcast_case_name);

bool init_mpi() {
  int status = MPI_Init(nullptr, nullptr);
  if (status != MPI_SUCCESS) std::fprintf(stderr, "MPI_Init failed: %d\n", status);
  return status == MPI_SUCCESS;
}

bool init_coll(int* argc, char*** argv) {
  int status = coll_init(argc, argv);
  if (status != COLL_SUCCESS)
    std::fprintf(stderr, "coll_init failed: %s: %s\n", coll_strerror(status),
                 coll_comm_last_error(nullptr));
  return status == COLL_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // Every rank must run the tests in the same order (see tests/mp/mp_main.cpp).
  if (GTEST_FLAG_GET(shuffle) && GTEST_FLAG_GET(random_seed) == 0) GTEST_FLAG_SET(random_seed, 1);

  bool coll_first = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--coll-first") == 0) {
      coll_first = true;
    } else {
      std::fprintf(stderr, "usage: %s [gtest flags] [--coll-first]\n", argv[0]);
      return 2;
    }
  }

  // The order both are initialized in, and the reverse at the end.
  const bool initialized =
      coll_first ? init_coll(&argc, &argv) && init_mpi() : init_mpi() && init_coll(&argc, &argv);
  if (!initialized) return 1;  // mpirun ends the other ranks
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (world_rank == 0)
    std::printf("compare_test: %s first, %d ranks\n", coll_first ? "coll_init" : "MPI_Init",
                world_size);
  mp::RankFailurePrinter::install_for_rank(world_rank);

  int result = RUN_ALL_TESTS();

  if (coll_first) {
    if (MPI_Finalize() != MPI_SUCCESS) result = 1;
    if (coll_finalize() != COLL_SUCCESS) result = 1;
  } else {
    if (coll_finalize() != COLL_SUCCESS) result = 1;
    if (MPI_Finalize() != MPI_SUCCESS) result = 1;
  }
  return result;
}
