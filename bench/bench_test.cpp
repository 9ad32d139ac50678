// Unit tests of the benchmark's own logic (no launcher, no libcoll
// communicator): options, the size sweep, the iteration rule, validation
// values and the report files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "aligned_buffer.hpp"
#include "datatypes.hpp"
#include "options.hpp"
#include "report.hpp"
#include "value_check.hpp"

namespace bench {
namespace {

Options parse(std::initializer_list<const char*> arguments, bool side_by_side = false) {
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

TEST(Options, MaxAloneKeepsDefaultMin) {
  const Options options = parse({"-m", "65536"});
  EXPECT_EQ(options.min_bytes, 4u);
  EXPECT_EQ(options.max_bytes, 65536u);
}

TEST(Options, RejectsBadInput) {
  for (auto arguments : std::vector<std::vector<const char*>>{{"-m", "64:8"},
                                                              {"-m", "0:8"},
                                                              {"-m", "4:x"},
                                                              {"-i", "0"},
                                                              {"-i", "-3"},
                                                              {"-T", "complex"},
                                                              {"-o", "avg"},
                                                              {"-T", "float", "-o", "bxor"},
                                                              {"-b", "alltoall"},
                                                              {"-b", "allreduce", "-r", "1"},
                                                              {"-b", "bcast", "-o", "max"},
                                                              {"--rounds", "3"},
                                                              {"-z"},
                                                              {"-m"},
                                                              {"stray"}}) {
    std::vector<std::string> storage = {"coll_bench"};
    storage.insert(storage.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (std::string& argument : storage) argv.push_back(argument.data());
    argv.push_back(nullptr);
    EXPECT_THROW(parse_options(static_cast<int>(storage.size()), argv.data(), false), UsageError)
        << storage.back();
  }
}

TEST(Options, RoundsOnlySideBySide) { EXPECT_EQ(parse({"--rounds", "6"}, true).rounds, 6u); }

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
  const auto [datatype, ranks] = GetParam();
  visit_datatype(datatype, [&]<typename T>(TypeTag<T>) {
    for (int op = 0; op < COLL_OP_COUNT; ++op) {
      const Workload workload{datatype, static_cast<coll_op_t>(op), 0};
      if (is_bitwise(workload.op) && is_floating(datatype)) continue;
      const size_t count = 37;  // not a multiple of the period
      for (size_t iteration : {0u, 5u, 12u}) {
        SCOPED_TRACE(std::string(op_name(workload.op)) + " iteration " + std::to_string(iteration));
        std::vector<std::vector<T>> inputs(ranks, std::vector<T>(count));
        std::vector<T> result(count);
        const auto message_of = [&](int rank) {
          return Message{reinterpret_cast<std::byte*>(inputs[rank].data()),
                         reinterpret_cast<std::byte*>(result.data()), count};
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
  const Message at_root{root_buffer.data(), nullptr, count};
  const Message elsewhere{other_buffer.data(), nullptr, count};
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

INSTANTIATE_TEST_SUITE_P(TypesAndRanks, ValueCheckTest,
                         testing::Combine(testing::Values(COLL_INT8, COLL_INT16, COLL_INT32,
                                                          COLL_INT64, COLL_UINT8, COLL_UINT16,
                                                          COLL_UINT32, COLL_UINT64, COLL_FLOAT,
                                                          COLL_DOUBLE),
                                          testing::Values(1, 2, 3, 7, 40)));

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<CollectiveResults> sample_results() {
  SizeResult size;
  size.bytes = 8;
  size.count = 2;
  size.iterations = 10;
  size.libraries = {{"libcoll", {2.5, 2.0, 3.0}, 0.0032, 0.0048, "ring", true},
                    {"mpi", {2.0, 1.5, 2.5}, 0.004, 0.006, "", true}};
  return {{Collective::allreduce, {size}}};
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
  write_csv(path, sample_info(), sample_results());
  EXPECT_EQ(read_file(path),
            "collective,library,np,datatype,op,root,size_bytes,count,"
            "iterations,avg_us,min_us,max_us,algbw_gbs,busbw_gbs,algorithm,"
            "validation,transport,bootstrap\n"
            "allreduce,libcoll,4,float,sum,,8,2,10,2.5,2,3,0.0032,0.0048,"
            "ring,pass,shm,pmix\n"
            "allreduce,mpi,4,float,sum,,8,2,10,2,1.5,2.5,0.004,0.006,,pass,,"
            "\n");
  std::remove(path.c_str());
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
  std::remove(path.c_str());
}

TEST(Report, WritingToAMissingDirectoryThrows) {
  EXPECT_THROW(write_csv("/nonexistent-dir/x.csv", sample_info(), sample_results()),
               std::runtime_error);
}

}  // namespace
}  // namespace bench
