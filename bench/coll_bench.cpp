// coll_bench / coll_bench_mpi: OSU-style latency and bandwidth of libcoll's
// collectives, and latency of its barrier, alone or side by side with Open
// MPI (README.md).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <optional>

#include "aligned_buffer.hpp"
#include "datatypes.hpp"
#include "measure.hpp"
#include "memcpy_probe.hpp"
#include "options.hpp"
#include "report.hpp"
#include "session.hpp"

namespace {

using namespace bench;

constexpr int kFailed = 1;    // a wrong result, or a library error
constexpr int kBadUsage = 2;  // nothing was measured

std::vector<std::string> library_names(const Session& session) {
  std::vector<std::string> names;
  for (const Runner* runner : session.runners()) {
    names.push_back(runner->library());
  }
  return names;
}

// Every rank parses the same command line and so reaches the same verdict;
// only the reporting rank says it.
std::optional<Options> options_or_usage(const Session& session, int argc, char** argv,
                                        const char* program, int& exit_code) {
  try {
    Options options = parse_options(argc, argv, session.side_by_side());
    if (options.help) {
      if (session.reporting()) {
        std::fputs(usage(program, session.side_by_side()).c_str(), stdout);
      }
      exit_code = 0;
      return std::nullopt;
    }
    const int ranks = session.reducer().size();
    if (options.workload.root >= ranks) {
      throw UsageError("-r: root " + std::to_string(options.workload.root) + " is not a rank of " +
                       std::to_string(ranks));
    }
    const bool sized = std::any_of(options.collectives.begin(), options.collectives.end(),
                                   [](Collective collective) { return has_message(collective); });
    if (sized && message_sizes(options).empty()) {
      throw UsageError(std::string("-m: no size holds one element of ") +
                       datatype_name(options.workload.datatype));
    }
    return options;
  } catch (const UsageError& error) {
    if (session.reporting()) {
      std::fprintf(stderr, "%s: %s (%s -h for help)\n", program, error.what(), program);
    }
    exit_code = kBadUsage;
    return std::nullopt;
  }
}

// Measures every size of one collective (barrier: its one row), printing
// each row as it comes.
CollectiveResults measure_collective(const Session& session, const Options& options,
                                     const RunInfo& info, Collective collective,
                                     const AlignedBuffer& send, const AlignedBuffer& recv) {
  const TablePrinter table(stdout, info, collective, library_names(session));
  if (session.reporting()) table.print_header();
  CollectiveResults results{collective, {}};
  const size_t element = coll_datatype_size(options.workload.datatype);
  const std::vector<size_t> sizes =
      has_message(collective) ? message_sizes(options) : std::vector<size_t>{0};
  for (size_t bytes : sizes) {
    SizeRun run{collective,
                options.workload,
                make_message(collective, send.data(), recv.data(), bytes / element, info.ranks),
                iteration_plan(options, bytes),
                info.rounds,
                options.validate,
                options.sync == "mpi" ? session.peer() : nullptr,
                options.sync_start,
                options.rotate_root};
    // Before the libraries run, so that their timings stay as they were.
    std::optional<double> memcpy_gbs;
    if (collective == Collective::allreduce) {
      memcpy_gbs = shared_memcpy_gbs(session.reducer(), bytes, run.plan.iterations);
    }
    SizeResult result = measure_size(session.runners(), session.reducer(), run);
    result.memcpy_gbs = memcpy_gbs;
    if (session.reporting()) table.print_row(result);
    results.sizes.push_back(std::move(result));
  }
  return results;
}

void write_files(const Options& options, const RunInfo& info,
                 const std::vector<CollectiveResults>& results) {
  if (!options.csv_path.empty()) write_csv(options.csv_path, info, results);
  if (!options.json_path.empty()) write_json(options.json_path, info, results);
}

int run_benchmark(const Session& session, int argc, char** argv, const char* program) {
  if (!session.startup_problem().empty()) {
    if (session.reporting()) {
      std::fprintf(stderr, "%s: %s\n", program, session.startup_problem().c_str());
    }
    return kBadUsage;
  }
  int exit_code = 0;
  const std::optional<Options> options = options_or_usage(session, argc, argv, program, exit_code);
  if (!options) return exit_code;

  RunInfo info = session.run_info();
  info.workload = options->workload;
  info.full = options->full;
  info.validate = options->validate;
  info.sync_start = options->sync_start;
  info.rotate_root = options->rotate_root;
  info.rounds = session.side_by_side() ? options->rounds : 1;
  if (session.side_by_side()) info.sync = options->sync;

  // One pair of buffers for every size and collective, as OSU allocates
  // them: large enough for ranks blocks of the largest size where a
  // collective takes one block per rank (allgather, alltoall, ...).
  size_t buffer = 0;
  for (Collective collective : options->collectives) {
    buffer = std::max(buffer, buffer_bytes(collective, options->max_bytes, info.ranks));
  }
  const AlignedBuffer send = options->alloc_mem
                                 ? AlignedBuffer(buffer, Session::alloc_mem, Session::release_mem)
                                 : AlignedBuffer(buffer);
  const AlignedBuffer recv = options->alloc_mem
                                 ? AlignedBuffer(buffer, Session::alloc_mem, Session::release_mem)
                                 : AlignedBuffer(buffer);
  std::vector<CollectiveResults> results;
  for (Collective collective : options->collectives) {
    if (session.reporting() && !results.empty()) std::printf("\n");
    results.push_back(measure_collective(session, *options, info, collective, send, recv));
  }

  bool valid = true;
  for (const CollectiveResults& collective : results) {
    for (const SizeResult& size : collective.sizes) {
      valid = valid && all_valid(size);
    }
  }
  if (session.reporting()) {
    write_files(*options, info, results);
    if (!valid) std::fprintf(stderr, "%s: validation failed\n", program);
  }
  return valid ? 0 : kFailed;
}

// argv[0] without its directory, for messages.
const char* program_name(int argc, char** argv) {
  if (argc < 1 || !argv[0]) return "coll_bench";
  const char* slash = std::strrchr(argv[0], '/');
  return slash ? slash + 1 : argv[0];
}

}  // namespace

int main(int argc, char** argv) {
  const char* program = program_name(argc, argv);
  std::optional<Session> session;
  try {
    session.emplace(&argc, &argv);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program, error.what());
    return kFailed;
  }
  try {
    return run_benchmark(*session, argc, argv, program);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: rank %d: %s\n", program, session->reducer().rank(), error.what());
    session->end_job_after_error(kFailed);
    return kFailed;
  }
}
