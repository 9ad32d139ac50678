// Zero-copy blocks for the one-step algorithms (linear alltoall, gather,
// scatter; the ring allgather takes direct_block's choice with a deadlock
// argument of its own, ring_allgather.cpp): the receiver exposes where a block goes (Channel::expose), the
// sender writes it there itself (CMA on shm, an RDMA write, a tcp frame
// applied in place) and only the flag goes through a slot. The block moves
// once instead of twice (into the receiver's window, then out of it).
//
// A block goes as one direct message: at most Channel::kMaxDirectMessage
// bytes (direct_block), so that every pair carries at most one message a
// call in each direction and no send waits for a credit that only a later
// receive of the peer's would give back. A pair has one exposure box per
// direction, so a rank exposes at most one buffer to a peer per call.
//
// Deadlock freedom, for the callers: expose() waits for nothing, and each
// caller exposes every buffer it will receive into before it waits for
// anything; a send then waits only for that exposure and for the pair's
// credit (free: the pair's earlier messages were released before the
// previous call on this channel ended); a receive waits for a send that
// its sender makes after nothing but those.
#pragma once

#include "algorithms.hpp"
#include "channel.hpp"

namespace coll {

// Whether blocks of `block` bytes, in user buffers of at most `buffer`
// bytes, go zero-copy: alike on every rank when both sizes are (the
// regular forms: every rank passes the same count). `buffer` bounds what
// the communicator pinned for the call on RDMA (the senders' sources must
// be pinned; exposures pin themselves).
//
// Where a direct write spares copies outright (tcp, RDMA, ranks on
// distinct hosts: Channel::zero_copy_spares_copies) from the zero-copy
// threshold on. Through CMA (shm) only from cma_min_block on, unless the
// user set COLL_ZCOPY_THRESHOLD: on this 2-core machine, through the shim
// at np 2 and 4 against the windows in one alternation (5 repeats, OSU's
// loop, 16 KiB - 4 MiB blocks), process_vm_writev's single copy lost to the
// windows' two memcpys up to 1 MiB (alltoall 1.16-1.23x at np 2) and at 4
// oversubscribed ranks lost at every size for alltoall and allgather
// (1.3-2.1x: each sender waits for peers that are not running to expose),
// while gather and scatter gained from 2 MiB (0.48-0.85x at np 4, 0.70-1.00
// at np 2). So gather and scatter pass 2 MiB, alltoall and allgather
// SIZE_MAX (never through CMA by default).
inline bool direct_block(const Channel& ch, size_t block, size_t buffer, size_t cma_min_block) {
  if (block == 0 || block > Channel::kMaxDirectMessage || buffer > ch.pinnable_bytes() ||
      !ch.zero_copy(block))
    return false;
  return ch.zero_copy_spares_copies(block) || ch.zero_copy_threshold_set() ||
         block >= cma_min_block;
}
inline constexpr size_t kCmaGatherScatterMin = size_t(2) << 20;
inline constexpr size_t kCmaNever = ~size_t(0);

// The linear gather's and scatter's choice: count elements a rank, the
// root's buffer n blocks.
inline bool direct_rooted_blocks(const Channel& ch, const Args& a) {
  return direct_block(ch, a.count_bytes(), a.count_bytes() * size_t(ch.size()),
                      kCmaGatherScatterMin);
}

// Writes len bytes from src into the buffer `to` exposed for this call.
inline Task send_block_direct(Channel& ch, int to, const char* src, size_t len) {
  const RemoteRegion dst = co_await ch.exposed_by(to);
  co_await ch.send_direct(to, dst, 0, src, len);
}

}  // namespace coll
