// Linear reduce, for small vectors on few ranks: every rank but the root
// writes its vector to the root, which reduces them, in slot-sized chunks.
// One step: the binomial tree's inner ranks wait for their children before
// they send, so its ceil(log2 n) levels are dependent steps, and with more
// ranks than cores each is a rank that must be scheduled before the next
// can go on. Here a non-root rank writes and returns; the root waits once
// for the n - 1 vectors (and reduces n - 1 times, nothing beside a
// schedule's wait on a vector that fits a slot).
//
// Deterministic: the root combines the vectors in one order fixed by the
// rank count and the root, relative rank order (its own operand first, then
// root + 1, root + 2, ...), as the binomial tree does (reduce(out, a, b):
// a is the operand of the lower relative ranks). In place, recvbuf holds
// the root's operand, which is read first, by the first reduction that
// overwrites it.
//
// Deadlock freedom: only the root receives, and the other ranks only send:
// a send waits for the root's release of an earlier chunk from the same
// rank, which the root makes right after reducing it; the root waits only
// for chunks that their senders send unconditionally.
#include <algorithm>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {

Task linear_reduce(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t es = a.elem_size;
  if (r != root) {
    co_await send_bytes(ch, root, static_cast<const char*>(a.sendbuf), a.count * es);
    co_return;
  }
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  for (size_t off = 0; off < a.count; off += chunk_elems) {
    const size_t len = std::min(chunk_elems, a.count - off);
    const char* sum = in + off * es;
    for (int k = 1; k < n; ++k) {
      const int p = (root + k) % n;
      a.reduce(out + off * es, sum, co_await ch.recv(p, len * es), len);
      co_await ch.release(p);
      sum = out + off * es;
    }
  }
}

// The synchronous form (NowFn) where the vector fits a slot. A non-root
// rank waits for its credit and sends; the root waits until every vector is
// there, then reduces them in the coroutine's order. Either does nothing if
// what it waits for does not come within the polls (neither waits for
// this rank).
bool linear_reduce_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t bytes = a.count * a.elem_size;
  if (bytes > ch.slot_bytes()) return false;
  if (r != root) {
    while (!ch.can_send(root))
      if (!polls.next()) return false;
    ch.send_now(root, a.sendbuf, bytes);
    return true;
  }
  for (int k = 1; k < n; ++k)
    while (!ch.message((root + k) % n, bytes))
      if (!polls.next()) return false;
  const void* sum = a.sendbuf;
  for (int k = 1; k < n; ++k) {
    const int p = (root + k) % n;
    a.reduce(a.recvbuf, sum, ch.message(p, bytes), a.count);
    ch.release_now(p);
    sum = a.recvbuf;
  }
  return true;
}

}  // namespace coll
