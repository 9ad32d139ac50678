// Reduce as a reduce-scatter and a gather, for large messages (the idea of
// Rabenseifner's reduce; MPICH's and Open MPI's "redscat_gather"): the
// vector is cut into n segments (sizes differ by at most one element), a
// ring reduce-scatter (ring_reduce_scatter.hpp) leaves segment i fully
// reduced at rank i, and every rank sends its segment to the root. Each
// rank sends about 2 (n - 1) / n of the vector once instead of the tree's
// log2(n) whole copies through the inner ranks, and the root's reductions
// are spread over all ranks.
//
// The root keeps its partial results in recvbuf, the other ranks in a
// scratch buffer (their recvbuf is not significant).
//
// Deadlock freedom: the reduce-scatter is ring_reduce_scatter.cpp's (order
// by step, chunk, send before receive). In the gather only the root
// receives, from each rank in turn, and the others only send: a send waits
// for the root's release of an earlier chunk from the same rank, which the
// root makes right after receiving it, and the root waits only for chunks
// that their senders send unconditionally once their reduce-scatter is
// done.
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "reduce_scatter_schedule.hpp"
#include "ring_reduce_scatter.hpp"
#include "ring_schedule.hpp"

namespace coll {

Task reduce_scatter_gather_reduce(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  std::vector<size_t> off(size_t(n) + 1);
  for (int i = 0; i <= n; ++i)
    off[size_t(i)] = i < n ? ring::segment(a.count, n, i).offset : a.count;
  const auto* in = static_cast<const char*>(a.sendbuf);
  Scratch scratch;
  if (r != a.root) scratch.allocate(ch, a.count * es);
  char* acc = r == a.root ? static_cast<char*>(a.recvbuf) : scratch.get();
  co_await ring_reduce_scatter_steps(ch, a, off, in, acc, acc + off[size_t(r)] * es);

  auto segment = [&](int i) { return (off[size_t(i) + 1] - off[size_t(i)]) * es; };
  if (r != a.root) {
    co_await send_bytes(ch, a.root, acc + off[size_t(r)] * es, segment(r));
    co_await ch.flush();  // the scratch was a source of sends
    co_return;
  }
  // The segments arrive over partial results that were sent from recvbuf.
  co_await ch.flush();
  for (int i = 0; i < n; ++i)
    if (i != r) co_await recv_bytes(ch, i, segment(i), CopyTo{acc + off[size_t(i)] * es});
}

}  // namespace coll
