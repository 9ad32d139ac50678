// Pairwise-exchange alltoall, for large blocks: n steps, in each of which
// every rank trades one block with one partner (pairwise_schedule.hpp:
// partner (s - r) mod n, a matching), in slot-sized chunks; the step where
// a rank meets itself copies its own block. Only one peer per step, so a
// rank's link and the partner's slots carry one stream at a time. Serves
// alltoall (blocks of count) and alltoallv (sendcounts/sdispls,
// recvcounts/rdispls; an empty block is neither sent nor expected).
//
// In place, a rank sends its block for the partner from where the
// partner's block to it goes: each received chunk is written only after a
// flush, over the chunk of the same offset it has just sent.
//
// Deadlock freedom: partners are symmetric, and what one sends the other
// expects, cut into the same chunks. Order the work by (step, chunk, send
// before receive): a receive waits for the partner's send with the same
// key, a send for the release of an earlier message on the same pair,
// which has a smaller key; every rank's program follows that order.
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "pairwise_schedule.hpp"

namespace coll {
namespace {

Task exchange_all(Channel& ch, const Args& a, Blocks tx, Blocks rx) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  // The displacement of an empty block may be anything: not used.
  auto src = [&](int i) { return tx.count(i) ? in + tx.displ(i) * es : in; };
  auto dst = [&](int i) { return rx.count(i) ? out + rx.displ(i) * es : out; };
  for (int s = 0; s < n; ++s) {
    const int p = pairwise::partner(r, s, n);
    if (p == r) {
      if (!a.in_place && rx.count(r) > 0) std::memcpy(dst(r), src(r), rx.count(r) * es);
      continue;
    }
    co_await exchange(ch, p, src(p), tx.count(p) * es, p, rx.count(p) * es, CopyTo{dst(p)},
                      a.in_place);
  }
}

}  // namespace

Task pairwise_alltoall(Channel& ch, const Args& a) {
  return exchange_all(ch, a, Blocks::same(a.count), Blocks::same(a.count));
}

Task pairwise_alltoallv(Channel& ch, const Args& a) {
  return exchange_all(ch, a, Blocks::given(a.sendcounts, a.sdispls),
                      Blocks::given(a.recvcounts, a.rdispls));
}

}  // namespace coll
