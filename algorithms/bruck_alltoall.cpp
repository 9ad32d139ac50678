// Bruck's alltoall, for small blocks: ceil(log2 n) steps on any n instead
// of n - 1 (bruck_schedule.hpp). The blocks are put in rotated order in a
// scratch buffer (position i: the block for rank r + i); at the step of
// distance d every position with bit d set moves to rank r + d, packed
// into one stream (so a step is one message while it fits a slot), and the
// same positions arrive from r - d; at the end position i holds the block
// of rank r - i, which goes to its place in recvbuf. Each block travels
// once per bit of its distance: about log2(n) / 2 times the data of the
// pairwise exchange, for n / log2(n) fewer messages.
//
// Deadlock freedom: at each step a rank sends its packed positions to
// r + d and receives the same number of blocks from r - d, chunk c of the
// send before chunk c of the receive. Order the work by (step, chunk, send
// before receive): a receive waits for the send with the same key on its
// peer, a send for the release of an earlier message on the same pair,
// which has a smaller key; every rank's program follows that order.
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "bruck_schedule.hpp"
#include "channel.hpp"

namespace coll {

Task bruck_alltoall(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t block = a.bytes;
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  Scratch rot(ch, size_t(n) * block);
  Scratch pack(ch, size_t(bruck::alltoall_max_moved(n)) * block);
  for (int i = 0; i < n; ++i)
    std::memcpy(rot.get() + size_t(i) * block,
                in + size_t(bruck::alltoall_initial_dest(r, i, n)) * block, block);

  for (int s = 0; s < bruck::num_steps(n); ++s) {
    const std::vector<int> moved = bruck::alltoall_positions(s, n);
    if (s > 0) co_await ch.flush();  // the pack buffer was the last step's source
    for (size_t j = 0; j < moved.size(); ++j)
      std::memcpy(pack.get() + j * block, rot.get() + size_t(moved[j]) * block, block);
    // A received chunk may hold pieces of several blocks, or of one.
    auto unpack = [&](size_t at, const void* data, size_t len) {
      const auto* src = static_cast<const char*>(data);
      while (len > 0) {
        const size_t j = at / block, in_block = at % block;
        const size_t piece = std::min(len, block - in_block);
        std::memcpy(rot.get() + size_t(moved[j]) * block + in_block, src, piece);
        at += piece;
        src += piece;
        len -= piece;
      }
    };
    const size_t len = moved.size() * block;
    co_await exchange(ch, bruck::alltoall_send_to(r, s, n), pack.get(), len,
                      bruck::alltoall_recv_from(r, s, n), len, unpack);
  }
  for (int i = 0; i < n; ++i)
    std::memcpy(out + size_t(bruck::alltoall_final_source(r, i, n)) * block,
                rot.get() + size_t(i) * block, block);
  co_await ch.flush();  // the pack buffer was a source of sends
}

}  // namespace coll
