#include "fault_injection.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "error.hpp"

namespace coll {
namespace fault_detail {

std::atomic<bool> g_armed{false};
std::atomic<bool> g_counting{false};

}  // namespace fault_detail

namespace {

FaultPlan g_plan;
std::atomic<uint64_t> g_sends_left{0};

[[noreturn]] void bad(const std::string& text, const char* why) {
  fail(COLL_ERR_INVALID_ARG,
       "COLL_FAULT_INJECT=%s: %s (expected rank=R,call=N[,comm=C][,after_sends=K]"
       "[,action=kill|stop|exit])",
       text.c_str(), why);
}

uint64_t number(const std::string& text, const std::string& value, uint64_t max) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
    bad(text, "a value is not a number");
  errno = 0;
  const unsigned long long n = std::strtoull(value.c_str(), nullptr, 10);
  if (errno || n > max) bad(text, "a number is out of range");
  return n;
}

void fire() {
  fault_detail::g_armed.store(false, std::memory_order_relaxed);
  fault_detail::g_counting.store(false, std::memory_order_relaxed);
  static const char* const kAction[] = {"killed (SIGKILL)", "stopped (SIGSTOP)", "_exit(3)"};
  std::fprintf(stderr,
               "libcoll: COLL_FAULT_INJECT: rank %d %s at call %llu of communicator %llu "
               "after %llu message(s)\n",
               g_plan.rank, kAction[int(g_plan.action)],
               static_cast<unsigned long long>(g_plan.call),
               static_cast<unsigned long long>(g_plan.comm),
               static_cast<unsigned long long>(g_plan.after_sends));
  std::fflush(stderr);
  switch (g_plan.action) {
    case FaultPlan::Action::kKill: ::raise(SIGKILL); break;
    case FaultPlan::Action::kStop: ::raise(SIGSTOP); break;
    case FaultPlan::Action::kExit: ::_exit(3);
  }
}

}  // namespace

FaultPlan parse_fault_plan(const std::string& text) {
  FaultPlan p;
  if (text.empty()) return p;
  bool have_rank = false, have_call = false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) bad(text, "an item is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "rank") {
      p.rank = int(number(text, value, (1u << 30)));
      have_rank = true;
    } else if (key == "call") {
      p.call = number(text, value, uint64_t(1) << 62);
      have_call = true;
    } else if (key == "comm") {
      p.comm = number(text, value, uint64_t(1) << 62);
    } else if (key == "after_sends") {
      p.after_sends = number(text, value, uint64_t(1) << 62);
    } else if (key == "action") {
      if (value == "kill") p.action = FaultPlan::Action::kKill;
      else if (value == "stop") p.action = FaultPlan::Action::kStop;
      else if (value == "exit") p.action = FaultPlan::Action::kExit;
      else bad(text, "action is kill, stop or exit");
    } else {
      bad(text, "unknown key");
    }
    start = comma + 1;
  }
  if (!have_rank || !have_call) bad(text, "rank and call are required");
  return p;
}

void arm_fault(const FaultPlan& plan, int world_rank) {
  disarm_fault();
  if (plan.rank < 0 || plan.rank != world_rank) return;
  g_plan = plan;
  fault_detail::g_armed.store(true, std::memory_order_relaxed);
}

void disarm_fault() {
  fault_detail::g_armed.store(false, std::memory_order_relaxed);
  fault_detail::g_counting.store(false, std::memory_order_relaxed);
}

namespace fault_detail {

void at_call(uint64_t comm, uint64_t seq) {
  if (comm != g_plan.comm || seq != g_plan.call) return;
  if (g_plan.after_sends == 0) fire();
  g_armed.store(false, std::memory_order_relaxed);
  g_sends_left.store(g_plan.after_sends, std::memory_order_relaxed);
  g_counting.store(true, std::memory_order_relaxed);
}

void at_send() {
  // Messages of any communicator count once the call has started: a
  // hierarchical algorithm sends on its per-host sub-communicators.
  if (g_sends_left.load(std::memory_order_relaxed) == 0) fire();
  g_sends_left.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace fault_detail
}  // namespace coll
