// Ring allgather: in step s every rank passes the block it got in step
// s - 1 (its own in step 0) to its right neighbour and takes the next one
// from its left, each block cut into slot-sized chunks. After n - 1 steps
// every rank has every block. (The communicator constructors and the
// argument checks trade their bytes by Bruck's allgather, exchange_bytes:
// never this file's zero-copy path, which pins user buffers.)
//
// Large blocks go zero-copy: every rank exposes its recvbuf to its left
// neighbour, which writes each block straight into its place there (one
// direct message a step), and forwards it in the next step from its own
// recvbuf; every byte is copied once per hop instead of twice. A receive
// releases its slot at once, and a rank sends in step s only what it
// received in step s - 1, so a send waits only for credits that its right
// neighbour gives back as its receives go, which wait on nothing of ours
// that is not already sent.
//
// Deadlock freedom: every block has the same size, so in each step a rank
// sends and receives the same number of chunks, alternating; it is never
// more than one chunk ahead of what it has received, and the channel has
// at least three slots per peer, so a ring of ranks each waiting for a
// credit cannot form.
#include <cstring>

#include "algorithms.hpp"
#include "channel.hpp"
#include "direct_blocks.hpp"
#include "ring_schedule.hpp"

namespace coll {
namespace {

Task ring_direct(Channel& ch, char* out, size_t block) {
  const int n = ch.size(), r = ch.rank();
  const int right = ring::chain_next(r, n), left = ring::chain_prev(r, n);
  ch.expose(left, out, block * size_t(n));
  const RemoteRegion dst = co_await ch.exposed_by(right);
  for (int s = 0; s < n - 1; ++s) {
    const size_t tx = size_t(ring::mod(r - s, n)) * block;
    co_await ch.send_direct(right, dst, tx, out + tx, block);
    co_await ch.recv_direct(left, block);
  }
}

}  // namespace

Task ring_allgather(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t block = a.bytes;
  auto* out = static_cast<char*>(a.recvbuf);
  char* own = out + size_t(r) * block;
  if (a.sendbuf != own) std::memcpy(own, a.sendbuf, block);
  if (direct_block(ch, block, block * size_t(n), kCmaNever)) {
    co_await ring_direct(ch, out, block);
    co_return;
  }
  const int right = ring::chain_next(r, n), left = ring::chain_prev(r, n);
  const size_t chunk = ch.slot_bytes();
  // A recvbuf from coll_mem_alloc takes the left neighbour's chunks in
  // place (Channel::offer): every recvbuf has the same layout, so a chunk
  // goes to the offset it has in the sender's.
  ch.offer(left, out, block * size_t(n), uint64_t(n - 1) * ((block + chunk - 1) / chunk));
  for (int s = 0; s < n - 1; ++s) {
    const size_t tx = size_t(ring::mod(r - s, n)) * block;
    const size_t rx = size_t(ring::mod(r - s - 1, n)) * block;
    for (size_t off = 0; off < block; off += chunk) {
      const size_t len = std::min(chunk, block - off);
      co_await ch.send_placed(right, out + tx + off, len, tx + off);
      const void* data = co_await ch.recv_placed(left, out + rx + off, len);
      if (data != out + rx + off) std::memcpy(out + rx + off, data, len);
      co_await ch.release(left);
    }
  }
}

}  // namespace coll
