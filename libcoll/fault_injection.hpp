// Deterministic faults for tests of what the other ranks do when one dies
// (COLL_FAULT_INJECT; issue 33). A recovery test must kill a rank at a
// chosen point of a chosen call - before a collective, or inside it after
// the victim has sent part of its data - and a kill from outside (a timer,
// a second process) lands wherever the victim happens to be: the tests
// would pass or fail by timing luck. Here the victim kills itself at that
// point, every run alike.
//
//   COLL_FAULT_INJECT="rank=R,call=N[,comm=C][,after_sends=K][,action=A]"
//
// rank: the world rank that fails. call: the call's number on its
// communicator, as error and timeout messages number them (from 0, every
// rank numbering alike). comm: the communicator's id (1: the world, the
// default; later ones as COLL_DEBUG_DUMP's lines show them). after_sends:
// 0 (the default) fails at the call's start, before it sends anything; K
// after the call's K-th message, before its next (Channel::do_send), so the
// peers have part of it (a call that sends no more: at the next message of
// a later call). action: kill (SIGKILL, the default), stop (SIGSTOP: a silent
// peer, until SIGCONT) or exit (_exit(3), no finalize). A malformed value
// fails coll_init naming the knob.
//
// Cost when unset: one relaxed load of a flag per call and per message.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace coll {

struct FaultPlan {
  enum class Action { kKill, kStop, kExit };
  int rank = -1;  // -1: no fault
  uint64_t comm = 1;
  uint64_t call = 0;
  uint64_t after_sends = 0;
  Action action = Action::kKill;
};

// "" -> no fault. Throws coll::Error(COLL_ERR_INVALID_ARG) naming
// COLL_FAULT_INJECT, the value and what was expected.
FaultPlan parse_fault_plan(const std::string& text);

// Arms plan in this process when its world rank is plan.rank (the context's
// constructor, before any call); disarm at finalize.
void arm_fault(const FaultPlan& plan, int world_rank);
void disarm_fault();

namespace fault_detail {
extern std::atomic<bool> g_armed;     // a plan for this rank, its call not reached
extern std::atomic<bool> g_counting;  // inside the call: counting its messages
void at_call(uint64_t comm, uint64_t seq);
void at_send();
}  // namespace fault_detail

// A call numbered seq starts on communicator comm (Communicator::start and
// the synchronous fast path).
inline void fault_at_call(uint64_t comm, uint64_t seq) {
  if (fault_detail::g_armed.load(std::memory_order_relaxed)) [[unlikely]]
    fault_detail::at_call(comm, seq);
}

// A message is about to be sent (Channel::do_send).
inline void fault_at_send() {
  if (fault_detail::g_counting.load(std::memory_order_relaxed)) [[unlikely]]
    fault_detail::at_send();
}

}  // namespace coll
