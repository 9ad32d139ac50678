// Linear alltoall, for small blocks on few ranks: every rank sends to all
// others at once and then receives from all, one slot-sized chunk of every
// block per round (a block of k chunks takes part in the first k rounds).
// The n - 1 messages of a round are all in flight together, so a round
// costs one message latency rather than the n - 1 of the pairwise steps;
// with more ranks than cores no rank waits for a third to be scheduled.
// Serves alltoall and alltoallv (an empty block is neither sent nor
// expected).
//
// In place, each block's chunk c is sent from where the chunk from that
// peer goes: the round's receives come after a flush.
//
// Large blocks of the regular form (not in place) go zero-copy
// (direct_blocks.hpp): every rank exposes each peer's block of its recvbuf
// to that peer, writes its own blocks straight into the peers' recvbufs,
// then waits for the n - 1 that come in: one copy of every byte instead of
// two. Its deadlock argument is direct_blocks.hpp's: the exposures come
// first, and every pair carries one message each way.
//
// Deadlock freedom: order the work by (round, send before receive). A
// receive of round c waits for the peer's send of round c; a send waits
// for the release of an earlier chunk on the same pair, made in the
// receive phase of an earlier round. Both have smaller keys, and every
// rank's program follows that order.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "direct_blocks.hpp"

namespace coll {
namespace {

Task direct(Channel& ch, const Args& a, size_t block) {
  const int n = ch.size(), r = ch.rank();
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    ch.expose(p, out + size_t(p) * block, block);
  }
  std::memcpy(out + size_t(r) * block, in + size_t(r) * block, block);
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    co_await send_block_direct(ch, p, in + size_t(p) * block, block);
  }
  for (int k = 1; k < n; ++k) co_await ch.recv_direct((r + n - k) % n, block);
}

// first_sent: the first round's sends and the copy of this rank's own
// block are done (the synchronous form hands the call over here when a
// peer's block is not there yet).
Task linear(Channel& ch, const Args& a, Blocks tx, Blocks rx, bool first_sent) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, chunk = ch.slot_bytes();
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  if (!first_sent && !a.in_place && rx.count(r) > 0)
    std::memcpy(out + rx.displ(r) * es, in + tx.displ(r) * es, rx.count(r) * es);
  size_t rounds = 0;
  for (int i = 0; i < n; ++i)
    if (i != r)
      rounds = std::max(
          {rounds, chunks_of(tx.count(i) * es, chunk), chunks_of(rx.count(i) * es, chunk)});
  for (size_t c = 0; c < rounds; ++c) {
    const size_t off = c * chunk;
    for (int k = 1; k < n && !(first_sent && c == 0); ++k) {
      const int p = (r + k) % n;
      const size_t len = tx.count(p) * es;
      if (off < len) co_await ch.send(p, in + tx.displ(p) * es + off, std::min(chunk, len - off));
    }
    if (a.in_place) co_await ch.flush();
    for (int k = 1; k < n; ++k) {
      const int p = (r + n - k) % n;
      const size_t len = rx.count(p) * es;
      if (off >= len) continue;
      const size_t piece = std::min(chunk, len - off);
      std::memcpy(out + rx.displ(p) * es + off, co_await ch.recv(p, piece), piece);
      co_await ch.release(p);
    }
  }
}

// The synchronous form (NowFn), not in place, where every block fits a
// slot: waits for a credit on every pair it sends to (each waits for a
// release of an earlier call's message, nothing of this call), sends every
// block, then waits until every peer's block is there and takes them in
// the coroutine's order. When a credit does not come within the polls
// nothing is done; when a block does not, nothing is taken yet and the
// coroutine goes on from the receives.
bool linear_now(Channel& ch, const Args& a, Polls& polls, Task& rest, Blocks tx, Blocks rx) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, slot = ch.slot_bytes();
  if (a.in_place) return false;
  for (int i = 0; i < n; ++i)
    if (tx.count(i) * es > slot || rx.count(i) * es > slot) return false;
  if (!credits_now(ch, tx, polls)) return false;
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    if (tx.count(p) > 0) ch.send_now(p, in + tx.displ(p) * es, tx.count(p) * es);
  }
  if (rx.count(r) > 0)
    std::memcpy(out + rx.displ(r) * es, in + tx.displ(r) * es, rx.count(r) * es);
  if (!blocks_there_now(ch, rx, es, polls)) {
    rest = linear(ch, a, tx, rx, true);
    return false;
  }
  take_blocks_now(ch, rx, es, out);
  return true;
}

bool use_direct(const Channel& ch, const Args& a) {
  const size_t block = a.count * a.elem_size;
  return !a.in_place && direct_block(ch, block, block * size_t(ch.size()), kCmaNever);
}

}  // namespace

Task linear_alltoall(Channel& ch, const Args& a) {
  if (use_direct(ch, a)) return direct(ch, a, a.count * a.elem_size);
  return linear(ch, a, Blocks::same(a.count), Blocks::same(a.count), false);
}

Task linear_alltoallv(Channel& ch, const Args& a) {
  return linear(ch, a, Blocks::given(a.sendcounts, a.sdispls),
                Blocks::given(a.recvcounts, a.rdispls), false);
}

bool linear_alltoall_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  if (use_direct(ch, a)) return false;
  return linear_now(ch, a, polls, rest, Blocks::same(a.count), Blocks::same(a.count));
}

bool linear_alltoallv_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return linear_now(ch, a, polls, rest, Blocks::given(a.sendcounts, a.sdispls),
                    Blocks::given(a.recvcounts, a.rdispls));
}

}  // namespace coll
