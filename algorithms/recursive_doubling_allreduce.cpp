// Recursive-doubling allreduce, for small messages: log2(p) steps in which
// partners exchange their whole partial results and both reduce them; ranks
// beyond the largest power of two p <= n first fold their data into a
// partner and get the result back at the end (binomial_schedule.hpp,
// doubling_frame.hpp).
//
// Bitwise identical results: the reduction operators are not bitwise
// commutative on floats (min/max with NaN or signed zeros, NaN payloads of
// +), and the two partners of a step must compute the same bits. By
// induction, after the step of mask m every rank in a block of 2m
// consecutive exchange ranks holds the same bits: at that step each rank of
// the lower block (bit m clear) holds the lower block's value A and each of
// the upper block holds B, and both partners compute reduce(A, B), the
// lower block's operand first. The folded ranks get a copy.
//
// Deadlock freedom: within a step, both partners send chunk c and then
// receive chunk c; order the work by (fold, step, chunk, send before
// receive, unfold). A receive waits for the partner's send with the same
// key, and a send waits for the release of an earlier chunk on the same
// pair, which has a smaller key; each rank's program follows that order.
#include "algorithms.hpp"
#include "doubling_frame.hpp"

namespace coll {

Task recursive_doubling_allreduce(Channel& ch, const Args& a) {
  co_await run_folded(ch, a, [&](const DoublingFrame& f, const char* mine) -> Task {
    for (int mask = 1; mask < f.d.pof2; mask <<= 1) {
      const bool lower = (f.v & mask) == 0;
      // The chunk just sent is overwritten by the reduction when it lives
      // in recvbuf: flush first (Channel::send wants its source unchanged
      // until a flush).
      co_await f.exchange(
          f.rank_of(f.v ^ mask), mine, 0, a.count, 0, a.count,
          [&](size_t at, const void* data, size_t len) {
            const char* own = mine + at * f.es;
            a.reduce(f.out + at * f.es, lower ? own : data, lower ? data : own, len);
          },
          mine == f.out);
      mine = f.out;
    }
  });
}

}  // namespace coll
