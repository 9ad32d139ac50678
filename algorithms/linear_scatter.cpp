// Linear scatter, for large blocks and for scatterv: the root sends every
// rank its block itself, in slot-sized chunks, the ranks in turn from
// root + 1 on. No rank forwards another's data. Serves scatter (blocks of
// count) and scatterv (sendcounts and displs at the root, recvcount here;
// an empty block is neither sent nor expected).
//
// Large blocks of scatter go zero-copy (direct_blocks.hpp): every other
// rank exposes its recvbuf to the root, which writes each block there
// itself; the receivers only wait for the flag.
//
// Deadlock freedom: only the root sends; a send waits for the release of
// an earlier chunk on the same pair, which its receiver makes right after
// receiving it, and the receivers wait for nothing else.
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
  auto* out = static_cast<char*>(a.recvbuf);
  if (r != root) {
    ch.expose(root, out, block);
    co_await ch.recv_direct(root, block);
    co_return;
  }
  const auto* in = static_cast<const char*>(a.sendbuf);
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    co_await send_block_direct(ch, i, in + size_t(i) * block, block);
  }
  if (out != in + size_t(r) * block) std::memcpy(out, in + size_t(r) * block, block);
}

Task linear(Channel& ch, const Args& a, size_t recv_bytes_here, Blocks at_root) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t es = a.elem_size;
  auto* out = static_cast<char*>(a.recvbuf);
  if (r != root) {
    co_await recv_bytes(ch, root, recv_bytes_here, CopyTo{out});
    co_return;
  }
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto block = [&](int i) { return in + at_root.displ(i) * es; };
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    const size_t len = at_root.count(i) * es;
    if (len > 0) co_await send_bytes(ch, i, block(i), len);
  }
  const size_t own = at_root.count(r) * es;
  if (own > 0 && out != block(r)) std::memcpy(out, block(r), own);
}

// The synchronous form (NowFn) where every block fits a slot: the root
// waits for a credit on every pair it sends on, then sends each block in
// the coroutine's order; a receiver waits for its one message. Either does
// nothing if what it waits for does not come within the polls (the root's
// credits and a receiver's message wait for nothing of this rank's).
bool linear_now(Channel& ch, const Args& a, Polls& polls, size_t recv_bytes_here,
                Blocks at_root) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t es = a.elem_size, slot = ch.slot_bytes();
  auto* out = static_cast<char*>(a.recvbuf);
  if (r != root) {
    if (recv_bytes_here > slot) return false;
    if (recv_bytes_here == 0) return true;
    const void* data;
    while (!(data = ch.message(root, recv_bytes_here)))
      if (!polls.next()) return false;
    std::memcpy(out, data, recv_bytes_here);
    ch.release_now(root);
    return true;
  }
  if (!poll_every_block(n, root, at_root, es, slot, polls,
                        [&](int i, size_t) { return ch.can_send(i); }))
    return false;
  const auto* in = static_cast<const char*>(a.sendbuf);
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    const size_t len = at_root.count(i) * es;
    if (len > 0) ch.send_now(i, in + at_root.displ(i) * es, len);
  }
  const size_t own = at_root.count(r) * es;
  const char* mine = in + at_root.displ(r) * es;
  if (own > 0 && out != mine) std::memcpy(out, mine, own);
  return true;
}

}  // namespace

bool linear_scatter_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  if (direct_rooted_blocks(ch, a)) return false;
  return linear_now(ch, a, polls, a.bytes, Blocks::same(a.count));
}

bool linear_scatterv_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  return linear_now(ch, a, polls, a.recvcount * a.elem_size,
                    Blocks::given(a.sendcounts, a.sdispls));
}

Task linear_scatter(Channel& ch, const Args& a) {
  if (direct_rooted_blocks(ch, a)) return direct(ch, a);
  return linear(ch, a, a.bytes, Blocks::same(a.count));
}

Task linear_scatterv(Channel& ch, const Args& a) {
  return linear(ch, a, a.recvcount * a.elem_size, Blocks::given(a.sendcounts, a.sdispls));
}

}  // namespace coll
