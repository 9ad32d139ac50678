// Linear (flat) broadcast, for tiny messages on few ranks: the root writes
// each chunk to every other rank itself. No rank forwards, so no receive
// waits for a third rank to be scheduled: with more ranks than cores that
// saves a context switch per tree level.
//
// Deadlock freedom: only the root sends; a send waits for the release of
// an earlier chunk on the same pair, which its receiver does right after
// receiving it.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "channel.hpp"

namespace coll {

Task linear_bcast(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  auto* buf = static_cast<char*>(a.recvbuf);
  const size_t chunk = ch.slot_bytes();
  for (size_t off = 0; off < a.bytes; off += chunk) {
    const size_t len = std::min(chunk, a.bytes - off);
    if (r == a.root) {
      for (int i = 1; i < n; ++i) co_await ch.send((a.root + i) % n, buf + off, len);
    } else {
      std::memcpy(buf + off, co_await ch.recv(a.root, len), len);
      co_await ch.release(a.root);
    }
  }
}

}  // namespace coll
