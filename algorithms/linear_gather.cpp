// Linear gather, for large blocks and for gatherv: every rank sends its
// block straight to the root, in slot-sized chunks; the root takes the
// ranks in turn from root + 1 on. No rank forwards another's data, so the
// root receives every byte once and nothing waits for a third rank. Serves
// gather (blocks of count) and gatherv (sendcount here, recvcounts and
// displs at the root; an empty block is neither sent nor expected).
//
// Large blocks of gather go zero-copy (direct_blocks.hpp): the root
// exposes each rank's block of its recvbuf to that rank, which writes its
// block there itself; the root only waits for the n - 1 flags.
//
// Deadlock freedom: only the root receives, and the other ranks only send:
// a send waits for the root's release of an earlier chunk from the same
// rank, which the root makes right after receiving it; the root waits only
// for chunks that their senders send unconditionally.
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "direct_blocks.hpp"

namespace coll {
namespace {

Task direct(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t block = a.count_bytes();
  if (r != root) {
    co_await send_block_direct(ch, root, static_cast<const char*>(a.sendbuf), block);
    co_return;
  }
  auto* out = static_cast<char*>(a.recvbuf);
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    ch.expose(i, out + size_t(i) * block, block);
  }
  if (a.sendbuf != out + size_t(r) * block) std::memcpy(out + size_t(r) * block, a.sendbuf, block);
  for (int k = 1; k < n; ++k) co_await ch.recv_direct((root + k) % n, block);
}

Task linear(Channel& ch, const Args& a, size_t send_bytes_here, Blocks at_root) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t es = a.elem_size;
  if (r != root) {
    co_await send_bytes(ch, root, static_cast<const char*>(a.sendbuf), send_bytes_here);
    co_return;
  }
  auto* out = static_cast<char*>(a.recvbuf);
  auto block = [&](int i) { return out + at_root.displ(i) * es; };
  const size_t own = at_root.count(r) * es;
  if (own > 0 && a.sendbuf != block(r)) std::memcpy(block(r), a.sendbuf, own);
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    const size_t len = at_root.count(i) * es;
    if (len > 0) co_await recv_bytes(ch, i, len, CopyTo{block(i)});
  }
}

// The synchronous form (NowFn) where every block fits a slot: a sender
// waits for its credit and sends its one message; the root waits until
// every message is there, then takes them in the coroutine's order. Either
// does nothing if what it waits for does not come within the polls (the
// messages and the credit wait for nothing of this rank's).
bool linear_now(Channel& ch, const Args& a, Polls& polls, size_t send_bytes_here,
                Blocks at_root) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t es = a.elem_size, slot = ch.slot_bytes();
  if (r != root) {
    if (send_bytes_here > slot) return false;
    if (send_bytes_here == 0) return true;
    while (!ch.can_send(root))
      if (!polls.next()) return false;
    ch.send_now(root, a.sendbuf, send_bytes_here);
    return true;
  }
  if (!poll_every_block(n, root, at_root, es, slot, polls,
                        [&](int i, size_t len) { return ch.message(i, len) != nullptr; }))
    return false;
  auto* out = static_cast<char*>(a.recvbuf);
  const size_t own = at_root.count(r) * es;
  char* mine = out + at_root.displ(r) * es;
  if (own > 0 && a.sendbuf != mine) std::memcpy(mine, a.sendbuf, own);
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    const size_t len = at_root.count(i) * es;
    if (len == 0) continue;
    std::memcpy(out + at_root.displ(i) * es, ch.message(i, len), len);
    ch.release_now(i);
  }
  return true;
}

}  // namespace

bool linear_gather_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  if (direct_rooted_blocks(ch, a)) return false;
  return linear_now(ch, a, polls, a.bytes, Blocks::same(a.count));
}

bool linear_gatherv_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  return linear_now(ch, a, polls, a.sendcount * a.elem_size,
                    Blocks::given(a.recvcounts, a.rdispls));
}

Task linear_gather(Channel& ch, const Args& a) {
  if (direct_rooted_blocks(ch, a)) return direct(ch, a);
  return linear(ch, a, a.bytes, Blocks::same(a.count));
}

Task linear_gatherv(Channel& ch, const Args& a) {
  return linear(ch, a, a.sendcount * a.elem_size, Blocks::given(a.recvcounts, a.rdispls));
}

}  // namespace coll
