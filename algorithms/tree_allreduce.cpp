// Double binary tree allreduce (NCCL's trees, tree_schedule.hpp): half t of
// the data is reduced up tree t to its root and broadcast back down the
// same tree, in chunks that stream through the slots, both halves and both
// directions at once.
//
// Each element is reduced at exactly one place (its tree's root, from the
// partial sums of the subtrees) and then copied everywhere, so the result
// is bitwise identical on every rank.
//
// The ranks run a systolic schedule (tree_schedule.hpp): at step s a rank
// first receives every message its tree neighbours sent at step s - 1
// (partial sums from its children, broadcast chunks from its parents),
// consuming and releasing each at once, and only then sends its own
// messages of step s. A chunk thus moves one tree level per step, up and
// down, and the reduction of later chunks overlaps the broadcast of earlier
// ones; no rank ever waits for anything but its tree neighbours.
//
// Deadlock freedom with bounded slots. Order the work of all ranks by the
// key (step, phase), the receive phase of a step before its send phase.
// Every wait is for work with a smaller key:
//  - a receive of step s waits for a send of step s - 1;
//  - a send of step s waits for a credit: the receiver must have released
//    the message num_slots earlier on the same pair. Between two ranks at
//    most two messages go one way per step (one per tree: in a tree, a
//    neighbour is either the parent or a child), so with num_slots >= 2 that
//    message was sent at step s - 1 or before and released in the receive
//    phase of step s or before.
// The program order of each rank follows the key as well, so by induction
// on the key every wait ends. (Messages of one pair are matched in FIFO
// order: both sides handle tree 0 before tree 1 within a step.)
// tests/unit/tree_schedule_test.cpp runs the schedule of 1..16 ranks on
// simulated FIFO pairs of two slots, and shows one slot would deadlock.
#include <cstring>

#include "algorithms.hpp"
#include "channel.hpp"
#include "tree_schedule.hpp"

namespace coll {
namespace {

// The data movement of the messages tree::allreduce_step hands out.
class TreeAllreduceMoves {
 public:
  TreeAllreduceMoves(Channel& ch, const AllreduceArgs& a)
      : ch_(ch),
        a_(a),
        es_(a.elem_size),
        in_(static_cast<const char*>(a.sendbuf)),
        out_(static_cast<char*>(a.recvbuf)) {}

  // Partial sums of the subtrees are reduced with the own input into
  // recvbuf.
  void reduce_from_child(int, int child, tree::Range x, bool first) {
    const void* data = ch_.recv(child, x.count * es_);
    a_.reduce(out(x), first ? in(x) : out(x), data, x.count);
    ch_.release(child);
  }
  void bcast_from_parent(int, int parent, tree::Range x) {
    // A send's source must not change until flush() on transports that
    // register it (Channel::send): the partial sum sent from recvbuf is
    // overwritten here by the result.
    if (unflushed_send_from_out_) {
      ch_.flush();
      unflushed_send_from_out_ = false;
    }
    const void* data = ch_.recv(parent, x.count * es_);
    std::memcpy(out(x), data, x.count * es_);
    ch_.release(parent);
  }
  void reduce_to_parent(int, int parent, tree::Range x, bool leaf) {
    ch_.send(parent, leaf ? in(x) : out(x), x.count * es_);
    unflushed_send_from_out_ |= !leaf || in_ == out_;
  }
  void bcast_to_child(int, int child, tree::Range x) { ch_.send(child, out(x), x.count * es_); }

 private:
  const char* in(tree::Range x) const { return in_ + x.offset * es_; }
  char* out(tree::Range x) const { return out_ + x.offset * es_; }

  Channel& ch_;
  const AllreduceArgs& a_;
  const size_t es_;
  const char* in_;
  char* out_;
  bool unflushed_send_from_out_ = false;
};

}  // namespace

void tree_allreduce(Channel& ch, const AllreduceArgs& a) {
  const int n = ch.size();
  const size_t chunk_elems = tree::pipeline_chunk_elems(a.count, a.elem_size, ch.slot_bytes());
  const tree::AllreducePlan plan =
      tree::allreduce_plan(n, ch.rank(), a.count, tree::num_chunks(a.count, chunk_elems));
  TreeAllreduceMoves moves(ch, a);
  for (long s = 0; s < plan.steps; ++s) tree::allreduce_step(plan, s, moves);
}

}  // namespace coll
