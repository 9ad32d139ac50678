// Pipelined chain broadcast: root -> root+1 -> ... -> root-1, in slot-sized
// chunks. A rank forwards a chunk straight from its window slot before it
// copies it into the user buffer, so the chunk moves on without waiting for
// the local copy. Large broadcasts go zero-copy: every rank but the root
// exposes its buffer to its predecessor, which writes chunks straight into
// it and forwards from its own buffer (at 2 ranks the whole message in one
// write: ring::zero_copy_chunk). Otherwise a buffer from coll_mem_alloc
// takes its chunks in place (Channel::offer).
//
// Deadlock freedom: each rank receives chunk c from its predecessor before
// it sends chunk c on, and releases it after; a send waits only for a
// credit its successor gives back as it receives, which waits on nothing
// but our sends. Placing changes where a chunk lands, not who waits.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "channel.hpp"
#include "ring_schedule.hpp"

namespace coll {

Task ring_bcast(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const int pos = ring::chain_position(r, a.root, n);
  const int prev = ring::chain_prev(r, n), next = ring::chain_next(r, n);
  const bool last = pos == n - 1;
  auto* buf = static_cast<char*>(a.recvbuf);
  const size_t chunk = ch.slot_bytes();
  if (ch.zero_copy(a.bytes)) {
    if (pos != 0) ch.expose(prev, buf, a.bytes);
    const RemoteRegion dst = last ? RemoteRegion{} : co_await ch.exposed_by(next);
    const size_t zchunk = ring::zero_copy_chunk(a.bytes, n, chunk, Channel::kMaxDirectMessage);
    for (size_t off = 0; off < a.bytes; off += zchunk) {
      const size_t len = std::min(zchunk, a.bytes - off);
      if (pos != 0) co_await ch.recv_direct(prev, len);
      if (!last) co_await ch.send_direct(next, dst, off, buf + off, len);
    }
    co_return;
  }
  // Memory a predecessor's writes reach by a plain copy (coll_mem_alloc's,
  // on shm) is offered to it: its chunks are placed there, one copy a hop.
  if (pos != 0) ch.offer(prev, buf, a.bytes, (a.bytes + chunk - 1) / chunk);
  for (size_t off = 0; off < a.bytes; off += chunk) {
    const size_t len = std::min(chunk, a.bytes - off);
    if (pos == 0) {
      co_await ch.send_placed(next, buf + off, len, off);
      continue;
    }
    const void* data = co_await ch.recv_placed(prev, buf + off, len);
    if (!last) co_await ch.send_placed(next, data, len, off);
    if (data != buf + off) std::memcpy(buf + off, data, len);
    co_await ch.release(prev);
  }
}

// One chunk, not zero-copy: each rank receives at most one message and
// sends at most one; both are waited for before either is done.
bool ring_bcast_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  if (a.bytes > ch.slot_bytes() || ch.zero_copy(a.bytes)) return false;
  const int n = ch.size(), r = ch.rank();
  const int pos = ring::chain_position(r, a.root, n);
  const int prev = ring::chain_prev(r, n), next = ring::chain_next(r, n);
  const bool last = pos == n - 1;
  auto* buf = static_cast<char*>(a.recvbuf);
  const void* data = buf;
  while (!(last || ch.can_send(next)) || (pos != 0 && !(data = ch.message(prev, a.bytes))))
    if (!polls.next()) return false;
  if (!last) ch.send_now(next, data, a.bytes);
  if (pos == 0) return true;
  std::memcpy(buf, data, a.bytes);
  ch.release_now(prev);
  return true;
}

}  // namespace coll
