#include "wait_policy.hpp"

#include <sched.h>
#include <time.h>

#include "transport/transport.hpp"

namespace coll {

void TransportPlacement::publish(int cpu) {
  // A load and a store, not an exchange (a locked instruction costs about
  // 25 ns here): two threads racing at worst publish twice.
  if (published_.load(std::memory_order_relaxed) == cpu) return;
  published_.store(cpu, std::memory_order_relaxed);
  transport_.publish_cpu(cpu);
}

bool TransportPlacement::other_rank_on(int cpu) const {
  return transport_.other_rank_on_cpu(cpu);
}

WaitPolicy::WaitPolicy(const WaitPolicyParams& params, RankPlacement* placement)
    : params_(params), placement_(placement) {}

int WaitPolicy::cpu() const {
  // glibc (2.35 and later) answers sched_getcpu() from the rseq area: a
  // memory read, no system call.
  return params_.current_cpu ? params_.current_cpu() : sched_getcpu();
}

void WaitPolicy::publish(int cpu) {
  if (cpu == published_cpu_) return;
  published_cpu_ = cpu;
  placement_->publish(cpu);
}

void WaitPolicy::enter() {
  if (placement_) publish(cpu());
}

void WaitPolicy::begin(Clock::time_point now) {
  start_ = now;
  started_ = true;
  polls_ = 0;
  observe(now);
}

void WaitPolicy::begin() {
  started_ = false;
  polls_ = 0;
  elapsed_ = {};
  yield_ = params_.oversubscribed;
  if (placement_ && !yield_) {
    const int here = cpu();
    yield_ = here >= 0 && placement_->other_rank_on(here);
  }
}

void WaitPolicy::observe(Clock::time_point now) {
  if (!started_) {
    start_ = now;
    started_ = true;
  }
  elapsed_ = now - start_;
  // A rank of ours may need this CPU: always when the ranks outnumber the
  // CPUs (a queued rank's published CPU is where it last ran, not where it
  // waits to run, so the placement cannot tell), else when the placement
  // says one last ran here.
  bool needed = params_.oversubscribed;
  if (placement_) {
    const int here = cpu();
    publish(here);
    needed = needed || (here >= 0 && placement_->other_rank_on(here));
  }
  yield_ = needed || elapsed_ >= params_.hold;
}

WaitStep WaitPolicy::next() {
  if (polls_ < params_.spin_polls) {
    ++polls_;
    return WaitStep::kSpin;
  }
  ++polls_;
  if (elapsed_ >= params_.nap_after) return WaitStep::kNap;
  return yield_ ? WaitStep::kYield : WaitStep::kSpin;
}

void WaitPolicy::perform(WaitStep step) const {
  switch (step) {
    case WaitStep::kSpin:
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
      break;
    case WaitStep::kYield:
      sched_yield();
      break;
    case WaitStep::kNap: {
      const auto ns = params_.nap.count();
      struct timespec nap = {time_t(ns / 1000000000), long(ns % 1000000000)};
      nanosleep(&nap, nullptr);
      break;
    }
  }
}

}  // namespace coll
