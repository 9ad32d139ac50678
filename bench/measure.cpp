#include "measure.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include <sched.h>

#include "value_check.hpp"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

// One runner's share of a size: its checker and its timings so far.
struct Contender {
  Contender(Runner& runner, const Workload& workload)
      : runner(&runner), check(workload, runner.rank(), runner.size()) {}

  Runner* runner;
  ValueCheck check;
  size_t next_iteration = 0;  // numbers the iterations for ValueCheck
  double seconds = 0;         // timed iterations only
  size_t timed = 0;
  bool valid = true;
  std::string algorithm;
  std::optional<SyncStartStats> sync_start;
};

// osu_barrier's loop: one barrier starts every rank together, then the
// barriers are timed back to back (a barrier before each would be timed
// against itself). Returns the seconds of all of them.
double run_barriers(Contender& contender, const SizeRun& run, size_t iterations) {
  if (iterations == 0) return 0;
  (run.sync ? run.sync : contender.runner)->barrier();
  const auto start = Clock::now();
  for (size_t i = 0; i < iterations; ++i) {
    contender.runner->run(run.collective, run.workload, run.message);
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The workload of iteration `iteration`: with SizeRun::rotate_root a rooted
// collective's root moves one rank on per iteration, from the -r root.
Workload iteration_workload(const SizeRun& run, size_t iteration, int ranks) {
  Workload workload = run.workload;
  if (run.rotate_root && takes_root(run.collective) && ranks > 0) {
    workload.root = static_cast<int>((static_cast<size_t>(workload.root) + iteration) %
                                     static_cast<size_t>(ranks));
  }
  return workload;
}

// OSU's loop: only the collective is inside the timer; the barrier before it
// starts every rank together, and filling and checking the buffers stay
// outside. Returns the seconds spent in the collectives.
double run_iterations(Contender& contender, const SizeRun& run, size_t iterations) {
  if (!has_message(run.collective)) return run_barriers(contender, run, iterations);
  double seconds = 0;
  for (size_t i = 0; i < iterations; ++i) {
    const size_t iteration = contender.next_iteration++;
    const Workload workload = iteration_workload(run, iteration, contender.runner->size());
    const ValueCheck check = contender.check.with_root(workload.root);
    if (run.validate) {
      check.prepare(run.collective, run.message, iteration);
    }
    (run.sync ? run.sync : contender.runner)->barrier();
    const auto start = Clock::now();
    contender.runner->run(run.collective, workload, run.message);
    const auto stop = Clock::now();
    seconds += std::chrono::duration<double>(stop - start).count();
    if (run.validate && !check.verify(run.collective, run.message, iteration)) {
      contender.valid = false;
    }
  }
  return seconds;
}

// --- the synchronized start (measure.hpp) --------------------------------

double clock_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// steady_clock is CLOCK_MONOTONIC: one clock for every process of one
// kernel (network namespaces included), so ranks of one host agree on it
// exactly. The kernel's boot id names that clock; ranks on several hosts
// would need clock offsets estimated, and the figure is then not taken.
double clock_id() {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  const std::string id((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  return static_cast<double>(hash >> 12);  // 52 bits: exact in a double
}

bool shared_clock(Runner& reducer) {
  static const double mine = clock_id();
  double range[] = {mine, -mine};
  reducer.allreduce_doubles(range, 2, COLL_MAX);
  return range[0] == mine && -range[1] == mine;
}

// A finish time that marks an iteration some rank reached late.
constexpr double kLate = 1e30;

// One pass: iteration i starts at t0 + i window on every rank. finish[i]:
// this rank's finish - start, or kLate.
void run_windowed(Contender& contender, const SizeRun& run, Runner& agree, double window,
                  std::vector<double>& finish) {
  // The start is agreed with an allreduce; the lead leaves it time to
  // reach every rank before the first start.
  double t0 = clock_seconds() + 100e-6 + window;
  agree.allreduce_doubles(&t0, 1, COLL_MAX);
  // More ranks than CPUs (all ranks are on this host: shared_clock): a
  // rank spinning for its start would keep a queued one from reaching its
  // own, so it yields until the last 20 us.
  const bool share_cpus = contender.runner->size() > static_cast<int>(std::thread::hardware_concurrency());
  for (size_t i = 0; i < finish.size(); ++i) {
    const double start = t0 + static_cast<double>(i) * window;
    double now = clock_seconds();
    const bool late = now > start;
    while (now < start) {
      if (share_cpus && start - now > 20e-6) sched_yield();
      now = clock_seconds();
    }
    contender.runner->run(run.collective, iteration_workload(run, i, contender.runner->size()),
                          run.message);
    finish[i] = late ? kLate : clock_seconds() - start;
  }
}

// The figure for one library: W starts at four times its slowest rank's
// OSU average (plus 10 us) and doubles while more than a quarter of the
// iterations are late, at most three times. The median of the on-time
// iterations, not their mean: on a shared node one descheduled rank adds
// milliseconds to an iteration, and the mean would be that rare event's.
SyncStartStats sync_start_figure(Contender& contender, const SizeRun& run, Runner& reducer,
                                 size_t iterations) {
  Runner& agree = run.sync ? *run.sync : *contender.runner;
  double slowest = contender.timed ? contender.seconds / contender.timed : 0.0;
  reducer.allreduce_doubles(&slowest, 1, COLL_MAX);
  double window = 4 * slowest + 10e-6;
  std::vector<double> finish(std::max<size_t>(iterations, 1));
  for (int attempt = 0;; ++attempt, window *= 2) {
    run_windowed(contender, run, agree, window, finish);
    reducer.allreduce_doubles(finish.data(), finish.size(), COLL_MAX);
    std::vector<double> on_time;
    for (double f : finish) {
      if (f < kLate) on_time.push_back(f);
    }
    const double late =
        1.0 - static_cast<double>(on_time.size()) / static_cast<double>(finish.size());
    if (late <= 0.25 || attempt == 3) {
      double median = 0;
      if (!on_time.empty()) {
        const size_t mid = on_time.size() / 2;
        std::nth_element(on_time.begin(), on_time.begin() + mid, on_time.end());
        median = on_time[mid];
      }
      return {median * 1e6, late, window * 1e6};
    }
  }
}

bool validates(const SizeRun& run) { return run.validate && has_message(run.collective); }

// Iterations of round `round` when `total` are split over `rounds`.
size_t round_share(size_t total, size_t rounds, size_t round) {
  return total / rounds + (round < total % rounds ? 1 : 0);
}

LibraryResult summarize(const Contender& contender, Runner& reducer, const SizeRun& run,
                        size_t bytes) {
  const double mine_us = contender.timed ? contender.seconds / contender.timed * 1e6 : 0.0;
  double sum[] = {mine_us};
  double min[] = {mine_us, contender.valid ? 1.0 : 0.0};
  double max[] = {mine_us};
  reducer.allreduce_doubles(sum, 1, COLL_SUM);
  reducer.allreduce_doubles(min, 2, COLL_MIN);
  reducer.allreduce_doubles(max, 1, COLL_MAX);

  LibraryResult result;
  result.library = contender.runner->library();
  result.latency = {sum[0] / reducer.size(), min[0], max[0]};
  if (result.latency.avg_us > 0) {
    result.algbw_gbs = algorithm_bytes(run.collective, bytes, contender.runner->size()) /
                       result.latency.avg_us / 1e3;
  }
  result.busbw_gbs =
      result.algbw_gbs * bus_bandwidth_factor(run.collective, contender.runner->size());
  result.algorithm = contender.algorithm;
  result.sync_start = contender.sync_start;
  if (validates(run)) result.valid = min[1] == 1.0;
  return result;
}

}  // namespace

std::optional<double> busbw_per_memcpy(const SizeResult& result, size_t library) {
  if (!result.memcpy_gbs || *result.memcpy_gbs <= 0 || library >= result.libraries.size()) {
    return std::nullopt;
  }
  return result.libraries[library].busbw_gbs / *result.memcpy_gbs;
}

bool all_valid(const SizeResult& result) {
  return std::all_of(result.libraries.begin(), result.libraries.end(),
                     [](const LibraryResult& library) { return library.valid.value_or(true); });
}

SizeResult measure_size(const std::vector<Runner*>& runners, Runner& reducer, const SizeRun& run) {
  std::vector<Contender> contenders;
  for (Runner* runner : runners) {
    runner->prepare(run.collective, run.message);
    contenders.emplace_back(*runner, run.workload);
  }
  // Without validation the buffers are filled once, so that they hold
  // ordinary numbers (no NaN, no denormals) for every library.
  if (!run.validate && !contenders.empty()) {
    contenders.front().check.prepare(run.collective, run.message, 0);
  }

  for (Contender& contender : contenders) {
    run_iterations(contender, run, run.plan.warmup);
  }
  const size_t rounds = std::max<size_t>(1, std::min(run.rounds, run.plan.iterations));
  for (size_t round = 0; round < rounds; ++round) {
    const size_t iterations = round_share(run.plan.iterations, rounds, round);
    // Each round starts with the next library, so none is always first
    // after the other has warmed (or cooled) the caches.
    for (size_t turn = 0; turn < contenders.size(); ++turn) {
      Contender& contender = contenders[(round + turn) % contenders.size()];
      contender.seconds += run_iterations(contender, run, iterations);
      contender.timed += iterations;
    }
  }

  // Read before the timings are reduced: that reduction is itself an
  // allreduce.
  for (Contender& contender : contenders) {
    contender.algorithm = contender.runner->algorithm(run.collective);
  }
  // After the OSU rounds, whose averages size the window; the last library
  // of the last round goes first.
  if (run.sync_start && shared_clock(reducer)) {
    for (size_t turn = contenders.size(); turn-- > 0;) {
      Contender& contender = contenders[(rounds - 1 + turn) % contenders.size()];
      contender.sync_start = sync_start_figure(contender, run, reducer, run.plan.iterations);
    }
  }
  const size_t bytes = run.message.count * coll_datatype_size(run.workload.datatype);
  SizeResult result{bytes, run.message.count, run.plan.iterations, {}, std::nullopt};
  for (const Contender& contender : contenders) {
    result.libraries.push_back(summarize(contender, reducer, run, bytes));
  }
  return result;
}

}  // namespace bench
