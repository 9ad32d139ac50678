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

Task dissemination_barrier(Channel& ch, const Args&) {
  const int n = ch.size(), r = ch.rank();
  for (int k = 1; k < n; k <<= 1) {
    co_await ch.send(ring::mod(r + k, n), nullptr, 0);
    co_await ch.recv(ring::mod(r - k, n), 0);
    co_await ch.release(ring::mod(r - k, n));
  }
}

Task tree_barrier(Channel& ch, const Args&) {
  const int n = ch.size(), r = ch.rank();
  const int first_child = r * kBarrierRadix + 1;
  const int last_child = std::min(n - 1, r * kBarrierRadix + kBarrierRadix);
  for (int c = first_child; c <= last_child; ++c) {
    co_await ch.recv(c, 0);
    co_await ch.release(c);
  }
  if (r > 0) {
    const int parent = (r - 1) / kBarrierRadix;
    co_await ch.send(parent, nullptr, 0);
    co_await ch.recv(parent, 0);
    co_await ch.release(parent);
  }
  for (int c = first_child; c <= last_child; ++c) co_await ch.send(c, nullptr, 0);
}

}  // namespace coll
