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

// One step's messages, as tree::allreduce_step lists them (the schedule
// stays pure: it only names the moves, in the order they must be made).
struct Move {
  enum Kind { kReduceFromChild, kBcastFromParent, kReduceToParent, kBcastToChild } kind;
  int peer;
  tree::Range range;
  bool flag;  // first (reduce_from_child) or leaf (reduce_to_parent)
};

struct StepMoves {
  // Per tree: receive from two children and a parent, send to a parent and
  // two children.
  Move move[12];
  int count = 0;
  void reduce_from_child(int, int child, tree::Range x, bool first) {
    move[count++] = {Move::kReduceFromChild, child, x, first};
  }
  void bcast_from_parent(int, int parent, tree::Range x) {
    move[count++] = {Move::kBcastFromParent, parent, x, false};
  }
  void reduce_to_parent(int, int parent, tree::Range x, bool leaf) {
    move[count++] = {Move::kReduceToParent, parent, x, leaf};
  }
  void bcast_to_child(int, int child, tree::Range x) {
    move[count++] = {Move::kBcastToChild, child, x, false};
  }
};

}  // namespace

Task tree_allreduce(Channel& ch, const Args& a) {
  const int n = ch.size();
  const size_t es = a.elem_size;
  const auto* in_base = static_cast<const char*>(a.sendbuf);
  auto* out_base = static_cast<char*>(a.recvbuf);
  auto in = [&](tree::Range x) { return in_base + x.offset * es; };
  auto out = [&](tree::Range x) { return out_base + x.offset * es; };
  const size_t chunk_elems = tree::pipeline_chunk_elems(a.count, a.elem_size, ch.slot_bytes());
  const tree::AllreducePlan plan =
      tree::allreduce_plan(n, ch.rank(), a.count, tree::num_chunks(a.count, chunk_elems));
  bool unflushed_send_from_out = false;
  for (long s = 0; s < plan.steps; ++s) {
    StepMoves moves;
    tree::allreduce_step(plan, s, moves);
    for (int i = 0; i < moves.count; ++i) {
      const Move& m = moves.move[i];
      const tree::Range x = m.range;
      switch (m.kind) {
        case Move::kReduceFromChild: {
          // Partial sums of the subtrees are reduced with the own input
          // into recvbuf.
          const void* data = co_await ch.recv(m.peer, x.count * es);
          a.reduce(out(x), m.flag ? in(x) : out(x), data, x.count);
          co_await ch.release(m.peer);
          break;
        }
        case Move::kBcastFromParent: {
          // A send's source must not change until a flush on transports
          // that register it (Channel::send): the partial sum sent from
          // recvbuf is overwritten here by the result.
          if (unflushed_send_from_out) {
            co_await ch.flush();
            unflushed_send_from_out = false;
          }
          const void* data = co_await ch.recv(m.peer, x.count * es);
          std::memcpy(out(x), data, x.count * es);
          co_await ch.release(m.peer);
          break;
        }
        case Move::kReduceToParent:
          co_await ch.send(m.peer, m.flag ? in(x) : out(x), x.count * es);
          unflushed_send_from_out |= !m.flag || in_base == out_base;
          break;
        case Move::kBcastToChild:
          co_await ch.send(m.peer, out(x), x.count * es);
          break;
      }
    }
  }
}

}  // namespace coll
