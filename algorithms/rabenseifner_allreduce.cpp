// Rabenseifner's allreduce, for medium and large messages: a reduce-scatter
// by recursive halving, then an allgather by recursive doubling
// (binomial_schedule.hpp), with the ranks beyond the largest power of two p
// <= n folded in first and served last, as in recursive doubling. Each rank
// sends and receives about 2 (p-1)/p of the data, as in the ring, but in
// 2 log2(p) steps instead of 2 (n-1).
//
// Each segment is reduced along one path, ending at one rank, and then
// copied everywhere, so the result is bitwise identical on every rank.
//
// Deadlock freedom: in each step both partners send the chunks of what
// they give and receive those of what they keep, chunk c of one before
// chunk c of the other; order the work by (fold, step, chunk, send before
// receive, unfold). A receive waits for the partner's send with the same
// key, a send for the release of an earlier message on the same pair, which
// has a smaller key; each rank's program follows that order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "channel.hpp"

namespace coll {

void rabenseifner_allreduce(Channel& ch, const AllreduceArgs& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  auto* out = static_cast<char*>(a.recvbuf);
  const auto* in = static_cast<const char*>(a.sendbuf);
  const binomial::Doubling d = binomial::doubling(n);
  const int v = binomial::doubling_rank(r, d);
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  // Elements [begin, end) of a window of segments.
  auto begin_of = [&](int seg) { return binomial::segment_begin(a.count, d.pof2, seg); };
  // Sends elements [tx, tx_end) from src and receives [rx, rx_end), chunk by
  // chunk; take(offset, data, len) consumes each received chunk.
  auto exchange = [&](int peer, const char* src, size_t tx, size_t tx_end, size_t rx, size_t rx_end,
                      auto take) {
    for (size_t c = 0;; c += chunk_elems) {
      const bool sending = tx + c < tx_end, receiving = rx + c < rx_end;
      if (!sending && !receiving) break;
      if (sending) ch.send(peer, src + (tx + c) * es, std::min(chunk_elems, tx_end - tx - c) * es);
      if (receiving) {
        const size_t len = std::min(chunk_elems, rx_end - rx - c);
        const void* data = ch.recv(peer, len * es);
        take(rx + c, data, len);
        ch.release(peer);
      }
    }
  };

  if (v < 0) {  // folded: hand the data to r + 1, get the result back
    exchange(r + 1, in, 0, a.count, 0, 0, [](size_t, const void*, size_t) {});
    ch.flush();  // sendbuf may be recvbuf, overwritten next
    exchange(r + 1, in, 0, 0, 0, a.count, [&](size_t at, const void* data, size_t len) {
      std::memcpy(out + at * es, data, len * es);
    });
    ch.flush();
    return;
  }
  const char* mine = in;  // where this rank's partial results live
  const bool takes_fold = r < 2 * d.extra;
  if (takes_fold) {
    exchange(r - 1, in, 0, 0, 0, a.count, [&](size_t at, const void* data, size_t len) {
      a.reduce(out + at * es, data, in + at * es, len);  // r - 1's operand first
    });
    mine = out;
  }

  // Reduce-scatter by recursive halving.
  std::vector<binomial::Window> held{{0, d.pof2}};
  for (int m = d.pof2 / 2; m >= 1; m /= 2) {
    const binomial::Window w = held.back();
    const binomial::Window give = binomial::halving_give(w, v, m);
    const binomial::Window keep = binomial::halving_keep(w, v, m);
    const bool lower = (v & m) == 0;
    const char* own = mine;
    exchange(binomial::doubling_to_rank(v ^ m, d), own, begin_of(give.lo), begin_of(give.hi),
             begin_of(keep.lo), begin_of(keep.hi), [&](size_t at, const void* data, size_t len) {
               const char* x = own + at * es;
               a.reduce(out + at * es, lower ? x : data, lower ? data : x, len);
             });
    held.push_back(keep);
    mine = out;
  }
  // The halves given away, sent from recvbuf (or from sendbuf, if it is
  // recvbuf), are overwritten below: Channel::send wants them unchanged
  // until flush().
  ch.flush();

  // Allgather by recursive doubling: the halving steps backwards.
  for (int m = 1; m < d.pof2; m *= 2) {
    const binomial::Window mine_w = held.back();
    held.pop_back();
    const binomial::Window theirs = binomial::halving_give(held.back(), v, m);
    exchange(binomial::doubling_to_rank(v ^ m, d), out, begin_of(mine_w.lo), begin_of(mine_w.hi),
             begin_of(theirs.lo), begin_of(theirs.hi),
             [&](size_t at, const void* data, size_t len) {
               std::memcpy(out + at * es, data, len * es);
             });
  }
  if (takes_fold) exchange(r - 1, out, 0, a.count, 0, 0, [](size_t, const void*, size_t) {});
  ch.flush();
}

}  // namespace coll
