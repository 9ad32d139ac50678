// Unit tests of the benchmark's own logic (no launcher, no libcoll
// communicator): options, the size sweep, the iteration rule, validation
// values, the memcpy probe, the tables and the report files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "aligned_buffer.hpp"
#include "datatypes.hpp"
#include "memcpy_probe.hpp"
#include "options.hpp"
#include "report.hpp"
#include "value_check.hpp"

namespace bench {
namespace {

Options parse(const std::vector<const char*>& arguments, bool side_by_side = false) {
  std::vector<std::string> storage = {"coll_bench"};
  storage.insert(storage.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (std::string& argument : storage) argv.push_back(argument.data());
  argv.push_back(nullptr);
  return parse_options(static_cast<int>(storage.size()), argv.data(), side_by_side);
}

TEST(Options, DefaultsAreOsus) {
  const Options options = parse({});
  EXPECT_EQ(options.min_bytes, 4u);
  EXPECT_EQ(options.max_bytes, 1048576u);
  EXPECT_EQ(options.iterations, 1000u);
  EXPECT_EQ(options.warmup, 100u);
  EXPECT_EQ(options.workload.datatype, COLL_FLOAT);
  EXPECT_EQ(options.workload.op, COLL_SUM);
  EXPECT_EQ(options.collectives,
            (std::vector<Collective>{Collective::allreduce, Collective::bcast}));
  EXPECT_FALSE(options.full);
  EXPECT_FALSE(options.validate);
}

TEST(Options, ParsesEveryOption) {
  const Options options =
      parse({"-m", "8:4096", "-i", "20", "-x", "5", "-f", "-c", "-T", "int16", "-o", "max", "-r",
             "2", "-b", "bcast,allreduce,bcast", "--csv", "out.csv", "--json=out.json"});
  EXPECT_EQ(options.min_bytes, 8u);
  EXPECT_EQ(options.max_bytes, 4096u);
  EXPECT_EQ(options.iterations, 20u);
  EXPECT_EQ(options.warmup, 5u);
  EXPECT_TRUE(options.full);
  EXPECT_TRUE(options.validate);
  EXPECT_EQ(options.workload.datatype, COLL_INT16);
  EXPECT_EQ(options.workload.op, COLL_MAX);
  EXPECT_EQ(options.workload.root, 2);
  EXPECT_EQ(options.collectives,
            (std::vector<Collective>{Collective::bcast, Collective::allreduce}));
  EXPECT_EQ(options.csv_path, "out.csv");
  EXPECT_EQ(options.json_path, "out.json");
}

TEST(Options, BarrierAloneOrInAList) {
  EXPECT_EQ(parse({"-b", "barrier"}).collectives, (std::vector<Collective>{Collective::barrier}));
  EXPECT_EQ(
      parse({"-b", "allreduce,bcast,barrier"}).collectives,
      (std::vector<Collective>{Collective::allreduce, Collective::bcast, Collective::barrier}));
  // -c and -f apply to the other collectives of the list, and are accepted
  // with barrier alone (it has nothing to validate).
  const Options options = parse({"-b", "barrier", "-c", "-f"});
  EXPECT_TRUE(options.validate);
  EXPECT_TRUE(options.full);
  EXPECT_EQ(collective_name(Collective::barrier), std::string("barrier"));
  EXPECT_FALSE(has_message(Collective::barrier));
  EXPECT_TRUE(has_message(Collective::allreduce));
  EXPECT_TRUE(has_message(Collective::bcast));
  EXPECT_EQ(bus_bandwidth_factor(Collective::barrier, 4), 0.0);
}

TEST(Options, AllIsEveryCollectiveInCollHOrder) {
  const std::vector<Collective> all = parse({"-b", "all"}).collectives;
  ASSERT_EQ(all.size(), 16u);
  EXPECT_EQ(all.front(), Collective::allreduce);
  EXPECT_EQ(all.back(), Collective::exscan);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(static_cast<size_t>(all[i]), i);
  // Named ones first keep their place; "all" adds the rest once each.
  const std::vector<Collective> listed = parse({"-b", "scan,all,scan"}).collectives;
  ASSERT_EQ(listed.size(), 16u);
  EXPECT_EQ(listed.front(), Collective::scan);
}

TEST(Options, RootAndOperatorApplyToTheirCollectives) {
  EXPECT_EQ(parse({"-b", "reduce,allgather", "-r", "1", "-o", "max"}).workload.root, 1);
  EXPECT_EQ(parse({"-b", "gatherv", "-r", "2"}).workload.root, 2);
  EXPECT_EQ(parse({"-b", "scatter", "-r", "2"}).workload.root, 2);
  EXPECT_EQ(parse({"-b", "exscan", "-o", "min"}).workload.op, COLL_MIN);
  EXPECT_EQ(parse({"-b", "reduce_scatter", "-o", "prod"}).workload.op, COLL_PROD);
  EXPECT_EQ(parse({"-b", "all", "-r", "1", "-o", "max"}).workload.root, 1);
}

TEST(Collectives, NamesRoundTripAndMatchTheTable) {
  for (const CollectiveTraits& row : all_collectives()) {
    EXPECT_EQ(parse_collective(row.name), row.collective) << row.name;
    EXPECT_EQ(&traits(row.collective), &row) << row.name;
    // The table title is the MPI function's name without MPI_ (as OSU's).
    EXPECT_EQ(std::string(row.title).substr(1), std::string(row.name).substr(1)) << row.name;
  }
  EXPECT_FALSE(parse_collective("all")) << "all is an option value, not a collective";
  EXPECT_TRUE(takes_op(Collective::reduce_scatter_block));
  EXPECT_TRUE(takes_op(Collective::exscan));
  EXPECT_FALSE(takes_op(Collective::allgather));
  EXPECT_TRUE(takes_root(Collective::gatherv));
  EXPECT_TRUE(takes_root(Collective::bcast));
  EXPECT_FALSE(takes_root(Collective::alltoall));
}

// nccl-tests' doc/PERFORMANCE.md: 2(n-1)/n for allreduce, (n-1)/n for
// allgather, reduce_scatter and alltoall (gather and scatter as nccl-tests'
// gather.cu and scatter.cu), 1 for bcast and reduce (and here scan, exscan).
TEST(Collectives, BusBandwidthFactorsAsNcclTests) {
  const std::vector<std::pair<Collective, double>> at_four_ranks = {
      {Collective::allreduce, 1.5},
      {Collective::bcast, 1.0},
      {Collective::barrier, 0.0},
      {Collective::reduce, 1.0},
      {Collective::allgather, 0.75},
      {Collective::allgatherv, 0.75},
      {Collective::reduce_scatter_block, 0.75},
      {Collective::reduce_scatter, 0.75},
      {Collective::gather, 0.75},
      {Collective::gatherv, 0.75},
      {Collective::scatter, 0.75},
      {Collective::scatterv, 0.75},
      {Collective::alltoall, 0.75},
      {Collective::alltoallv, 0.75},
      {Collective::scan, 1.0},
      {Collective::exscan, 1.0}};
  ASSERT_EQ(at_four_ranks.size(), all_collectives().size());
  for (const auto& [collective, factor] : at_four_ranks) {
    EXPECT_DOUBLE_EQ(bus_bandwidth_factor(collective, 4), factor) << collective_name(collective);
  }
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::allgather, 1), 0.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::allreduce, 2), 1.0);
}

// The algorithm bandwidth counts the whole buffer where the size is one
// rank's block (nccl-tests' allgather, alltoall, gather, scatter), the
// size itself where it is the vector (reduce_scatter: the whole input).
TEST(Collectives, AlgorithmBytesAndBuffers) {
  for (Collective blocked :
       {Collective::allgather, Collective::allgatherv, Collective::gather, Collective::gatherv,
        Collective::scatter, Collective::scatterv, Collective::alltoall, Collective::alltoallv}) {
    EXPECT_DOUBLE_EQ(algorithm_bytes(blocked, 1024, 4), 4096.0) << collective_name(blocked);
    EXPECT_EQ(buffer_bytes(blocked, 1024, 4), 4096u) << collective_name(blocked);
  }
  for (Collective whole :
       {Collective::allreduce, Collective::bcast, Collective::reduce, Collective::reduce_scatter,
        Collective::reduce_scatter_block, Collective::scan, Collective::exscan}) {
    EXPECT_DOUBLE_EQ(algorithm_bytes(whole, 1024, 4), 1024.0) << collective_name(whole);
    EXPECT_EQ(buffer_bytes(whole, 1024, 4), 1024u) << collective_name(whole);
  }
}

TEST(Collectives, MessageLayoutAsOsu) {
  std::byte send[1], recv[1];
  // osu_reduce_scatter: count / n each, the first count % n one more.
  Message m = make_message(Collective::reduce_scatter, send, recv, 10, 3);
  EXPECT_EQ(m.counts, (std::vector<size_t>{4, 3, 3}));
  EXPECT_EQ(m.displs, (std::vector<size_t>{0, 4, 7}));
  m = make_message(Collective::reduce_scatter, send, recv, 2, 3);
  EXPECT_EQ(m.counts, (std::vector<size_t>{1, 1, 0}));
  m = make_message(Collective::reduce_scatter_block, send, recv, 10, 3);
  EXPECT_EQ(m.counts, (std::vector<size_t>{3, 3, 3}));
  EXPECT_EQ(m.displs, (std::vector<size_t>{0, 3, 6}));
  // The v-variants: equal counts, as the non-v ones.
  for (Collective blocked : {Collective::allgatherv, Collective::gatherv, Collective::scatterv,
                             Collective::alltoallv, Collective::alltoall}) {
    m = make_message(blocked, send, recv, 5, 3);
    EXPECT_EQ(m.count, 5u);
    EXPECT_EQ(m.counts, (std::vector<size_t>{5, 5, 5})) << collective_name(blocked);
    EXPECT_EQ(m.displs, (std::vector<size_t>{0, 5, 10})) << collective_name(blocked);
  }
  m = make_message(Collective::scan, send, recv, 5, 3);
  EXPECT_TRUE(m.counts.empty());
  EXPECT_EQ(m.send, send);
  EXPECT_EQ(m.recv, recv);
}

TEST(Options, MaxAloneKeepsDefaultMin) {
  const Options options = parse({"-m", "65536"});
  EXPECT_EQ(options.min_bytes, 4u);
  EXPECT_EQ(options.max_bytes, 65536u);
}

TEST(Options, RejectsBadInput) {
  for (auto arguments :
       std::vector<std::vector<const char*>>{{"-m", "64:8"},
                                             {"-m", "0:8"},
                                             {"-m", "4:x"},
                                             {"-i", "0"},
                                             {"-i", "-3"},
                                             {"-T", "complex"},
                                             {"-T", "float16"},
                                             {"-o", "avg"},
                                             {"-T", "float", "-o", "bxor"},
                                             {"-b", "alltoal"},
                                             {"-b", "barrier,gathr"},
                                             {"-b", ""},
                                             {"-b", "allgather,alltoall", "-r", "1"},
                                             {"-b", "gather,scatter", "-o", "max"},
                                             {"-b", "barrier", "-r", "1"},
                                             {"-b", "barrier", "-o", "max"},
                                             {"-b", "allreduce", "-r", "1"},
                                             {"-b", "bcast", "-o", "max"},
                                             {"--rounds", "3"},
                                             {"--sync", "mpi"},
                                             {"-z"},
                                             {"-m"},
                                             {"stray"}}) {
    EXPECT_THROW(parse(arguments), UsageError) << arguments.back();
  }
}

TEST(Options, RoundsOnlySideBySide) { EXPECT_EQ(parse({"--rounds", "6"}, true).rounds, 6u); }

TEST(Options, SyncStartAndRotateRootAreOffUnlessAsked) {
  EXPECT_FALSE(parse({}).sync_start);
  EXPECT_FALSE(parse({}).rotate_root);
  EXPECT_TRUE(parse({"--sync-start"}).sync_start);
  EXPECT_TRUE(parse({"--rotate-root", "-b", "bcast"}, true).rotate_root);
}

TEST(Options, SyncIsMpiUnlessOwnSideBySide) {
  EXPECT_EQ(parse({}, true).sync, "mpi");
  EXPECT_EQ(parse({"--sync", "own"}, true).sync, "own");
  EXPECT_THROW(parse({"--sync", "coll"}, true), UsageError);
}

TEST(Options, SizesDoubleAndSkipSizesBelowOneElement) {
  Options options = parse({"-m", "4:64", "-T", "double"});
  EXPECT_EQ(message_sizes(options), (std::vector<size_t>{8, 16, 32, 64}));
  options = parse({"-m", "3:24", "-T", "int8"});
  EXPECT_EQ(message_sizes(options), (std::vector<size_t>{3, 6, 12, 24}));
  options = parse({"-m", "1:1", "-T", "int64"});
  EXPECT_TRUE(message_sizes(options).empty());
}

TEST(Options, LargeSizesRunATenth) {
  const Options defaults = parse({});
  EXPECT_EQ(iteration_plan(defaults, 8192).iterations, 1000u);
  EXPECT_EQ(iteration_plan(defaults, 8192).warmup, 100u);
  EXPECT_EQ(iteration_plan(defaults, 16384).iterations, 100u);
  EXPECT_EQ(iteration_plan(defaults, 16384).warmup, 10u);
  const Options few = parse({"-i", "5", "-x", "0"});
  EXPECT_EQ(iteration_plan(few, 1 << 20).iterations, 1u);
  EXPECT_EQ(iteration_plan(few, 1 << 20).warmup, 0u);
}

// Runs the "collective" by hand: every simulated rank prepares its inputs,
// a plain elementwise reduction combines them, and every rank checks.
class ValueCheckTest : public testing::TestWithParam<std::tuple<coll_datatype_t, int>> {};

template <typename T>
T reference_reduce(coll_op_t op, T a, T b) {
  // Independent of ValueCheck: long double holds every value exactly for
  // the small inputs used here, then narrows with the library's wrap.
  const auto wrap = [](long double value) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<unsigned long long>(static_cast<long long>(value)));
    } else {
      return static_cast<T>(value);
    }
  };
  switch (op) {
    case COLL_SUM:
      return wrap(static_cast<long double>(a) + b);
    case COLL_PROD:
      return wrap(static_cast<long double>(a) * b);
    case COLL_MIN:
      return std::min(a, b);
    case COLL_MAX:
      return std::max(a, b);
    default:
      if constexpr (std::is_integral_v<T>) {
        if (op == COLL_BAND) return static_cast<T>(a & b);
        if (op == COLL_BOR) return static_cast<T>(a | b);
        if (op == COLL_LAND) return static_cast<T>(a != 0 && b != 0);
        if (op == COLL_LOR) return static_cast<T>(a != 0 || b != 0);
        if (op == COLL_LXOR) return static_cast<T>((a != 0) != (b != 0));
        return static_cast<T>(a ^ b);
      }
  }
  ADD_FAILURE() << "bad operator";
  return a;
}

// The elementwise reduction of the first `ranks` inputs.
template <typename T>
std::vector<T> reduce_ranks(coll_op_t op, const std::vector<std::vector<T>>& inputs, int ranks) {
  std::vector<T> result = inputs[0];
  for (int rank = 1; rank < ranks; ++rank) {
    for (size_t i = 0; i < result.size(); ++i) {
      result[i] = reference_reduce(op, result[i], inputs[rank][i]);
    }
  }
  return result;
}

TEST_P(ValueCheckTest, AllreduceResultPassesAndCorruptionFails) {
  // Named variables, not a structured binding: the lambdas below capture
  // them, which clang 14 does not allow for bindings (C++20 does).
  const coll_datatype_t datatype = std::get<0>(GetParam());
  const int ranks = std::get<1>(GetParam());
  visit_datatype(datatype, [&]<typename T>(TypeTag<T>) {
    for (int op = 0; op < COLL_OP_COUNT; ++op) {
      const Workload workload{datatype, static_cast<coll_op_t>(op), 0};
      if (!op_applies(workload.op, datatype)) continue;
      const size_t count = 37;  // not a multiple of the period
      for (size_t iteration : {0u, 5u, 12u}) {
        SCOPED_TRACE(std::string(op_name(workload.op)) + " iteration " + std::to_string(iteration));
        std::vector<std::vector<T>> inputs(ranks, std::vector<T>(count));
        std::vector<T> result(count);
        const auto message_of = [&](int rank) {
          return make_message(Collective::allreduce,
                              reinterpret_cast<std::byte*>(inputs[rank].data()),
                              reinterpret_cast<std::byte*>(result.data()), count, ranks);
        };
        for (int rank = 0; rank < ranks; ++rank) {
          ValueCheck(workload, rank, ranks)
              .prepare(Collective::allreduce, message_of(rank), iteration);
        }
        const int last = ranks - 1;
        const ValueCheck check(workload, last, ranks);

        result = reduce_ranks(workload.op, inputs, ranks);
        EXPECT_TRUE(check.verify(Collective::allreduce, message_of(last), iteration));

        if (workload.op == COLL_SUM && ranks > 1) {
          result = reduce_ranks(workload.op, inputs, ranks - 1);
          EXPECT_FALSE(check.verify(Collective::allreduce, message_of(last), iteration))
              << "a sum without the last rank passed";
        }

        result = reduce_ranks(workload.op, inputs, ranks);
        result[count / 2] = static_cast<T>(result[count / 2] + 1);
        EXPECT_FALSE(check.verify(Collective::allreduce, message_of(last), iteration))
            << "a corrupted element passed";

        // prepare() poisons the output: a collective that writes nothing
        // fails.
        check.prepare(Collective::allreduce, message_of(last), iteration);
        EXPECT_FALSE(check.verify(Collective::allreduce, message_of(last), iteration))
            << "the poisoned output passed";
      }
    }
  });
}

TEST_P(ValueCheckTest, BcastDeliversRootsValuesOnly) {
  const auto [datatype, ranks] = GetParam();
  const int root = ranks - 1;
  const Workload workload{datatype, COLL_SUM, root};
  const size_t bytes = 64 * coll_datatype_size(datatype);
  AlignedBuffer root_buffer(bytes), other_buffer(bytes);
  const size_t count = 64;
  const Message at_root =
      make_message(Collective::bcast, root_buffer.data(), nullptr, count, ranks);
  const Message elsewhere =
      make_message(Collective::bcast, other_buffer.data(), nullptr, count, ranks);
  ValueCheck(workload, root, ranks).prepare(Collective::bcast, at_root, 3);
  if (ranks > 1) {
    const ValueCheck other(workload, 0, ranks);
    other.prepare(Collective::bcast, elsewhere, 3);
    EXPECT_FALSE(other.verify(Collective::bcast, elsewhere, 3)) << "the poisoned buffer passed";
  }
  std::copy_n(root_buffer.data(), bytes, other_buffer.data());
  EXPECT_TRUE(ValueCheck(workload, 0, ranks).verify(Collective::bcast, elsewhere, 3));
  EXPECT_TRUE(ValueCheck(workload, root, ranks).verify(Collective::bcast, at_root, 3));
}

// Every collective run by hand on simulated ranks, from its definition in
// coll.h (independent of ValueCheck and of the traits table): what each
// rank's outputs must hold given every rank's inputs.
template <typename T>
struct SimulatedRanks {
  SimulatedRanks(Collective collective, const Workload& workload, int ranks, size_t count)
      : collective(collective), workload(workload), ranks(ranks) {
    const size_t elements = buffer_bytes(collective, count, ranks);  // elements, not bytes
    for (int rank = 0; rank < ranks; ++rank) {
      send.emplace_back(elements);
      recv.emplace_back(elements);
      messages.push_back(
          make_message(collective, bytes(send.back()), bytes(recv.back()), count, ranks));
    }
  }

  static std::byte* bytes(std::vector<T>& values) {
    return reinterpret_cast<std::byte*>(values.data());
  }

  // send[first..end) combined elementwise, elements [0, length).
  std::vector<T> fold(int first, int end, size_t length) const {
    std::vector<T> result(send[first].begin(), send[first].begin() + length);
    for (int rank = first + 1; rank < end; ++rank) {
      for (size_t i = 0; i < length; ++i) {
        result[i] = reference_reduce(workload.op, result[i], send[rank][i]);
      }
    }
    return result;
  }

  // Writes every rank's outputs as the collective defines them.
  void run() {
    const size_t count = messages[0].count;
    const int root = workload.root;
    const auto& counts = messages[0].counts;
    const auto& displs = messages[0].displs;
    const auto copy_block = [](const std::vector<T>& from, size_t from_at, std::vector<T>& to,
                               size_t to_at, size_t length) {
      std::copy_n(from.begin() + from_at, length, to.begin() + to_at);
    };
    for (int r = 0; r < ranks; ++r) {
      std::vector<T>& out = recv[r];
      switch (collective) {
        case Collective::allreduce:
          std::ranges::copy(fold(0, ranks, count), out.begin());
          break;
        case Collective::reduce:
          if (r == root) std::ranges::copy(fold(0, ranks, count), out.begin());
          break;
        case Collective::scan:
          std::ranges::copy(fold(0, r + 1, count), out.begin());
          break;
        case Collective::exscan:
          if (r > 0) std::ranges::copy(fold(0, r, count), out.begin());
          break;
        case Collective::reduce_scatter:
        case Collective::reduce_scatter_block: {
          const std::vector<T> whole = fold(0, ranks, count);
          copy_block(whole, displs[r], out, 0, counts[r]);
          break;
        }
        case Collective::bcast:
          if (r != root) copy_block(send[root], 0, send[r], 0, count);
          break;
        case Collective::allgather:
        case Collective::allgatherv:
        case Collective::gather:
        case Collective::gatherv:
          if (r != root && (collective == Collective::gather || collective == Collective::gatherv))
            break;
          for (int j = 0; j < ranks; ++j) copy_block(send[j], 0, out, displs[j], counts[j]);
          break;
        case Collective::scatter:
        case Collective::scatterv:
          copy_block(send[root], displs[r], out, 0, counts[r]);
          break;
        case Collective::alltoall:
        case Collective::alltoallv:
          for (int j = 0; j < ranks; ++j) copy_block(send[j], displs[r], out, displs[j], counts[j]);
          break;
        case Collective::barrier:
          break;
      }
    }
  }

  // The output buffer and the elements of it rank r must hold; empty where
  // the collective gives r nothing.
  std::pair<std::vector<T>*, size_t> output(int r) {
    const Message& m = messages[r];
    const size_t total = m.counts.empty() ? m.count : m.displs.back() + m.counts.back();
    switch (collective) {
      case Collective::bcast:
        return {&send[r], m.count};
      case Collective::reduce:
        return {&recv[r], r == workload.root ? m.count : 0};
      case Collective::exscan:
        return {&recv[r], r > 0 ? m.count : 0};
      case Collective::reduce_scatter:
      case Collective::reduce_scatter_block:
      case Collective::scatter:
      case Collective::scatterv:
        return {&recv[r], m.counts[r]};
      case Collective::gather:
      case Collective::gatherv:
        return {&recv[r], r == workload.root ? total : 0};
      case Collective::allgather:
      case Collective::allgatherv:
      case Collective::alltoall:
      case Collective::alltoallv:
        return {&recv[r], total};
      default:
        return {&recv[r], m.count};
    }
  }

  bool verify(int r, size_t iteration) const {
    return ValueCheck(workload, r, ranks).verify(collective, messages[r], iteration);
  }
  void prepare(int r, size_t iteration) const {
    ValueCheck(workload, r, ranks).prepare(collective, messages[r], iteration);
  }

  Collective collective;
  Workload workload;
  int ranks;
  std::vector<std::vector<T>> send, recv;
  std::vector<Message> messages;
};

class EveryCollectiveTest
    : public testing::TestWithParam<std::tuple<Collective, coll_datatype_t, int>> {};

TEST_P(EveryCollectiveTest, ResultPassesCorruptionMisroutingAndPoisonFail) {
  const Collective collective = std::get<0>(GetParam());
  const coll_datatype_t datatype = std::get<1>(GetParam());
  const int ranks = std::get<2>(GetParam());
  visit_datatype(datatype, [&]<typename T>(TypeTag<T>) {
    const std::vector<coll_op_t> ops = takes_op(collective)
                                           ? std::vector<coll_op_t>{COLL_SUM, COLL_PROD, COLL_MAX}
                                           : std::vector<coll_op_t>{COLL_SUM};
    for (coll_op_t op : ops) {
      // A root that is not rank 0; 11 elements: not a multiple of the
      // period nor of 3 ranks (reduce_scatter's blocks differ).
      for (size_t iteration : {0u, 5u}) {
        SCOPED_TRACE(std::string(op_name(op)) + " iteration " + std::to_string(iteration));
        const Workload workload{datatype, op, ranks - 1};
        SimulatedRanks<T> sim(collective, workload, ranks, 11);
        for (int r = 0; r < ranks; ++r) sim.prepare(r, iteration);
        sim.run();
        for (int r = 0; r < ranks; ++r) {
          EXPECT_TRUE(sim.verify(r, iteration)) << "rank " << r;
        }
        // The values change with the iteration: a stale result fails. (Not
        // always after a reduction: a product over an even number of ranks
        // only swaps its factors 1 and 2, the maximum over many ranks is 8
        // nearly everywhere, a sum over 8k ranks covers every residue.)
        const int last = ranks - 1;  // the root: it holds a result in every collective
        if (op == COLL_SUM && ranks < 8 && sim.output(last).second > 0) {
          EXPECT_FALSE(sim.verify(last, iteration + 1)) << "a stale iteration passed";
        }
        for (int r = 0; r < ranks; ++r) {
          SCOPED_TRACE("rank " + std::to_string(r));
          auto [out, length] = sim.output(r);
          if (length == 0) continue;
          const std::vector<T> good = *out;
          // Every element is checked: the last one too.
          (*out)[length - 1] = static_cast<T>((*out)[length - 1] + 1);
          EXPECT_FALSE(sim.verify(r, iteration)) << "a corrupted element passed";
          *out = good;
          // A block from the wrong rank fails.
          const Message& m = sim.messages[r];
          const bool blocks = traits(collective).layout == Layout::blocks;
          if (blocks && ranks > 1 && length == m.count * ranks) {
            std::rotate(out->begin(), out->begin() + m.count, out->begin() + length);
            EXPECT_FALSE(sim.verify(r, iteration)) << "blocks from the wrong ranks passed";
            *out = good;
          }
          if (traits(collective).movement == Movement::scatter && ranks > 1) {
            const int other = (r + 1) % ranks;
            std::copy_n(sim.send[workload.root].begin() + m.displs[other], m.count, out->begin());
            EXPECT_FALSE(sim.verify(r, iteration)) << "another rank's block passed";
            *out = good;
          }
          // prepare() poisons the output (at the bcast root it refills the
          // input): a collective that writes nothing fails.
          if (collective == Collective::bcast && r == workload.root) continue;
          sim.prepare(r, iteration);
          EXPECT_FALSE(sim.verify(r, iteration)) << "the poisoned output passed";
          *out = good;
        }
        if (takes_op(collective) && ranks > 2 && op == COLL_SUM) {
          // A reduction over the wrong ranks fails: scan's result where
          // exscan's is due, allreduce's where scan's is due (at rank 1,
          // whose prefix differs from the whole).
          SimulatedRanks<T> other(
              collective == Collective::scan ? Collective::allreduce : Collective::scan, workload,
              ranks, 11);
          for (int r = 0; r < ranks; ++r) other.prepare(r, iteration);
          other.run();
          const int r = 1;
          auto [out, length] = sim.output(r);
          auto [wrong, wrong_length] = other.output(r);
          if (length > 0 && wrong_length >= length && collective != Collective::reduce &&
              traits(collective).layout == Layout::vector) {
            std::copy_n(wrong->begin(), length, out->begin());
            EXPECT_FALSE(sim.verify(r, iteration)) << "the wrong prefix passed";
          }
        }
      }
    }
  });
}

std::vector<Collective> collectives_with_message() {
  std::vector<Collective> collectives;
  for (const CollectiveTraits& row : all_collectives()) {
    if (has_message(row.collective)) collectives.push_back(row.collective);
  }
  return collectives;
}

INSTANTIATE_TEST_SUITE_P(CollectivesTypesAndRanks, EveryCollectiveTest,
                         testing::Combine(testing::ValuesIn(collectives_with_message()),
                                          testing::Values(COLL_INT8, COLL_UINT16, COLL_INT64,
                                                          COLL_FLOAT, COLL_DOUBLE),
                                          testing::Values(1, 2, 3, 7)),
                         [](const testing::TestParamInfo<EveryCollectiveTest::ParamType>& info) {
                           return std::string(collective_name(std::get<0>(info.param))) + "_" +
                                  datatype_name(std::get<1>(info.param)) + "_" +
                                  std::to_string(std::get<2>(info.param));
                         });

INSTANTIATE_TEST_SUITE_P(TypesAndRanks, ValueCheckTest,
                         testing::Combine(testing::Values(COLL_INT8, COLL_INT16, COLL_INT32,
                                                          COLL_INT64, COLL_UINT8, COLL_UINT16,
                                                          COLL_UINT32, COLL_UINT64, COLL_FLOAT,
                                                          COLL_DOUBLE),
                                          testing::Values(1, 2, 3, 7, 40)));

// Timings are never asserted (a shared, noisy machine): only that the
// probe measures something.
TEST(MemcpyProbe, GivesAPositiveBandwidth) {
  for (size_t bytes : {size_t{1}, size_t{4}, size_t{4096}, size_t{1} << 20}) {
    const double gbs = measure_memcpy_gbs(bytes, 10);
    EXPECT_GT(gbs, 0.0) << bytes << " B";
    EXPECT_TRUE(std::isfinite(gbs)) << bytes << " B";
  }
  EXPECT_EQ(measure_memcpy_gbs(0, 10), 0.0);
}

TEST(MemcpyProbe, FractionIsBusbwOverMemcpy) {
  SizeResult size;
  size.libraries = {{"libcoll", {}, 1.0, 3.0, "", {}, {}}, {"mpi", {}, 1.0, 1.5, "", {}, {}}};
  EXPECT_FALSE(busbw_per_memcpy(size, 0)) << "no memcpy measured, no fraction";
  size.memcpy_gbs = 6.0;
  EXPECT_DOUBLE_EQ(busbw_per_memcpy(size, 0).value(), 0.5);
  EXPECT_DOUBLE_EQ(busbw_per_memcpy(size, 1).value(), 0.25);
  EXPECT_FALSE(busbw_per_memcpy(size, 2));
  size.memcpy_gbs = 0.0;
  EXPECT_FALSE(busbw_per_memcpy(size, 0)) << "no division by a zero memcpy";
}

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

SizeResult sample_allreduce() {
  SizeResult size;
  size.bytes = 8;
  size.count = 2;
  size.iterations = 10;
  size.libraries = {{"libcoll", {2.5, 2.0, 3.0}, 0.0032, 0.0048, "ring", true, {}},
                    {"mpi", {2.0, 1.5, 2.5}, 0.004, 0.006, "", true, {}}};
  size.memcpy_gbs = 0.96;  // libcoll's fraction 0.005, MPI's 0.00625
  return size;
}

SizeResult sample_bcast() {
  SizeResult size;
  size.bytes = 16;
  size.count = 4;
  size.iterations = 10;
  size.libraries = {{"libcoll", {1.5, 1.0, 2.0}, 0.0107, 0.0107, "binomial", true, {}},
                    {"mpi", {1.0, 0.5, 1.5}, 0.016, 0.016, "", true, {}}};
  return size;
}

// What coll_bench.cpp makes of a barrier: size 0, bandwidth 0, no
// validation.
SizeResult sample_barrier() {
  SizeResult size;
  size.iterations = 1000;
  size.libraries = {{"libcoll", {1.25, 1.0, 1.5}, 0.0, 0.0, "", {}, {}},
                    {"mpi", {2.5, 2.0, 3.0}, 0.0, 0.0, "", {}, {}}};
  return size;
}

std::vector<CollectiveResults> sample_results() {
  return {{Collective::allreduce, {sample_allreduce()}},
          {Collective::bcast, {sample_bcast()}},
          {Collective::barrier, {sample_barrier()}}};
}

RunInfo sample_info() {
  RunInfo info;
  info.ranks = 4;
  info.transport = "shm";
  info.bootstrap = "pmix";
  info.mpi_version = "Open MPI v4.1.4";
  info.validate = true;
  return info;
}

TEST(Report, CsvHasOneRecordPerLibrary) {
  const std::string path = testing::TempDir() + "bench_report.csv";
  std::vector<CollectiveResults> results = sample_results();
  // The synchronized-start figure where it was taken; empty elsewhere.
  results[0].sizes[0].libraries[0].sync_start = SyncStartStats{4.5, 0.125, 20};
  write_csv(path, sample_info(), results);
  // memcpy_gbs for allreduce only; barrier has size 0 and no datatype,
  // bandwidth or validation.
  EXPECT_EQ(read_file(path),
            "collective,library,np,datatype,op,root,size_bytes,count,"
            "iterations,avg_us,min_us,max_us,algbw_gbs,busbw_gbs,memcpy_gbs,algorithm,"
            "validation,transport,bootstrap,sync_max_us,sync_late,sync_window_us\n"
            "allreduce,libcoll,4,float,sum,,8,2,10,2.5,2,3,0.0032,0.0048,0.96,"
            "ring,pass,shm,pmix,4.5,0.125,20\n"
            "allreduce,mpi,4,float,sum,,8,2,10,2,1.5,2.5,0.004,0.006,0.96,,pass,,,,,\n"
            "bcast,libcoll,4,float,,0,16,4,10,1.5,1,2,0.0107,0.0107,,binomial,pass,shm,pmix,,,\n"
            "bcast,mpi,4,float,,0,16,4,10,1,0.5,1.5,0.016,0.016,,,pass,,,,,\n"
            "barrier,libcoll,4,,,,0,0,1000,1.25,1,1.5,,,,,,shm,pmix,,,\n"
            "barrier,mpi,4,,,,0,0,1000,2.5,2,3,,,,,,,,,,\n");
}

// The JSON object of the first record of `collective` and `library`.
std::string json_record(const std::string& json, const std::string& collective,
                        const std::string& library) {
  const std::string opening =
      "\"collective\": \"" + collective + "\",\n      \"library\": \"" + library + "\"";
  const size_t start = json.find(opening);
  if (start == std::string::npos) return "";
  return json.substr(start, json.find('}', start) - start);
}

TEST(Report, JsonNamesTheRunAndUsesNullForMissing) {
  const std::string path = testing::TempDir() + "bench_report.json";
  write_json(path, sample_info(), sample_results());
  const std::string json = read_file(path);
  EXPECT_NE(json.find("\"mpi\": \"Open MPI v4.1.4\""), std::string::npos);
  EXPECT_NE(json.find("\"validate\": true"), std::string::npos);
  EXPECT_NE(json.find("\"root\": null"), std::string::npos);
  EXPECT_NE(json.find("\"algorithm\": \"ring\""), std::string::npos);
  EXPECT_NE(json.find("\"avg_us\": 2.5"), std::string::npos);

  const std::string allreduce = json_record(json, "allreduce", "mpi");
  EXPECT_NE(allreduce.find("\"memcpy_gbs\": 0.96"), std::string::npos) << allreduce;
  const std::string bcast = json_record(json, "bcast", "libcoll");
  EXPECT_NE(bcast.find("\"memcpy_gbs\": null"), std::string::npos) << bcast;
  EXPECT_NE(bcast.find("\"root\": 0"), std::string::npos) << bcast;
  const std::string barrier = json_record(json, "barrier", "libcoll");
  ASSERT_FALSE(barrier.empty()) << json;
  for (const char* field : {"\"size_bytes\": 0", "\"memcpy_gbs\": null", "\"busbw_gbs\": null",
                            "\"algbw_gbs\": null", "\"validation\": null", "\"datatype\": null",
                            "\"root\": null", "\"op\": null", "\"avg_us\": 1.25"}) {
    EXPECT_NE(barrier.find(field), std::string::npos) << field << " in " << barrier;
  }
  std::remove(path.c_str());
}

// The lines of the table TablePrinter prints for one result: header and row.
std::vector<std::string> table_lines(const RunInfo& info, Collective collective,
                                     const std::vector<std::string>& libraries,
                                     const SizeResult& result) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::tmpfile(), std::fclose);
  if (!file) {
    ADD_FAILURE() << "tmpfile failed";
    return {};
  }
  const TablePrinter table(file.get(), info, collective, libraries);
  table.print_header();
  table.print_row(result);
  std::rewind(file.get());
  std::string text;
  char buffer[512];
  size_t read;
  while ((read = std::fread(buffer, 1, sizeof buffer, file.get())) > 0) text.append(buffer, read);
  std::vector<std::string> lines;
  std::istringstream stream(text);
  for (std::string line; std::getline(stream, line);) lines.push_back(line);
  return lines;
}

// The table of coll_bench, libcoll alone: no MPI version, only libcoll's
// result.
std::vector<std::string> alone_table_lines(Collective collective, SizeResult result) {
  RunInfo info = sample_info();
  info.mpi_version.clear();
  result.libraries.resize(1);
  return table_lines(info, collective, {"libcoll"}, result);
}

TEST(Table, AllreduceSideBySideShowsMemcpyAndFractions) {
  const std::vector<std::string> lines =
      table_lines(sample_info(), Collective::allreduce, {"libcoll", "mpi"}, sample_allreduce());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "# libcoll vs Open MPI v4.1.4 Allreduce Latency Test");
  for (const char* header :
       {"# Size", "libcoll Avg(us)", "MPI Avg(us)", "libcoll/MPI", "libcoll Busbw(GB/s)",
        "MPI Busbw(GB/s)", "Memcpy(GB/s)", "libcoll Busbw/Memcpy", "MPI Busbw/Memcpy"}) {
    EXPECT_NE(lines[2].find(header), std::string::npos) << header << " in " << lines[2];
  }
  // Memcpy 0.96 GB/s, libcoll 0.0048 / 0.96, MPI 0.006 / 0.96, in the
  // order of the headers.
  const size_t memcpy_at = lines[3].find(" 0.96 ");
  const size_t libcoll_at = lines[3].find(" 0.005 ");
  const size_t mpi_at = lines[3].find(" 0.006 ");
  ASSERT_NE(memcpy_at, std::string::npos) << lines[3];
  ASSERT_NE(libcoll_at, std::string::npos) << lines[3];
  ASSERT_NE(mpi_at, std::string::npos) << lines[3];
  EXPECT_LT(memcpy_at, libcoll_at);
  EXPECT_LT(libcoll_at, mpi_at);
  EXPECT_NE(lines[3].find("Pass"), std::string::npos) << lines[3];
}

TEST(Table, AllreduceAloneNamesTheFractionByLibrary) {
  SizeResult result = sample_allreduce();
  const std::vector<std::string> lines = alone_table_lines(Collective::allreduce, result);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[2].find("Memcpy(GB/s)"), std::string::npos) << lines[2];
  EXPECT_NE(lines[2].find("libcoll Busbw/Memcpy"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[2].find("MPI"), std::string::npos) << lines[2];
  EXPECT_NE(lines[3].find(" 0.005 "), std::string::npos) << lines[3];
  // Without a measurement (never the case for allreduce): a dash, not 0.
  result.memcpy_gbs.reset();
  const std::vector<std::string> unmeasured = alone_table_lines(Collective::allreduce, result);
  ASSERT_EQ(unmeasured.size(), 4u);
  EXPECT_NE(unmeasured[3].find(" - "), std::string::npos) << unmeasured[3];
}

TEST(Table, BcastHasNoMemcpyColumns) {
  const std::vector<std::string> lines =
      table_lines(sample_info(), Collective::bcast, {"libcoll", "mpi"}, sample_bcast());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find("root 0"), std::string::npos) << lines[1];
  EXPECT_NE(lines[2].find("Busbw(GB/s)"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[2].find("Memcpy"), std::string::npos) << lines[2];
}

TEST(Table, BarrierIsOneRowWithoutSizeAsOsuBarrier) {
  RunInfo info = sample_info();
  info.full = true;
  const std::vector<std::string> lines =
      table_lines(info, Collective::barrier, {"libcoll", "mpi"}, sample_barrier());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "# libcoll vs Open MPI v4.1.4 Barrier Latency Test");
  // No datatype, operator or root: a barrier has none.
  EXPECT_EQ(lines[1], "# np 4, transport shm, bootstrap pmix, 1 alternating rounds");
  EXPECT_EQ(lines[2].rfind("# libcoll Avg(us)", 0), 0u) << lines[2];
  for (const char* header : {"MPI Avg(us)", "libcoll/MPI", "libcoll Min(us)", "MPI Max(us)",
                             "Iterations", "Algorithm"}) {
    EXPECT_NE(lines[2].find(header), std::string::npos) << header << " in " << lines[2];
  }
  for (const char* absent : {"Size", "Busbw", "Algbw", "Memcpy", "Validation"}) {
    EXPECT_EQ(lines[2].find(absent), std::string::npos) << absent << " in " << lines[2];
  }
  // libcoll 1.25, MPI 2.50, ratio 0.50, then min/max and 1000 iterations;
  // the number sits right-aligned under its header.
  std::istringstream row(lines[3]);
  std::vector<std::string> fields;
  for (std::string field; row >> field;) fields.push_back(field);
  ASSERT_GE(fields.size(), 3u) << lines[3];
  EXPECT_EQ(fields[0], "1.25");
  EXPECT_EQ(fields[1], "2.50");
  EXPECT_EQ(fields[2], "0.50");
  EXPECT_NE(lines[3].find("1000"), std::string::npos) << lines[3];
  const size_t first_header_end = lines[2].find("MPI Avg(us)");
  EXPECT_LT(lines[3].find("1.25") + 4, first_header_end + 1) << lines[2] << "\n" << lines[3];
}

TEST(Table, BarrierAloneUsesOsusHeader) {
  const std::vector<std::string> lines = alone_table_lines(Collective::barrier, sample_barrier());
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "# libcoll Barrier Latency Test");
  EXPECT_EQ(lines[2].rfind("# Avg Latency(us)", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].substr(0, 18), "              1.25") << lines[3];
}

// The header names the operator where it applies (the reductions) and the
// root where it applies (the rooted collectives); so do the records.
TEST(Table, HeaderNamesOperatorAndRootWhereTheyApply) {
  RunInfo info = sample_info();
  info.workload.root = 2;
  const auto header = [&](Collective collective) {
    return table_lines(info, collective, {"libcoll", "mpi"}, sample_bcast()).at(1);
  };
  EXPECT_NE(header(Collective::reduce).find("datatype float, op sum, root 2"), std::string::npos)
      << header(Collective::reduce);
  EXPECT_NE(header(Collective::scatterv).find("datatype float, root 2"), std::string::npos)
      << header(Collective::scatterv);
  EXPECT_NE(header(Collective::exscan).find("datatype float, op sum,"), std::string::npos)
      << header(Collective::exscan);
  for (Collective collective : {Collective::allgather, Collective::alltoallv}) {
    EXPECT_EQ(header(collective).find(" op "), std::string::npos) << header(collective);
    EXPECT_EQ(header(collective).find("root"), std::string::npos) << header(collective);
  }
  EXPECT_EQ(
      table_lines(info, Collective::reduce_scatter_block, {"libcoll", "mpi"}, sample_bcast()).at(0),
      "# libcoll vs Open MPI v4.1.4 Reduce_scatter_block Latency Test");

  const std::string path = testing::TempDir() + "bench_report_rooted.csv";
  write_csv(path, info,
            {{Collective::reduce, {sample_bcast()}}, {Collective::allgather, {sample_bcast()}}});
  const std::string csv = read_file(path);
  EXPECT_NE(csv.find("\nreduce,libcoll,4,float,sum,2,16,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nallgather,mpi,4,float,,,16,"), std::string::npos) << csv;
  std::remove(path.c_str());
}

TEST(Report, WritingToAMissingDirectoryThrows) {
  EXPECT_THROW(write_csv("/nonexistent-dir/x.csv", sample_info(), sample_results()),
               std::runtime_error);
}

}  // namespace
}  // namespace bench
