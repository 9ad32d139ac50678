// Operation: one collective call (or one activation of a persistent one) as
// the progress engine sees it: its arguments, its algorithm, the task that
// runs it (task.hpp), its registrations and, once it ends, its status.
//
// A communicator runs its operations one after the other, in the order they
// were started (every rank starts them in the same order, as MPI requires),
// so an operation has the communicator's channel to itself while it runs;
// operations of different communicators advance independently.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "algorithms.hpp"
#include "task.hpp"
#include "transport/transport.hpp"

namespace coll {

class Channel;
class Communicator;

struct Operation {
  Communicator* comm = nullptr;
  const char* collective = "";  // for messages
  const CollectiveInfo* info = nullptr;  // nullptr for an internal operation
  // What one activation runs: the algorithm on args, or (algorithm null)
  // an internal body such as a communicator constructor's exchange.
  const Algorithm* algorithm = nullptr;
  std::function<Task(Channel&)> body;
  Args args;

  bool persistent = false;
  // False from start() until the activation has ended (true before the
  // first start, and between activations). Written under the
  // communicator's progress lock by whichever thread advanced the
  // operation; read without it by the waiting thread (its first check,
  // coll_test, request bookkeeping). Atomic, so that the read is not a data
  // race and the release store at the end publishes status and message to
  // the thread that sees it. (Plain release/relaxed stores: a sequentially
  // consistent one is an xchg, ~20 cycles, and a small collective made five.)
  std::atomic<bool> complete{true};
  int status = 0;         // of the last activation
  std::string message;

  // The registrations of this operation's user buffers. A persistent
  // operation takes them once, at init, and keeps them until it is freed.
  std::vector<const MemoryRegion*> pins;
  size_t held_pins = 0;  // pins[0, held_pins) belong to the persistent init

  // The activation's number among the operations started on its
  // communicator (every rank starts them in the same order):
  // COLL_CHECK_ARGS compares it.
  uint64_t seq = 0;
  // Run by some ranks of the communicator only (coll_comm_create_group's
  // exchange): not numbered, so that every rank's later calls keep the
  // same numbers.
  bool members_only = false;
  // COLL_CHECK_ARGS: this rank refused the call on its own arguments with
  // this status (nonzero) and message; the operation only tells the
  // others, in the agreement exchange (Communicator::refuse).
  int refused = 0;
  std::string refusal;
  // Every rank runs this refusal's exchange whatever its own arguments (a
  // persistent init's, or COLL_CHECK_ARGS's): a peer's data message is a
  // later call's, not a sign that the peer accepted this one.
  bool refused_in_agreement = false;
  Task task;                 // the running activation
  Operation* next = nullptr;  // the communicator's queue
};

}  // namespace coll
