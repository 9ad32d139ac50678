// Ring allgather: in step s every rank passes the block it got in step
// s - 1 (its own in step 0) to its right neighbour and takes the next one
// from its left, each block cut into slot-sized chunks. After n - 1 steps
// every rank has every block. Used by the communicator constructors
// (split, dup) to trade colors, keys and window keys over the parent.
//
// Deadlock freedom: every block has the same size, so in each step a rank
// sends and receives the same number of chunks, alternating; it is never
// more than one chunk ahead of what it has received, and the channel has
// at least three slots per peer, so a ring of ranks each waiting for a
// credit cannot form.
#include <cstring>

#include "algorithms.hpp"
#include "channel.hpp"
#include "ring_schedule.hpp"

namespace coll {

Task ring_allgather(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t block = a.bytes;
  auto* out = static_cast<char*>(a.recvbuf);
  char* own = out + size_t(r) * block;
  if (a.sendbuf != own) std::memcpy(own, a.sendbuf, block);
  const int right = ring::chain_next(r, n), left = ring::chain_prev(r, n);
  const size_t chunk = ch.slot_bytes();
  for (int s = 0; s < n - 1; ++s) {
    const char* tx = out + size_t(ring::mod(r - s, n)) * block;
    char* rx = out + size_t(ring::mod(r - s - 1, n)) * block;
    for (size_t off = 0; off < block; off += chunk) {
      const size_t len = std::min(chunk, block - off);
      co_await ch.send(right, tx + off, len);
      std::memcpy(rx + off, co_await ch.recv(left, len), len);
      co_await ch.release(left);
    }
  }
}

}  // namespace coll
