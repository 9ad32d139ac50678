// Ring reduce-scatter, for large messages: n - 1 steps in which each
// rank's partial result of one block moves one rank to the right and takes
// that rank's input in (ring_reduce_scatter.hpp); block i starts at rank
// i + 1 and arrives at rank i fully reduced. Every rank sends and receives
// (n - 1) / n of the input, the least any reduce-scatter moves. Serves
// reduce_scatter_block (blocks of recvcount) and reduce_scatter
// (recvcounts, any sizes, empty ones included).
//
// Partial results live in a scratch copy of the input's layout (in
// recvbuf itself when the call is in place, where the result then moves to
// recvbuf's start); the last step reduces straight into recvbuf.
//
// Deadlock freedom: in step s a rank's left neighbour sends the block the
// rank receives, cut into the same chunks. Order the work by (step, chunk,
// send before receive): a receive waits for the send with the same key
// on the left, a send for the release of an earlier message on the same
// pair (a smaller key); every rank's program follows that order, whatever
// the block sizes.
#include "ring_reduce_scatter.hpp"

#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "reduce_scatter_schedule.hpp"

namespace coll {
namespace {

Task ring_steps(Channel& ch, const Args& a, const size_t* counts, size_t uniform) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const std::vector<size_t> off = reduce_scatter::offsets(counts, uniform, n);
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  const size_t mine = (off[size_t(r) + 1] - off[size_t(r)]) * es;
  if (a.in_place) {
    co_await ring_reduce_scatter_steps(ch, a, off, in, out, out + off[size_t(r)] * es);
    if (off[size_t(r)] > 0 && mine > 0) {
      co_await ch.flush();  // what moves over our block's new place was sent from there
      std::memmove(out, out + off[size_t(r)] * es, mine);
    }
    co_return;
  }
  // Two ranks pass only their inputs: no partial results to keep.
  Scratch acc;
  if (n > 2) acc.allocate(ch, off[size_t(n)] * es);
  co_await ring_reduce_scatter_steps(ch, a, off, in, acc.get(), out);
  if (acc.get()) co_await ch.flush();  // the scratch was a source of sends
}

}  // namespace

Task ring_reduce_scatter_block(Channel& ch, const Args& a) {
  return ring_steps(ch, a, nullptr, a.count);
}

Task ring_reduce_scatter(Channel& ch, const Args& a) { return ring_steps(ch, a, a.recvcounts, 0); }

}  // namespace coll
