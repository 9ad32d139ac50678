// What a waiting rank does between two failed polls: spin, yield the CPU,
// or nap; and the timing state of the wait that decides it. Every wait of
// the progress engine (Context::drive) owns one WaitPolicy and calls it
// once per failed pass; the engine keeps its own timeout and peer checks.
//
// Why it spins and yields so rarely (measured on the 2-core development VM,
// Linux 6.18 with EEVDF and HZ=250, issue 17): beside one busy process an
// np 2 job has three runnable tasks on two CPUs. sched_yield() then hands
// the CPU to the busy process until the next tick: of 1821 yields in an
// np 2 bcast of 64 KiB, 371 lasted 1-8 ms (strace -f -T), and the bcast
// averaged 733 us against Open MPI's 62 (both under strace). The old loop
// yielded after 64 polls, so a receiver waiting for a 64 KiB copy yielded
// on most calls. Open MPI's vader BTL does not yield when the
// ranks fit the cores (mpi_yield_when_idle is off; 8 sched_yield calls in
// a whole run, against 192349 at np 4 on 2 cores where it is on) and keeps
// its quiet latency. Giving up the CPU helps only when a rank of ours is
// queued on that same CPU: then it must run for the wait to end. So past
// its first spin_polls polls a wait yields only
//   - when the ranks of this host outnumber its CPUs (some rank of ours is
//     then always queued, and where it last ran, which is all a placement
//     knows, is not where it waits: with the placement alone a rank that
//     looked alone on its CPU spun out its hold, ~3 ms a call at np 4 on
//     2 CPUs);
//   - when another rank of this host last ran on our CPU (RankPlacement:
//     it is not running, since we are, so it is queued behind us);
//   - or once the wait has lasted `hold` (100 ms): a peer that late is
//     computing (load imbalance), and a yield is cheap beside such a wait.
//     It was 1 ms, which small calls never reach; but a large one does
//     (a 4 MiB bcast takes ~0.2 ms quiet, longer while the busy process has
//     a core), and each yield then handed the CPU to the busy process for
//     the rest of its slice: np 2 beside one busy loop, OSU-style averages
//     of two runs, libcoll / Open MPI tuned in us, bcast 4 MiB 5882 / 268
//     and 14222 / 245, allreduce 4 MiB 5543 / 1599 and 17734 / 1687 with
//     a 1 ms hold; 211 / 244, 194 / 282 and 427 / 1164, 1367 / 783
//     without the hold (`COLL_EXP_HOLD_US`, a one-off knob). A yield
//     helps only a task queued on our CPU, which for a rank of ours the
//     two rules above catch: a foreign busy process is the kernel's to
//     share out, as Open MPI leaves it (it never yields when the ranks fit
//     the cores);
// and after `nap_after` (0.5 s) it naps between polls (50 us; timer slack
// adds about 50 us more, nothing beside a wait that long).
//
// Without the placement, in the unbound collrun np 2 beside a busy
// process, the two ranks can share a CPU with the busy process on the
// other: a wait that spins its 1 ms then makes each message cost it (one
// run of six: allreduce 1 KiB 1711 us, 1 MiB 13596 us; with the placement
// 0.4-5 us and 60-273 us in all ten runs).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace coll {

class Transport;

// Where the ranks of this host run, as far as they tell each other.
class RankPlacement {
 public:
  virtual ~RankPlacement() = default;
  // This rank runs on cpu now.
  virtual void publish(int cpu) = 0;
  // Whether another rank of this host said last that it runs on cpu.
  virtual bool other_rank_on(int cpu) const = 0;
};

// RankPlacement through the transport's hooks (Transport::publish_cpu,
// Transport::other_rank_on_cpu); only for a transport that
// shares_cpu_placement(). transport must outlive it.
// It remembers what it published last, so that a wait writes the shared
// word only when this rank moved to another CPU: each wait has a policy of
// its own (the progress engine makes one per wait), and a write every wait
// would pull that line away from the peers that read it.
class TransportPlacement final : public RankPlacement {
 public:
  explicit TransportPlacement(Transport& transport) : transport_(transport) {}
  void publish(int cpu) override;
  bool other_rank_on(int cpu) const override;

 private:
  Transport& transport_;
  std::atomic<int> published_{-2};  // -2: never
};

struct WaitPolicyParams {
  using Duration = std::chrono::nanoseconds;
  uint64_t spin_polls = 64;     // polls that only spin, before anything else
  bool oversubscribed = false;  // this host's ranks outnumber its CPUs
  Duration hold = std::chrono::milliseconds(100);
  Duration nap_after = std::chrono::milliseconds(500);
  Duration nap = std::chrono::microseconds(50);
  // The CPU this thread runs on; null: sched_getcpu(). For tests.
  int (*current_cpu)() = nullptr;
};

enum class WaitStep { kSpin, kYield, kNap };

class WaitPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  // placement may be null (nothing known); it must outlive the policy.
  WaitPolicy(const WaitPolicyParams& params, RankPlacement* placement);

  // Every wait, before its first poll: tells the other ranks on which CPU
  // this one runs (cheap: a read, and a write only when it changed).
  void enter();
  // The first poll failed at now: a wait starts.
  void begin(Clock::time_point now);
  // The same without reading the clock (the progress engine reads it every
  // 16th pass only): the wait's time starts at the first observe().
  void begin();
  // The wait loop read the clock (every few polls): the elapsed time and
  // where the ranks run are looked at again.
  void observe(Clock::time_point now);
  // What to do after a failed poll; counts the poll.
  WaitStep next();
  // Does step: a pause instruction, sched_yield() or a nap.
  void perform(WaitStep step) const;
  // next(), then perform it: what the wait loop calls per failed poll.
  void idle() { perform(next()); }

 private:
  int cpu() const;
  void publish(int cpu);

  WaitPolicyParams params_;
  RankPlacement* placement_;
  Clock::time_point start_{};
  bool started_ = false;  // start_ is set
  Clock::duration elapsed_{};
  uint64_t polls_ = 0;      // failed polls of this wait
  int published_cpu_ = -2;  // -2: never
  bool yield_ = false;      // as last observed
};

}  // namespace coll
