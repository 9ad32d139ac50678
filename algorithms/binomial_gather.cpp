// Binomial-tree gather, for small blocks: ceil(log2 n) hops to the root
// instead of n - 1 messages into it (gather_schedule.hpp). Each rank
// collects the blocks of its subtree, a run of ranks relative to the root,
// in relative order in a scratch buffer (its own first, then each child's
// run as it arrives, smallest subtree first), and sends the run to its
// parent; the root receives each child's run straight into recvbuf, cut
// where it wraps around absolute rank 0. Leaves send their block from
// sendbuf.
//
// Deadlock freedom: data only moves up the tree, and a rank sends only
// once it has received everything from its children. Order the work by
// (height of the sender, chunk): a receive waits for a child's send, which
// has a smaller height; a send waits for the release of an earlier chunk
// on the same pair, which the parent makes right after receiving it. Every
// rank's program follows that order (it receives from all its children,
// one after the other, before it sends).
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "gather_schedule.hpp"

namespace coll {

Task binomial_gather(Channel& ch, const Args& a) {
  const int n = ch.size(), root = a.root;
  const int v = binomial::relative(ch.rank(), root, n);
  const size_t block = a.bytes;
  const gather::BlockRun mine = gather::subtree_run(v, n);
  const std::vector<int> kids = binomial::children(v, n);
  auto rank_of = [&](int u) { return binomial::absolute(u, root, n); };

  if (v == 0) {
    auto* out = static_cast<char*>(a.recvbuf);
    if (a.sendbuf != out + size_t(root) * block)
      std::memcpy(out + size_t(root) * block, a.sendbuf, block);
    for (int kid : kids) {
      const gather::BlockRun run = gather::subtree_run(kid, n);
      for (const gather::Piece& p : gather::pieces(run.lo, run.hi, root, n))
        co_await recv_bytes(ch, rank_of(kid), size_t(p.blocks) * block,
                            CopyTo{out + size_t(p.first) * block});
    }
    co_return;
  }
  const int parent = rank_of(binomial::parent(v));
  const char* src = static_cast<const char*>(a.sendbuf);
  Scratch scratch;
  if (!kids.empty()) {
    scratch.allocate(ch, size_t(mine.hi - mine.lo) * block);
    std::memcpy(scratch.get(), a.sendbuf, block);
    for (int kid : kids) {
      const gather::BlockRun run = gather::subtree_run(kid, n);
      char* at = scratch.get() + size_t(run.lo - v) * block;
      for (const gather::Piece& p : gather::pieces(run.lo, run.hi, root, n))
        co_await recv_bytes(ch, rank_of(kid), size_t(p.blocks) * block,
                            CopyTo{at + size_t(p.offset) * block});
    }
    src = scratch.get();
  }
  for (const gather::Piece& p : gather::pieces(mine.lo, mine.hi, root, n))
    co_await send_bytes(ch, parent, src + size_t(p.offset) * block, size_t(p.blocks) * block);
  if (scratch.get()) co_await ch.flush();  // the scratch was a source of sends
}

}  // namespace coll
