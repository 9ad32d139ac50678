// Ring allgatherv: ring_allgather.cpp with blocks of their own sizes and
// places (recvcounts and displs, which every rank knows). In step s every
// rank passes the block it got in step s - 1 (its own in step 0) to its
// right neighbour and takes the next one from its left, each in
// slot-sized chunks; an empty block is neither sent nor expected, so a run
// of empty blocks costs nothing.
//
// Deadlock freedom: the block a rank receives in step s is the one its
// left neighbour sends in step s, so both cut it into the same chunks.
// Order the work by (step, chunk, send before receive): a receive waits
// for the send with the same key on the left neighbour, a send for the
// release of an earlier message on the same pair (a smaller key); every
// rank's program follows that order, whatever the block sizes.
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "ring_schedule.hpp"

namespace coll {

Task ring_allgatherv(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const Blocks b = Blocks::given(a.recvcounts, a.rdispls);
  auto* out = static_cast<char*>(a.recvbuf);
  // The displacement of an empty block may be anything: not used.
  auto block = [&](int i) { return b.count(i) ? out + b.displ(i) * es : out; };
  const size_t own = b.count(r) * es;
  if (own > 0 && a.sendbuf != block(r)) std::memcpy(block(r), a.sendbuf, own);
  const int right = ring::chain_next(r, n), left = ring::chain_prev(r, n);
  for (int s = 0; s < n - 1; ++s) {
    const int tx = ring::mod(r - s, n), rx = ring::mod(r - s - 1, n);
    co_await exchange(ch, right, block(tx), b.count(tx) * es, left, b.count(rx) * es,
                      CopyTo{block(rx)});
  }
}

}  // namespace coll
