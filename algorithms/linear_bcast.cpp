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

// One chunk: the root sends once to every rank, a receiver takes one
// message; every credit or the message is waited for before anything is
// done.
bool linear_bcast_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  if (a.bytes > ch.slot_bytes()) return false;
  const int n = ch.size(), r = ch.rank();
  auto* buf = static_cast<char*>(a.recvbuf);
  if (r == a.root) {
    for (int i = 1; i < n; ++i)
      while (!ch.can_send((a.root + i) % n))
        if (!polls.next()) return false;
    for (int i = 1; i < n; ++i) ch.send_now((a.root + i) % n, buf, a.bytes);
    return true;
  }
  const void* data;
  while (!(data = ch.message(a.root, a.bytes)))
    if (!polls.next()) return false;
  std::memcpy(buf, data, a.bytes);
  ch.release_now(a.root);
  return true;
}

}  // namespace coll
