// Recursive-doubling scan and exscan (scan_schedule.hpp; MPICH's): ceil(log2
// n) steps in which partners r and r ^ m trade the partial result of their
// groups of m ranks, in slot-sized chunks; a rank folds a lower partner's
// partial into its result. The partials alternate between two scratch
// vectors, so the one just sent is not overwritten before a flush (one per
// step). exscan starts from no result and takes the first lower partial as
// it is; rank 0 never has a lower partner, so its recvbuf is not touched.
//
// Every rank's result reduces its predecessors' inputs in rank order (the
// lower group's operand first at every step).
//
// Deadlock freedom: partners are symmetric (r ^ m exists for one exactly
// when it does for the other), and both trade vectors of count elements
// cut into the same chunks, chunk c of the send before chunk c of the
// receive. Order the work by (step, chunk, send before receive): a receive
// waits for the partner's send with the same key, a send for the release
// of an earlier message on the same pair, which has a smaller key; every
// rank's program follows that order.
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "scan_schedule.hpp"

namespace coll {
namespace {

Task doubling(Channel& ch, const Args& a, bool exclusive) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, bytes = a.count * es;
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  Scratch partials(ch, 2 * bytes);
  char* partial[2] = {partials.get(), partials.get() + bytes};
  int cur = 0;
  std::memcpy(partial[cur], in, bytes);  // before recvbuf changes: it may be the input
  if (!exclusive && out != in) std::memcpy(out, in, bytes);
  bool have_result = !exclusive;
  bool flushed = true;
  for (int m = 1; m < n; m <<= 1) {
    const int p = scan::partner(r, m, n);
    if (p < 0) continue;
    const bool lower = p < r;
    const bool keep_partial = scan::partial_needed_after(m, n);
    if (!flushed) co_await ch.flush();  // partial[cur ^ 1] was sent at the last step
    const char* mine = partial[cur];
    char* next = partial[cur ^ 1];
    const bool first = !have_result;
    co_await exchange(ch, p, mine, bytes, p, bytes, [&](size_t at, const void* data, size_t len) {
      const size_t k = len / es;
      if (lower) {
        if (first)
          std::memcpy(out + at, data, len);
        else
          a.reduce(out + at, data, out + at, k);
        if (keep_partial) a.reduce(next + at, data, mine + at, k);
      } else if (keep_partial) {
        a.reduce(next + at, mine + at, data, k);
      }
    });
    if (lower) have_result = true;
    cur ^= 1;
    flushed = false;
  }
  co_await ch.flush();  // the scratch was a source of sends
}

}  // namespace

Task recursive_doubling_scan(Channel& ch, const Args& a) { return doubling(ch, a, false); }
Task recursive_doubling_exscan(Channel& ch, const Args& a) { return doubling(ch, a, true); }

}  // namespace coll
