// Barriers. Messages are empty: a flag write each.
//
// tree (the default): a gather-release over a k-ary tree rooted at rank 0
// (radix kBarrierRadix, so flat up to 9 ranks). Every rank waits for its
// children, tells its parent, waits for the release and releases its
// children. Rank 0 leaves first and the others only after it has run: a
// collective that follows finds rank 0 (the usual root) ahead rather than
// behind. With more ranks than cores each wait may cost a context switch;
// the flat tree needs two waves whatever n, where dissemination needs
// log2(n) rounds in which every rank must have run.
//
// dissemination: in round k every rank signals rank + 2^k and waits for
// rank - 2^k; after ceil(log2 n) rounds every rank has heard, directly or
// not, from every other. One message latency per round and all ranks
// leave together: the lowest latency when every rank has its own core.
//
// Both have a synchronous form (NowFn) for blocking barriers.
//
// Deadlock freedom: each pair exchanges at most one message per direction
// per barrier, and a channel has at least three slots per pair.
#include <algorithm>

#include "algorithms.hpp"
#include "channel.hpp"
#include "ring_schedule.hpp"

namespace coll {
namespace {

constexpr int kBarrierRadix = 8;

}  // namespace

namespace {

// The rounds from distance `from` on; `sent`: that round's message is
// already sent (the synchronous form hands the call over there).
Task dissemination_from(Channel& ch, int from, bool sent) {
  const int n = ch.size(), r = ch.rank();
  for (int k = from; k < n; k <<= 1, sent = false) {
    if (!sent) co_await ch.send(ring::mod(r + k, n), nullptr, 0);
    co_await ch.recv(ring::mod(r - k, n), 0);
    co_await ch.release(ring::mod(r - k, n));
  }
}

}  // namespace

Task dissemination_barrier(Channel& ch, const Args&) { return dissemination_from(ch, 1, false); }

// The rounds of dissemination_from, each once its wait is satisfied within
// the polls (an exchange's form: it sends before it waits); where a wait
// is not, the coroutine continues from that point.
bool dissemination_barrier_now(Channel& ch, const Args&, Polls& polls, Task& rest) {
  const int n = ch.size(), r = ch.rank();
  for (int k = 1; k < n; k <<= 1) {
    const int to = ring::mod(r + k, n), from = ring::mod(r - k, n);
    while (!ch.can_send(to)) {
      if (!polls.next()) {
        if (k > 1) rest = dissemination_from(ch, k, false);
        return false;
      }
    }
    ch.send_now(to, nullptr, 0);
    while (!ch.message(from, 0)) {
      if (!polls.next()) {
        rest = dissemination_from(ch, k, true);
        return false;
      }
    }
    ch.release_now(from);
  }
  return true;
}

namespace {

// Where the tree barrier stands; the synchronous form hands the call over
// at one of these.
enum class TreePoint {
  kStart,
  kChildrenHeard,  // every child's message taken (released)
  kParentTold,     // and ours sent to the parent
  kReleasing,      // the parent's release taken: sending ours, from a child on
};

int tree_parent(int r) { return (r - 1) / kBarrierRadix; }
int tree_first_child(int r) { return r * kBarrierRadix + 1; }
int tree_last_child(int r, int n) { return std::min(n - 1, r * kBarrierRadix + kBarrierRadix); }

Task tree_from(Channel& ch, TreePoint from, int next_child) {
  const int n = ch.size(), r = ch.rank();
  const int first_child = tree_first_child(r), last_child = tree_last_child(r, n);
  if (from == TreePoint::kStart) {
    for (int c = first_child; c <= last_child; ++c) {
      co_await ch.recv(c, 0);
      co_await ch.release(c);
    }
  }
  if (r > 0 && from != TreePoint::kReleasing) {
    const int parent = tree_parent(r);
    if (from != TreePoint::kParentTold) co_await ch.send(parent, nullptr, 0);
    co_await ch.recv(parent, 0);
    co_await ch.release(parent);
  }
  for (int c = from == TreePoint::kReleasing ? next_child : first_child; c <= last_child; ++c)
    co_await ch.send(c, nullptr, 0);
}

}  // namespace

Task tree_barrier(Channel& ch, const Args&) { return tree_from(ch, TreePoint::kStart, 0); }

// The steps of tree_from, each once its wait is satisfied within the polls.
// Every child's message is there before any is taken, so that a barrier
// given up while children are missing has done nothing; past that, the
// coroutine continues from the point reached. A blocking barrier's
// completion is on the path of the collective after it (its first rank
// waits for the last to leave the barrier).
bool tree_barrier_now(Channel& ch, const Args&, Polls& polls, Task& rest) {
  const int n = ch.size(), r = ch.rank();
  const int first_child = tree_first_child(r), last_child = tree_last_child(r, n);
  for (int c = first_child; c <= last_child; ++c)
    while (!ch.message(c, 0))
      if (!polls.next()) return false;
  for (int c = first_child; c <= last_child; ++c) ch.release_now(c);
  if (r > 0) {
    const int parent = tree_parent(r);
    while (!ch.can_send(parent)) {
      if (!polls.next()) {
        rest = tree_from(ch, TreePoint::kChildrenHeard, 0);
        return false;
      }
    }
    ch.send_now(parent, nullptr, 0);
    while (!ch.message(parent, 0)) {
      if (!polls.next()) {
        rest = tree_from(ch, TreePoint::kParentTold, 0);
        return false;
      }
    }
    ch.release_now(parent);
  }
  for (int c = first_child; c <= last_child; ++c) {
    while (!ch.can_send(c)) {
      if (!polls.next()) {
        rest = tree_from(ch, TreePoint::kReleasing, c);
        return false;
      }
    }
    ch.send_now(c, nullptr, 0);
  }
  return true;
}

}  // namespace coll
