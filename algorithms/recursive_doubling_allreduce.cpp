// Recursive-doubling allreduce, for small messages: log2(p) steps in which
// partners exchange their whole partial results and both reduce them; ranks
// beyond the largest power of two p <= n first fold their data into a
// partner and get the result back at the end (binomial_schedule.hpp).
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
#include <cstring>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "channel.hpp"

namespace coll {

void recursive_doubling_allreduce(Channel& ch, const AllreduceArgs& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  auto* out = static_cast<char*>(a.recvbuf);
  const auto* in = static_cast<const char*>(a.sendbuf);
  const binomial::Doubling d = binomial::doubling(n);
  const int v = binomial::doubling_rank(r, d);
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  auto for_each_chunk = [&](auto body) {
    for (size_t off = 0; off < a.count; off += chunk_elems)
      body(off * es, std::min(chunk_elems, a.count - off));
  };

  if (v < 0) {  // folded: hand the data to r + 1, get the result back
    for_each_chunk([&](size_t at, size_t len) { ch.send(r + 1, in + at, len * es); });
    ch.flush();  // sendbuf may be recvbuf, overwritten next
    for_each_chunk([&](size_t at, size_t len) {
      const void* data = ch.recv(r + 1, len * es);
      std::memcpy(out + at, data, len * es);
      ch.release(r + 1);
    });
    ch.flush();
    return;
  }
  const char* mine = in;  // where this rank's partial result lives
  const bool takes_fold = r < 2 * d.extra;
  if (takes_fold) {
    for_each_chunk([&](size_t at, size_t len) {
      const void* data = ch.recv(r - 1, len * es);
      a.reduce(out + at, data, in + at, len);  // r - 1's operand first
      ch.release(r - 1);
    });
    mine = out;
  }
  for (int mask = 1; mask < d.pof2; mask <<= 1) {
    const int partner_v = v ^ mask;
    const int partner = binomial::doubling_to_rank(partner_v, d);
    const bool lower = v < partner_v;
    for_each_chunk([&](size_t at, size_t len) {
      ch.send(partner, mine + at, len * es);
      const void* data = ch.recv(partner, len * es);
      // The chunk just sent is overwritten below when it lives in recvbuf:
      // Channel::send wants its source unchanged until flush().
      if (mine == out) ch.flush();
      a.reduce(out + at, lower ? mine + at : data, lower ? data : mine + at, len);
      ch.release(partner);
    });
    mine = out;
  }
  if (takes_fold)
    for_each_chunk([&](size_t at, size_t len) { ch.send(r - 1, out + at, len * es); });
  ch.flush();
}

}  // namespace coll
