// Binomial-tree reduce, for small and medium messages: ceil(log2 n) hops to
// the root over a binomial tree of ranks relative to the root
// (binomial_schedule.hpp), in slot-sized chunks. Each rank reduces its
// children's partial results into its own input, smallest subtree first,
// and sends the sum on; a chunk moves up as soon as it is complete, so the
// levels of the tree work on different chunks at once. Leaves send their
// input as it is; inner ranks other than the root reduce into a scratch
// buffer (their recvbuf is not significant), the root into recvbuf.
//
// Deterministic: the tree, and so the order of every reduction, depends
// only on the rank count and the root.
//
// Deadlock freedom: data only moves up the tree. Order the work by (chunk,
// height in the tree): a receive waits for the child's send of the same
// chunk, one level further down; a send waits for the release of an earlier
// chunk on the same pair, which the parent makes right after its receive
// of that chunk. Both have smaller keys, and every rank's program follows
// the order.
#include <algorithm>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {

Task binomial_reduce(Channel& ch, const Args& a) {
  const int n = ch.size();
  const int v = binomial::relative(ch.rank(), a.root, n);
  const int parent = v == 0 ? -1 : binomial::absolute(binomial::parent(v), a.root, n);
  std::vector<int> kids = binomial::children(v, n);
  for (int& kid : kids) kid = binomial::absolute(kid, a.root, n);
  const size_t es = a.elem_size;
  const auto* in = static_cast<const char*>(a.sendbuf);
  Scratch scratch;
  if (parent >= 0 && !kids.empty()) scratch.allocate(ch, a.count * es);
  char* acc = parent < 0 ? static_cast<char*>(a.recvbuf) : scratch.get();
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);

  for (size_t off = 0; off < a.count; off += chunk_elems) {
    const size_t len = std::min(chunk_elems, a.count - off);
    const char* sum = in + off * es;
    for (int kid : kids) {
      const void* data = co_await ch.recv(kid, len * es);
      // Our operand first: the child's subtree holds higher relative ranks.
      a.reduce(acc + off * es, sum, data, len);
      co_await ch.release(kid);
      sum = acc + off * es;
    }
    // (The root has children: algorithms run on two ranks or more.)
    if (parent >= 0) co_await ch.send(parent, sum, len * es);
  }
  if (scratch.get()) co_await ch.flush();  // the scratch was a source of sends
}

// The synchronous form (NowFn) where the data fits a slot, at a leaf and at
// the root (an inner rank needs a scratch buffer: it runs the coroutine,
// which takes the same steps). A leaf waits for its credit and sends its
// input; the root waits until every child's message is there, then reduces
// them in the coroutine's order. Either does nothing if what it waits for
// does not come within the polls (neither waits for this rank).
bool binomial_reduce_now(Channel& ch, const Args& a, Polls& polls, Task& /*rest: never*/) {
  const size_t bytes = a.count * a.elem_size;
  if (bytes > ch.slot_bytes()) return false;
  const int n = ch.size();
  const int v = binomial::relative(ch.rank(), a.root, n);
  const int limit = v == 0 ? binomial::ceil_pow2(n) : binomial::lowest_bit(v);
  const bool leaf = v != 0 && (limit == 1 || v + 1 >= n);
  if (leaf) {
    const int parent = binomial::absolute(binomial::parent(v), a.root, n);
    while (!ch.can_send(parent))
      if (!polls.next()) return false;
    ch.send_now(parent, a.sendbuf, bytes);
    return true;
  }
  if (v != 0) return false;
  // The children, smallest subtree first (binomial::children, unallocated).
  auto kid = [&](int mask) { return binomial::absolute(mask, a.root, n); };
  for (int mask = 1; mask < limit && mask < n; mask <<= 1)
    while (!ch.message(kid(mask), bytes))
      if (!polls.next()) return false;
  const void* sum = a.sendbuf;
  for (int mask = 1; mask < limit && mask < n; mask <<= 1) {
    a.reduce(a.recvbuf, sum, ch.message(kid(mask), bytes), a.count);
    ch.release_now(kid(mask));
    sum = a.recvbuf;
  }
  return true;
}

}  // namespace coll
