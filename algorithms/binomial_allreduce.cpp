// Binomial allreduce, for small messages: a binomial-tree reduction to rank
// 0, then a binomial-tree broadcast of the result from rank 0, both in
// slot-sized chunks. 2 log2(n) hops, and every element is reduced at one
// place (rank 0, from the partial sums of the subtrees) and copied
// everywhere, so the result is bitwise identical on every rank.
//
// Deadlock freedom: in the reduction data only moves up the tree, chunk by
// chunk, and in the broadcast only down. Order the work by (phase, chunk,
// distance from the sending end of the tree): a receive waits for the send
// of the same chunk one level nearer the leaves (reduction) or the root
// (broadcast), and a send waits for the release of an earlier chunk on the
// same pair, which has a smaller key; each rank's program follows that order.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "channel.hpp"

namespace coll {

Task binomial_allreduce(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  auto* out = static_cast<char*>(a.recvbuf);
  const auto* in = static_cast<const char*>(a.sendbuf);
  const int parent = binomial::parent(r);
  const std::vector<int> kids = binomial::children(r, n);
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);

  for (size_t off = 0; off < a.count; off += chunk_elems) {
    const size_t len = std::min(chunk_elems, a.count - off);
    const char* acc = in + off * es;
    for (int kid : kids) {
      const void* data = co_await ch.recv(kid, len * es);
      a.reduce(out + off * es, acc, data, len);
      co_await ch.release(kid);
      acc = out + off * es;
    }
    if (parent >= 0) co_await ch.send(parent, acc, len * es);
  }
  // The partial sums just sent from recvbuf (or from sendbuf, if it is
  // recvbuf) are overwritten by the broadcast: Channel::send wants them
  // unchanged until flush().
  co_await ch.flush();
  for (size_t off = 0; off < a.count; off += chunk_elems) {
    const size_t len = std::min(chunk_elems, a.count - off);
    if (parent >= 0) {
      const void* data = co_await ch.recv(parent, len * es);
      std::memcpy(out + off * es, data, len * es);
      co_await ch.release(parent);
    }
    for (auto kid = kids.rbegin(); kid != kids.rend(); ++kid)
      co_await ch.send(*kid, out + off * es, len * es);
  }
}

}  // namespace coll
