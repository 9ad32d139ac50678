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
#include <algorithm>

#include "algorithms.hpp"
#include "channel.hpp"
#include "doubling_frame.hpp"

namespace coll {

namespace {

// The steps are written out here rather than through run_folded and
// DoublingFrame::exchange (as Rabenseifner does): this is the algorithm of
// the smallest messages, where each nested task's frame and ramp (about
// 130 instructions) would show; only ranks that fold pay for one.
//
// From the step of first_mask on (1: the whole call). first_sent: this
// rank's first chunk of that step is sent already: the synchronous form
// below hands a call over here when a partner's message is not there yet.
Task steps_from(Channel& ch, const Args& a, int first_mask, bool first_sent) {
  const DoublingFrame f(ch, a);
  const int r = ch.rank();
  if (f.v < 0) {  // folded: hand the data to r + 1, get the result back
    co_await f.send_all(r + 1, f.in);
    co_await ch.flush();  // sendbuf may be recvbuf, overwritten next
    co_await f.receive_all(r + 1, f.copy_to_out());
    co_return;
  }
  const bool takes_fold = r < 2 * f.d.extra;
  if (takes_fold) {
    co_await f.receive_all(r - 1, [&](size_t at, const void* data, size_t len) {
      a.reduce(f.out + at * f.es, data, f.in + at * f.es, len);  // r - 1's operand first
    });
  }
  const char* mine = takes_fold || first_mask > 1 ? f.out : f.in;
  for (int mask = first_mask; mask < f.d.pof2; mask <<= 1) {
    const bool lower = (f.v & mask) == 0;
    const int peer = f.rank_of(f.v ^ mask);
    for (size_t c = 0; c < a.count; c += f.chunk_elems) {
      const size_t len = std::min(f.chunk_elems, a.count - c);
      if (!(first_sent && mask == first_mask && c == 0))
        co_await ch.send(peer, mine + c * f.es, len * f.es);
      const void* data = co_await ch.recv(peer, len * f.es);
      // The chunk just sent is overwritten by the reduction when it lives
      // in recvbuf: Channel::send wants its source unchanged until a flush.
      if (mine == f.out) co_await ch.flush();
      const char* own = mine + c * f.es;
      a.reduce(f.out + c * f.es, lower ? own : data, lower ? data : own, len);
      co_await ch.release(peer);
    }
    mine = f.out;
  }
  if (takes_fold) co_await f.send_all(r - 1, f.out);
}

}  // namespace

Task recursive_doubling_allreduce(Channel& ch, const Args& a) { return steps_from(ch, a, 1, false); }

// A power of two ranks (nobody folds) and one chunk: the steps above,
// each send made once its slot is free and each partner message taken once
// it is there; at the first wait that outlasts the polls, steps_from
// continues.
bool recursive_doubling_allreduce_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  const DoublingFrame f(ch, a);
  if (f.d.extra != 0 || a.count > f.chunk_elems) return false;
  const char* mine = f.in;
  for (int mask = 1; mask < f.d.pof2; mask <<= 1) {
    const bool lower = (f.v & mask) == 0;
    const int peer = f.rank_of(f.v ^ mask);
    while (!ch.can_send(peer)) {
      if (!polls.next()) {
        if (mask > 1) rest = steps_from(ch, a, mask, false);
        return false;
      }
    }
    ch.send_now(peer, mine, a.bytes);
    const void* data;
    while (!(data = ch.message(peer, a.bytes))) {
      if (!polls.next()) {
        rest = steps_from(ch, a, mask, true);
        return false;
      }
    }
    a.reduce(f.out, lower ? mine : data, lower ? data : mine, a.count);
    ch.release_now(peer);
    mine = f.out;
  }
  return true;
}

}  // namespace coll
