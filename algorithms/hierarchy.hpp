// What the hierarchical algorithms share (hierarchical_*.cpp): collectives
// run on the communicator's sub-channels (Hierarchy, channel.hpp: this
// host's ranks; the hosts' leaders) inside one operation of the parent.
//
// The parent's operation has its sub-channels to itself, as it has its own
// channel: nothing else ever runs on them (no operation is queued on the
// sub-communicators), and a communicator runs its operations one at a time.
// So a hierarchical algorithm is a sequence of ordinary collectives, each
// on the ranks of one sub-channel, and its deadlock argument is that every
// rank takes its parts in the same order and every part is a collective
// whose own algorithm is deadlock-free among the ranks that take part.
#pragma once

#include <cstddef>

#include "algorithms.hpp"
#include "channel.hpp"

namespace coll {

// Lends a sub-channel the parent operation's pins for as long as it lives
// (zero-copy exposures and, on RDMA, registered sources go there), and
// flushes nothing: run_on does.
class LentPins {
 public:
  LentPins(Channel& parent, Channel& sub) : sub_(sub) { sub_.use_pins(parent.pins_in_use()); }
  ~LentPins() { sub_.use_pins(nullptr); }
  LentPins(const LentPins&) = delete;
  LentPins& operator=(const LentPins&) = delete;

 private:
  Channel& sub_;
};

// Collective c on sub (a sub-channel of parent) with args' raw fields (the
// API's meaning, in sub's ranks): checked for sub's size and rank, which
// fills the derived fields; run by the algorithm the selection table gives
// sub's size (never a forced one: the knob forced "hierarchical"), or by
// the descriptor's one-rank case; then sub's writes are flushed (the
// parent's final flush covers only its own channel).
Task run_on(Channel& parent, Channel& sub, Coll c, Args args);

// On a communicator without a hierarchy (one host, or COLL_HIERARCHY=0) a
// forced "hierarchical" runs the flat algorithm the table gives.
Task run_flat(Channel& ch, Coll c, const Args& args);

// The raw arguments of a vector collective (allreduce, reduce, bcast):
// what the API would pass.
inline Args vector_args(const void* sendbuf, void* recvbuf, const Args& like, int root) {
  Args a;
  a.sendbuf = sendbuf;
  a.recvbuf = recvbuf;
  a.count = like.count;
  a.datatype = like.datatype;
  a.op = like.op;
  a.root = root;
  return a;
}

}  // namespace coll
