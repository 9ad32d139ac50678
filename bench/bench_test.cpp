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
                                                              {"-b", "barrier,gather"},
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

TEST(Report, WritingToAMissingDirectoryThrows) {
  EXPECT_THROW(write_csv("/nonexistent-dir/x.csv", sample_info(), sample_results()),
               std::runtime_error);
}

}  // namespace
}  // namespace bench
