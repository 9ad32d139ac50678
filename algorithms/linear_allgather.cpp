// Linear allgather, for small blocks on few ranks: every rank writes its
// own block to every other rank at once, then takes every other rank's
// block, one slot-sized chunk of every block per round (a block of k
// chunks takes part in the first k rounds). A round is one step: no rank
// waits for a block that a third rank forwards, where Bruck's log2(n) steps
// each wait for the step before on another rank. With more ranks than
// cores that is what a small allgather costs: each dependent step is a
// rank that must be scheduled before the next can go on. n - 1 messages a
// rank and n - 1 slots of each window a round, so it suits few ranks.
// Serves allgather (blocks of count) and allgatherv (recvcounts and displs,
// which every rank knows; an empty block is neither sent nor expected).
//
// Every send reads this rank's own block where it is (sendbuf, or in
// place its block of recvbuf, which no receive writes), so nothing is
// flushed before the receives.
//
// Deadlock freedom: order the work by (round, send before receive). A
// receive of round c waits for the peer's send of round c; a send waits
// for the release of an earlier chunk on the same pair, made in the
// receive phase of an earlier round (or of an earlier call). Both have
// smaller keys, and every rank's program follows that order.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {
namespace {

// first_sent: this rank's sends of the first round, and the copy of its own
// block, are done (the synchronous form hands the call over here when a
// peer's block is not there yet).
Task linear(Channel& ch, const Args& a, Blocks blocks, bool first_sent) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, chunk = ch.slot_bytes();
  auto* out = static_cast<char*>(a.recvbuf);
  const auto* mine = static_cast<const char*>(a.sendbuf);
  const size_t own = blocks.count(r) * es;
  if (!first_sent && !a.in_place && own > 0) std::memcpy(out + blocks.displ(r) * es, mine, own);
  size_t rounds = 0;
  for (int i = 0; i < n; ++i) rounds = std::max(rounds, chunks_of(blocks.count(i) * es, chunk));
  for (size_t c = 0; c < rounds; ++c) {
    const size_t off = c * chunk;
    if (off < own && !(first_sent && c == 0))
      for (int k = 1; k < n; ++k)
        co_await ch.send((r + k) % n, mine + off, std::min(chunk, own - off));
    for (int k = 1; k < n; ++k) {
      const int p = (r + n - k) % n;
      const size_t len = blocks.count(p) * es;
      if (off >= len) continue;
      const size_t piece = std::min(chunk, len - off);
      std::memcpy(out + blocks.displ(p) * es + off, co_await ch.recv(p, piece), piece);
      co_await ch.release(p);
    }
  }
}

// The synchronous form (NowFn) where every block fits a slot: waits for a
// credit on every pair (each waits for a release of an earlier call's
// message, nothing of this call), sends its block to every peer, then
// waits until every peer's block is there and takes them in the
// coroutine's order. When a credit does not come within the polls nothing
// is done; when a block does not, nothing is taken yet and the coroutine
// goes on from the receives.
bool linear_now(Channel& ch, const Args& a, Polls& polls, Task& rest, Blocks blocks) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, slot = ch.slot_bytes();
  if (blocks.counts) {
    for (int i = 0; i < n; ++i)
      if (blocks.count(i) * es > slot) return false;
  } else if (blocks.uniform * es > slot) {
    return false;
  }
  const size_t own = blocks.count(r) * es;
  if (own > 0)
    for (int k = 1; k < n; ++k)
      while (!ch.can_send((r + k) % n))
        if (!polls.next()) return false;
  auto* out = static_cast<char*>(a.recvbuf);
  if (own > 0) {
    for (int k = 1; k < n; ++k) ch.send_now((r + k) % n, a.sendbuf, own);
    if (!a.in_place) std::memcpy(out + blocks.displ(r) * es, a.sendbuf, own);
  }
  if (!blocks_there_now(ch, blocks, es, polls)) {
    rest = linear(ch, a, blocks, true);
    return false;
  }
  take_blocks_now(ch, blocks, es, out);
  return true;
}

}  // namespace

Task linear_allgather(Channel& ch, const Args& a) {
  return linear(ch, a, Blocks::same(a.count), false);
}

Task linear_allgatherv(Channel& ch, const Args& a) {
  return linear(ch, a, Blocks::given(a.recvcounts, a.rdispls), false);
}

bool linear_allgather_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return linear_now(ch, a, polls, rest, Blocks::same(a.count));
}

bool linear_allgatherv_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return linear_now(ch, a, polls, rest, Blocks::given(a.recvcounts, a.rdispls));
}

}  // namespace coll
