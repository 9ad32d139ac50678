// Timing of one message size, as OSU times it: a barrier, then one timed
// collective, repeated; each rank's average over its iterations, then the
// average, minimum and maximum of those averages over the ranks. Barrier,
// as osu_barrier: one barrier, then the iterations back to back under one
// timer, whose average is the rank's.
//
// With SizeRun::sync_start, also the figure an application waiting for its
// slowest rank sees, without a barrier's skew (a barrier releases the
// ranks at different instants, and a library whose barrier lets rank 0 go
// first gives a rooted collective a head start): the window scheme of
// ReproMPI (Hunold and Carpen-Amarie). The ranks agree on a start time T0
// on their common clock; iteration i starts on every rank at T0 + i W
// (a rank spins until then) and its latency is the latest rank's finish
// minus that start. An iteration a rank reached after its start is late
// and left out; W grows (doubles) while more than a quarter are late.
// The figure is the median over the on-time iterations.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "collective.hpp"
#include "options.hpp"
#include "runner.hpp"

namespace bench {

// Over all ranks, of each rank's average latency.
struct LatencyStats {
  double avg_us = 0;
  double min_us = 0;
  double max_us = 0;
};

// The synchronized-start figure of one library at one size.
struct SyncStartStats {
  double max_us = 0;    // median over the iterations that were on time
  double late = 0;      // fraction of the iterations that were late
  double window_us = 0;  // W, the time between two starts
};

struct LibraryResult {
  std::string library;  // Runner::library()
  LatencyStats latency;
  double algbw_gbs = 0;       // algorithm_bytes / avg latency, 1 GB = 1e9 B
  double busbw_gbs = 0;       // algbw x bus_bandwidth_factor
  std::string algorithm;      // "" when the library does not say
  std::optional<bool> valid;  // set when validating: on every rank
  // Set with SizeRun::sync_start when the ranks share one clock (one host).
  std::optional<SyncStartStats> sync_start;
};

struct SizeResult {
  size_t bytes = 0;  // count x element size
  size_t count = 0;
  size_t iterations = 0;                 // timed, per library
  std::vector<LibraryResult> libraries;  // in the order of the runners
  // This machine's memcpy bandwidth at this size (memcpy_probe.hpp), GB/s;
  // measured for allreduce only.
  std::optional<double> memcpy_gbs;
};

// Bus bandwidth of `library` as a fraction of memcpy_gbs; none without it.
std::optional<double> busbw_per_memcpy(const SizeResult& result, size_t library);

// False when a library's result was wrong on some rank.
bool all_valid(const SizeResult& result);

struct SizeRun {
  Collective collective;
  Workload workload;
  Message message;
  IterationPlan plan;
  size_t rounds = 1;      // >1: the runners take turns, the first one changing
  bool validate = false;  // ignored for barrier (nothing to check)
  // Whose barrier starts every timed collective (and every barrier loop)
  // of every runner; null: each runner its own.
  Runner* sync = nullptr;
  bool sync_start = false;  // also the synchronized-start figure
  // Rooted collectives: iteration i's root is (workload.root + i) mod np,
  // so that no rank is always the root (its place in the tree decides a
  // rooted collective's latency).
  bool rotate_root = false;
};

// Measures run on every runner and reduces the timings over the ranks with
// reducer. Collective over all ranks of every runner.
SizeResult measure_size(const std::vector<Runner*>& runners, Runner& reducer, const SizeRun& run);

}  // namespace bench
