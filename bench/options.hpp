// Command line of coll_bench and coll_bench_mpi, modelled on the OSU
// micro-benchmarks (osu_allreduce, osu_bcast, osu_barrier, osu_allgather, ...).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective.hpp"

namespace bench {

struct Options {
  size_t min_bytes = 4;  // OSU's default minimum for allreduce
  size_t max_bytes = size_t{1} << 20;
  size_t iterations = 1000;  // for sizes up to kLargeMessageBytes
  size_t warmup = 100;       // likewise
  bool full = false;         // -f: min, max latency and iterations columns
  bool validate = false;     // -c: check every result, Validation column
  Workload workload;
  std::vector<Collective> collectives = {Collective::allreduce, Collective::bcast};
  std::string csv_path;
  std::string json_path;
  size_t rounds = 4;  // coll_bench_mpi: alternating rounds per size
  // coll_bench_mpi: whose barrier starts each timed collective of both
  // libraries: "mpi" (MPI_Barrier for both, the OSU loop users run with a
  // PMPI wrapper) or "own" (each library its own barrier).
  std::string sync = "mpi";
  // --sync-start: also time every collective from one agreed start on the
  // ranks' common clock, the maximum over the ranks (measure.hpp).
  bool sync_start = false;
  // --rotate-root: rooted collectives move their root one rank on per
  // iteration, starting at -r.
  bool rotate_root = false;
  // --alloc-mem: the message buffers come from the library's registered
  // memory (MPI_Alloc_mem in coll_bench_mpi - coll_mem_alloc's where the
  // shim serves it -, coll_mem_alloc in coll_bench) instead of
  // aligned_alloc.
  bool alloc_mem = false;
  bool help = false;
};

// Above this size OSU runs fewer iterations (osu_util.h LARGE_MESSAGE_SIZE).
inline constexpr size_t kLargeMessageBytes = 8192;

struct IterationPlan {
  size_t warmup = 0;
  size_t iterations = 0;
};

// OSU's rule: sizes above kLargeMessageBytes run a tenth of the iterations
// and of the warm-up (rounded up, at least one timed iteration), so the
// defaults give OSU's 1000/100 iterations and 100/10 warm-up.
IterationPlan iteration_plan(const Options& options, size_t message_bytes);

// OSU's sweep: min, 2 min, 4 min, ... up to max. Sizes smaller than one
// element of the datatype are left out (they would carry no element).
std::vector<size_t> message_sizes(const Options& options);

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// side_by_side: the program is coll_bench_mpi, which also takes --rounds.
// Throws UsageError with a message for the user.
Options parse_options(int argc, char** argv, bool side_by_side);

std::string usage(const char* program, bool side_by_side);

}  // namespace bench
