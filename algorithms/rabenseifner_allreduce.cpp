// Rabenseifner's allreduce, for medium and large messages: a reduce-scatter
// by recursive halving, then an allgather by recursive doubling
// (binomial_schedule.hpp), with the ranks beyond the largest power of two p
// <= n folded in first and served last, as in recursive doubling
// (doubling_frame.hpp). Each rank sends and receives about 2 (p-1)/p of the
// data, as in the ring, but in 2 log2(p) steps instead of 2 (n-1).
//
// Each segment is reduced along one path, ending at one rank, and then
// copied everywhere, so the result is bitwise identical on every rank.
//
// A recvbuf from coll_mem_alloc takes the allgather's chunks in place
// (Channel::offer): each partner's, those after its halving step's. The
// offers go before our first halving send, and a partner's allgather
// chunks only after it has received that step's from us, so they are
// always in time.
//
// Deadlock freedom: in each step both partners send the chunks of what
// they give and receive those of what they keep, chunk c of one before
// chunk c of the other; order the work by (fold, step, chunk, send before
// receive, unfold). A receive waits for the partner's send with the same
// key, a send for the release of an earlier message on the same pair, which
// has a smaller key; each rank's program follows that order.
#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "doubling_frame.hpp"

namespace coll {

Task rabenseifner_allreduce(Channel& ch, const Args& a) {
  co_await run_folded(ch, a, [&](const DoublingFrame& f, const char* mine) -> Task {
    const int v = f.v;
    // Where segment seg of the pof2 segments begins, in elements.
    auto begin_of = [&](int seg) { return binomial::segment_begin(a.count, f.d.pof2, seg); };
    auto trade = [&](int m, const char* src, binomial::Window tx, binomial::Window rx,
                     auto take, bool placed) {
      return f.exchange(f.rank_of(v ^ m), src, begin_of(tx.lo), begin_of(tx.hi), begin_of(rx.lo),
                        begin_of(rx.hi), take, false, placed);
    };

    // The partner at mask m sends us the chunks of what we keep at its
    // halving step, then those of what we gave at its doubling step.
    for (int m = f.d.pof2 / 2; m >= 1; m /= 2) {
      const binomial::Window keep = binomial::halving_keep(v, m),
                            give = binomial::halving_give(v, m);
      f.offer_out(f.rank_of(v ^ m), f.chunks(begin_of(give.lo), begin_of(give.hi)),
                  f.chunks(begin_of(keep.lo), begin_of(keep.hi)));
    }

    // Reduce-scatter by recursive halving.
    for (int m = f.d.pof2 / 2; m >= 1; m /= 2) {
      const bool lower = (v & m) == 0;
      co_await trade(m, mine, binomial::halving_give(v, m), binomial::halving_keep(v, m),
                     [&](size_t at, const void* data, size_t len) {
                       const char* own = mine + at * f.es;
                       a.reduce(f.out + at * f.es, lower ? own : data, lower ? data : own, len);
                     },
                     false);
      mine = f.out;
    }
    // The halves given away, sent from recvbuf (or from sendbuf, if it is
    // recvbuf), are overwritten below: Channel::send wants them unchanged
    // until flush().
    co_await ch.flush();

    // Allgather by recursive doubling: the halving steps backwards, each
    // rank sending what it kept and receiving what it gave.
    for (int m = 1; m < f.d.pof2; m *= 2)
      co_await trade(m, f.out, binomial::halving_keep(v, m), binomial::halving_give(v, m),
                     f.copy_to_out(), true);
  });
}

}  // namespace coll
