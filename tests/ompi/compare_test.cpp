// libcoll against Open MPI, in one process started by mpirun: the same
// random inputs go through MPI_Allreduce / MPI_Bcast and coll_allreduce /
// coll_bcast, for every datatype and operator (bitwise ones on integers
// only), counts 0, 1, 7, 1000 and 100003, several roots; and through the
// rest of the collective set (reduce, scan, exscan, reduce_scatter(_block),
// allgather(v), gather(v), scatter(v), alltoall(v)) for every datatype and
// SUM, PROD, MAX, BXOR, or for three datatypes where only bytes move, with
// uneven and empty v-blocks.
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
// MPI_Init. Both share the PMIx client underneath. tests/mpich builds the
// same file against MPICH, run by mpirun.mpich: there MPICH is the
// reference, and the two libraries share the PMI-1 socket instead.
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
using bench::integers_only;
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
const coll_op_t kOps[] = {COLL_SUM,  COLL_PROD, COLL_MIN,  COLL_MAX, COLL_BAND,
                          COLL_BOR,  COLL_BXOR, COLL_LAND, COLL_LOR, COLL_LXOR};
// Empty, one, an odd few, more than a small slot, and a large prime that
// divides evenly by no rank count.
const size_t kCounts[] = {0, 1, 7, 1000, 100003};

// The bootstrap libcoll must have chosen: PMIx under Open MPI's mpirun;
// tests/mpich builds this file with "pmi" (mpirun.mpich).
#ifndef COMPARE_EXPECTED_BOOTSTRAP
#define COMPARE_EXPECTED_BOOTSTRAP "pmix"
#endif

TEST(Launch, LibcollSeesTheJobOpenMpiSees) {
  EXPECT_STREQ(coll_comm_bootstrap_name(world()), COMPARE_EXPECTED_BOOTSTRAP);
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

// Every valid (datatype, operator) pair: bitwise and logical operators on
// integers only.
template <typename Ops, typename Counts>
std::vector<AllreduceCase> allreduce_cases(const Ops& ops, const Counts& counts) {
  std::vector<AllreduceCase> cases;
  for (coll_datatype_t type : kTypes)
    for (coll_op_t op : ops)
      if (!(is_floating(type) && integers_only(op)))
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

// ---------------------------------------------------------------------------
// The collectives of issue 12 against Open MPI's, on the same inputs.

// libcoll's and Open MPI's results of a reduction of the inputs of ranks
// [lo, hi) (every rank's allreduce_input of `total` elements), at elements
// [first, first + by_coll.size()) of that input: equal to the bit for
// integers, MIN and MAX; within the bounds above for float SUM and PROD.
template <typename T>
void expect_reduction_matches(const std::string& what, coll_datatype_t type, coll_op_t op,
                              size_t total, int lo, int hi, size_t first,
                              const std::vector<T>& by_coll, const std::vector<T>& by_mpi) {
  ASSERT_EQ(by_coll.size(), by_mpi.size()) << what;
  Mismatches mismatches;
  if (std::is_integral_v<T> || op == COLL_MIN || op == COLL_MAX) {
    for (size_t i = 0; i < by_coll.size(); ++i)
      if (std::memcmp(&by_coll[i], &by_mpi[i], sizeof(T)) != 0)
        mismatches.add(i, by_coll[i], by_mpi[i]);
  } else {
    std::vector<std::vector<T>> inputs;
    for (int rank = lo; rank < hi; ++rank)
      inputs.push_back(allreduce_input<T>(type, op, total, rank));
    const int n = hi - lo;
    for (size_t i = 0; i < by_coll.size(); ++i) {
      long double exact = op == COLL_SUM ? 0.0L : 1.0L, magnitudes = 0.0L;
      for (const std::vector<T>& in : inputs) {
        const long double x = in[first + i];
        exact = op == COLL_SUM ? exact + x : exact * x;
        magnitudes += std::fabs(x);
      }
      const long double tolerance =
          op == COLL_SUM ? sum_tolerance<T>(n, magnitudes) : prod_tolerance<T>(n, exact);
      const long double c = by_coll[i], m = by_mpi[i];
      if (!(std::fabs(c - m) <= tolerance) || !(std::fabs(c - exact) <= tolerance / 2) ||
          !(std::fabs(m - exact) <= tolerance / 2))
        mismatches.add(i, by_coll[i], by_mpi[i]);
    }
  }
  EXPECT_EQ(mismatches.count(), 0u)
      << what << " on rank " << world_rank << ": " << mismatches.report();
}

std::string status_text(int status) {
  return std::string(coll_strerror(status)) + ": " + coll_comm_last_error(world());
}

enum class Reduction { kReduce, kScan, kExscan, kReduceScatterBlock, kReduceScatter };
const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::kReduce:
      return "reduce";
    case Reduction::kScan:
      return "scan";
    case Reduction::kExscan:
      return "exscan";
    case Reduction::kReduceScatterBlock:
      return "reduce_scatter_block";
    case Reduction::kReduceScatter:
      return "reduce_scatter";
  }
  return "";
}

// reduce_scatter's uneven blocks: count + rank elements, every third empty.
std::vector<size_t> scatter_counts(size_t count) {
  std::vector<size_t> counts(static_cast<size_t>(world_size));
  for (int i = 0; i < world_size; ++i) counts[size_t(i)] = i % 3 == 1 ? 0 : count + size_t(i);
  return counts;
}

template <typename T>
void compare_reduction(Reduction kind, coll_datatype_t type, coll_op_t op, size_t count, int root) {
  const std::string what = std::string(reduction_name(kind)) + " " +
                           describe(type, op, count, false) +
                           (kind == Reduction::kReduce ? " root " + std::to_string(root) : "");
  const int n = world_size, r = world_rank;
  std::vector<size_t> counts = kind == Reduction::kReduceScatter
                                   ? scatter_counts(count)
                                   : std::vector<size_t>(size_t(n), count);
  std::vector<int> mpi_counts(counts.begin(), counts.end());
  size_t first = 0, total = count, mine = count;
  if (kind == Reduction::kReduceScatterBlock || kind == Reduction::kReduceScatter) {
    total = 0;
    for (int i = 0; i < n; ++i) {
      if (i == r) first = total;
      total += counts[size_t(i)];
    }
    mine = counts[size_t(r)];
  }
  const std::vector<T> input = allreduce_input<T>(type, op, total, r);
  std::vector<T> by_mpi(mine), by_coll(mine);
  if (mine) std::memset(by_coll.data(), 0xA5, mine * sizeof(T));
  const MPI_Datatype dt = mpi_datatype(type);
  const MPI_Op mop = mpi_op(op);
  int mpi_status = MPI_SUCCESS, coll_status = COLL_SUCCESS;
  switch (kind) {
    case Reduction::kReduce:
      mpi_status =
          MPI_Reduce(input.data(), by_mpi.data(), int(count), dt, mop, root, MPI_COMM_WORLD);
      coll_status = coll_reduce(input.data(), r == root ? by_coll.data() : nullptr, count, type, op,
                                root, world());
      break;
    case Reduction::kScan:
      mpi_status = MPI_Scan(input.data(), by_mpi.data(), int(count), dt, mop, MPI_COMM_WORLD);
      coll_status = coll_scan(input.data(), by_coll.data(), count, type, op, world());
      break;
    case Reduction::kExscan:
      mpi_status = MPI_Exscan(input.data(), by_mpi.data(), int(count), dt, mop, MPI_COMM_WORLD);
      coll_status = coll_exscan(input.data(), by_coll.data(), count, type, op, world());
      break;
    case Reduction::kReduceScatterBlock:
      mpi_status = MPI_Reduce_scatter_block(input.data(), by_mpi.data(), int(count), dt, mop,
                                            MPI_COMM_WORLD);
      coll_status =
          coll_reduce_scatter_block(input.data(), by_coll.data(), count, type, op, world());
      break;
    case Reduction::kReduceScatter:
      mpi_status = MPI_Reduce_scatter(input.data(), by_mpi.data(), mpi_counts.data(), dt, mop,
                                      MPI_COMM_WORLD);
      coll_status =
          coll_reduce_scatter(input.data(), by_coll.data(), counts.data(), type, op, world());
      break;
  }
  ASSERT_EQ(mpi_status, MPI_SUCCESS) << what;
  ASSERT_EQ(coll_status, COLL_SUCCESS) << what << ": " << status_text(coll_status);
  // Which ranks' inputs the result reduces (exscan at rank 0 and reduce
  // away from the root have none).
  int lo = 0, hi = n;
  if (kind == Reduction::kScan) hi = r + 1;
  if (kind == Reduction::kExscan) hi = r;
  if ((kind == Reduction::kReduce && r != root) || hi == 0) return;
  expect_reduction_matches<T>(what, type, op, total, lo, hi, first, by_coll, by_mpi);
}

using ReductionCase = std::tuple<Reduction, coll_datatype_t, coll_op_t, size_t>;

std::string reduction_case_name(const testing::TestParamInfo<ReductionCase>& info) {
  auto [kind, type, op, count] = info.param;
  return std::string(reduction_name(kind)) + "_" + datatype_name(type) + "_" + op_name(op) + "_" +
         std::to_string(count);
}

std::vector<ReductionCase> reduction_cases() {
  std::vector<ReductionCase> cases;
  const size_t counts[] = {1, 7, 1000, 100003};
  const coll_op_t ops[] = {COLL_SUM, COLL_PROD, COLL_MAX, COLL_BXOR};
  for (Reduction kind : {Reduction::kReduce, Reduction::kScan, Reduction::kExscan,
                         Reduction::kReduceScatterBlock, Reduction::kReduceScatter})
    for (coll_datatype_t type : kTypes)
      for (coll_op_t op : ops)
        if (!(is_floating(type) && is_bitwise(op)))
          for (size_t count : counts)
            // reduce_scatter(_block) counts are per rank: keep them moderate.
            if (count < 100003 || kind == Reduction::kReduce || kind == Reduction::kScan ||
                kind == Reduction::kExscan)
              cases.emplace_back(kind, type, op, count);
  return cases;
}

class Reductions : public testing::TestWithParam<ReductionCase> {};

TEST_P(Reductions, MatchOpenMpi) {
  // Named copies, not structured bindings: a lambda cannot capture those
  // before C++20's fix reached clang (16).
  const Reduction kind = std::get<0>(GetParam());
  const coll_datatype_t type = std::get<1>(GetParam());
  const coll_op_t op = std::get<2>(GetParam());
  const size_t count = std::get<3>(GetParam());
  visit_datatype(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kind == Reduction::kReduce) {
      for (RootAt at : {RootAt::kFirst, RootAt::kLast})
        compare_reduction<T>(kind, type, op, count, resolve(at));
    } else {
      compare_reduction<T>(kind, type, op, count, 0);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(SomeTypesOpsCounts, Reductions, testing::ValuesIn(reduction_cases()),
                         reduction_case_name);

// Data movement: results equal to the bit, and to the closed form.
enum class Move {
  kAllgather,
  kAllgatherv,
  kGather,
  kGatherv,
  kScatter,
  kScatterv,
  kAlltoall,
  kAlltoallv
};
const char* move_name(Move m) {
  static const char* const names[] = {"allgather", "allgatherv", "gather",   "gatherv",
                                      "scatter",   "scatterv",   "alltoall", "alltoallv"};
  return names[static_cast<int>(m)];
}

// One byte that rank `from` sends rank `to` (to = -1: to every rank).
unsigned char moved_byte(int from, int to, size_t i) {
  uint64_t z = (uint64_t(from) + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t(to + 1) << 32) ^ i;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  return static_cast<unsigned char>((z ^ (z >> 27)) >> 56);
}

// Counts of the v-variants: uneven, some empty; alltoallv's per pair.
// from or to -1: any rank (a gather's blocks, a scatter's).
size_t v_count(size_t count, int from, int to) {
  return (from + 2 * (to + 1)) % 3 == 1 ? 0 : count + size_t(from + 1) + size_t(to + 1);
}

void compare_move(Move kind, coll_datatype_t type, size_t count, int root) {
  const int n = world_size, r = world_rank;
  const size_t es = coll_datatype_size(type);
  const MPI_Datatype dt = mpi_datatype(type);
  const std::string what = std::string(move_name(kind)) + " of " + std::to_string(count) + " " +
                           datatype_name(type) + " root " + std::to_string(root) + " on " +
                           std::to_string(n) + " ranks";
  const bool v = kind == Move::kAllgatherv || kind == Move::kGatherv || kind == Move::kScatterv ||
                 kind == Move::kAlltoallv;
  // Send and receive blocks per peer, in elements, placed in reverse rank
  // order with a gap of one element (v-variants) or contiguous.
  std::vector<size_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    size_t s = 0, q = 0;
    switch (kind) {
      case Move::kAllgather:
        s = count;
        q = count;
        break;
      case Move::kAllgatherv:
        s = v_count(count, r, -1);
        q = v_count(count, i, -1);
        break;
      case Move::kGather:
        s = count;
        q = r == root ? count : 0;
        break;
      case Move::kGatherv:
        s = v_count(count, r, -1);
        q = r == root ? v_count(count, i, -1) : 0;
        break;
      case Move::kScatter:
        s = r == root ? count : 0;
        q = count;
        break;
      case Move::kScatterv:
        s = r == root ? v_count(count, -1, i) : 0;
        q = v_count(count, -1, r);
        break;
      case Move::kAlltoall:
        s = count;
        q = count;
        break;
      case Move::kAlltoallv:
        s = v_count(count, r, i);
        q = v_count(count, i, r);
        break;
    }
    sc[size_t(i)] = s;
    rc[size_t(i)] = q;
  }
  auto place = [&](const std::vector<size_t>& c, std::vector<size_t>& d) {
    d.assign(c.size(), 0);
    size_t at = 0;
    for (size_t k = c.size(); k-- > 0;) {
      d[k] = v ? at : k * count;
      at += c[k] + (v ? 1 : 0);
    }
    return v ? at : c.size() * count;
  };
  std::vector<size_t> sd, rd;
  // Gathers send one block (index 0), scatters receive one.
  const bool one_send = kind == Move::kAllgather || kind == Move::kAllgatherv ||
                        kind == Move::kGather || kind == Move::kGatherv;
  const bool one_recv = kind == Move::kScatter || kind == Move::kScatterv;
  const size_t send_len = one_send ? sc[0] : place(sc, sd);
  const size_t recv_len = one_recv ? rc[size_t(r)] : place(rc, rd);
  std::vector<unsigned char> send(send_len * es + 1);
  for (size_t i = 0; i < send.size(); ++i) send[i] = moved_byte(r, -2, i);
  auto fill_block = [&](size_t at, int to, size_t elems) {
    for (size_t b = 0; b < elems * es; ++b) send[at * es + b] = moved_byte(r, to, b);
  };
  if (one_send) {
    fill_block(0, -1, sc[0]);
  } else {
    for (int i = 0; i < n; ++i) fill_block(sd[size_t(i)], i, sc[size_t(i)]);
  }
  std::vector<unsigned char> by_mpi(recv_len * es + 1, 0x5A), by_coll(recv_len * es + 1, 0x5A);
  std::vector<int> isc(sc.begin(), sc.end()), irc(rc.begin(), rc.end()), isd(sd.begin(), sd.end()),
      ird(rd.begin(), rd.end());
  int ms = MPI_SUCCESS, cs = COLL_SUCCESS;
  const int ic = int(count);
  switch (kind) {
    case Move::kAllgather:
      ms = MPI_Allgather(send.data(), ic, dt, by_mpi.data(), ic, dt, MPI_COMM_WORLD);
      cs = coll_allgather(send.data(), by_coll.data(), count, type, world());
      break;
    case Move::kAllgatherv:
      ms = MPI_Allgatherv(send.data(), int(sc[0]), dt, by_mpi.data(), irc.data(), ird.data(), dt,
                          MPI_COMM_WORLD);
      cs = coll_allgatherv(send.data(), sc[0], by_coll.data(), rc.data(), rd.data(), type, world());
      break;
    case Move::kGather:
      ms = MPI_Gather(send.data(), ic, dt, by_mpi.data(), ic, dt, root, MPI_COMM_WORLD);
      cs = coll_gather(send.data(), r == root ? by_coll.data() : nullptr, count, type, root,
                       world());
      break;
    case Move::kGatherv:
      ms = MPI_Gatherv(send.data(), int(sc[0]), dt, by_mpi.data(), irc.data(), ird.data(), dt, root,
                       MPI_COMM_WORLD);
      cs = coll_gatherv(send.data(), sc[0], r == root ? by_coll.data() : nullptr,
                        r == root ? rc.data() : nullptr, r == root ? rd.data() : nullptr, type,
                        root, world());
      break;
    case Move::kScatter:
      ms = MPI_Scatter(send.data(), ic, dt, by_mpi.data(), ic, dt, root, MPI_COMM_WORLD);
      cs = coll_scatter(r == root ? send.data() : nullptr, by_coll.data(), count, type, root,
                        world());
      break;
    case Move::kScatterv:
      ms = MPI_Scatterv(send.data(), isc.data(), isd.data(), dt, by_mpi.data(), int(rc[size_t(r)]),
                        dt, root, MPI_COMM_WORLD);
      cs = coll_scatterv(r == root ? send.data() : nullptr, r == root ? sc.data() : nullptr,
                         r == root ? sd.data() : nullptr, by_coll.data(), rc[size_t(r)], type, root,
                         world());
      break;
    case Move::kAlltoall:
      ms = MPI_Alltoall(send.data(), ic, dt, by_mpi.data(), ic, dt, MPI_COMM_WORLD);
      cs = coll_alltoall(send.data(), by_coll.data(), count, type, world());
      break;
    case Move::kAlltoallv:
      ms = MPI_Alltoallv(send.data(), isc.data(), isd.data(), dt, by_mpi.data(), irc.data(),
                         ird.data(), dt, MPI_COMM_WORLD);
      cs = coll_alltoallv(send.data(), sc.data(), sd.data(), by_coll.data(), rc.data(), rd.data(),
                          type, world());
      break;
  }
  ASSERT_EQ(ms, MPI_SUCCESS) << what;
  ASSERT_EQ(cs, COLL_SUCCESS) << what << ": " << status_text(cs);
  EXPECT_TRUE(by_coll == by_mpi) << what << " on rank " << r
                                 << ": libcoll's result differs from Open MPI's";
  // And both are what the senders sent (gaps and the byte past the end as
  // they were).
  std::vector<unsigned char> want(recv_len * es + 1, 0x5A);
  auto want_block = [&](size_t at, int from, int to, size_t elems) {
    for (size_t b = 0; b < elems * es; ++b) want[at * es + b] = moved_byte(from, to, b);
  };
  if (one_recv) {
    want_block(0, root, r, rc[size_t(r)]);
  } else {
    for (int i = 0; i < n; ++i) {
      const bool to_all = kind == Move::kAllgather || kind == Move::kAllgatherv ||
                          kind == Move::kGather || kind == Move::kGatherv;
      want_block(rd[size_t(i)], i, to_all ? -1 : r, rc[size_t(i)]);
    }
  }
  EXPECT_TRUE(by_coll == want) << what << " on rank " << r << ": not the data sent";
}

using MoveCase = std::tuple<Move, coll_datatype_t, size_t>;

std::string move_case_name(const testing::TestParamInfo<MoveCase>& info) {
  auto [kind, type, count] = info.param;
  return std::string(move_name(kind)) + "_" + datatype_name(type) + "_" + std::to_string(count);
}

class Moves : public testing::TestWithParam<MoveCase> {};

TEST_P(Moves, MatchOpenMpi) {
  auto [kind, type, count] = GetParam();
  const bool rooted = kind == Move::kGather || kind == Move::kGatherv || kind == Move::kScatter ||
                      kind == Move::kScatterv;
  if (rooted) {
    for (RootAt at : {RootAt::kFirst, RootAt::kMiddle, RootAt::kLast})
      compare_move(kind, type, count, resolve(at));
  } else {
    compare_move(kind, type, count, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    SomeTypesAndCounts, Moves,
    testing::Combine(testing::Values(Move::kAllgather, Move::kAllgatherv, Move::kGather,
                                     Move::kGatherv, Move::kScatter, Move::kScatterv,
                                     Move::kAlltoall, Move::kAlltoallv),
                     testing::Values(COLL_INT8, COLL_INT32, COLL_DOUBLE),
                     testing::Values(size_t(0), size_t(1), size_t(7), size_t(1000), size_t(40009))),
    move_case_name);

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
