// Binomial-tree scatter, for small blocks: ceil(log2 n) hops from the root
// instead of n - 1 messages out of it (gather_schedule.hpp). The root sends
// each child the blocks of its subtree, a run of ranks relative to the
// root, from sendbuf (cut where the run wraps around absolute rank 0),
// the biggest subtree first; an inner rank receives its run in relative
// order into a scratch buffer, keeps its own block and passes each child
// its part. Leaves receive their block straight into recvbuf.
//
// Deadlock freedom: data only moves down the tree, and a rank sends only
// once it has received its whole run. Order the work by (depth of the
// sender, chunk): a receive waits for the parent's send, which has a
// smaller depth; a send waits for the release of an earlier chunk on the
// same pair, which the child makes right after receiving it. Every rank's
// program follows that order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "gather_schedule.hpp"

namespace coll {

Task binomial_scatter(Channel& ch, const Args& a) {
  const int n = ch.size(), root = a.root;
  const int v = binomial::relative(ch.rank(), root, n);
  const size_t block = a.bytes;
  const gather::BlockRun mine = gather::subtree_run(v, n);
  std::vector<int> kids = binomial::children(v, n);
  std::reverse(kids.begin(), kids.end());  // the biggest subtree has the longest way
  auto rank_of = [&](int u) { return binomial::absolute(u, root, n); };
  auto* out = static_cast<char*>(a.recvbuf);

  if (v == 0) {
    const auto* in = static_cast<const char*>(a.sendbuf);
    for (int kid : kids) {
      const gather::BlockRun run = gather::subtree_run(kid, n);
      for (const gather::Piece& p : gather::pieces(run.lo, run.hi, root, n))
        co_await send_bytes(ch, rank_of(kid), in + size_t(p.first) * block,
                            size_t(p.blocks) * block);
    }
    if (out != in + size_t(root) * block) std::memcpy(out, in + size_t(root) * block, block);
    co_return;
  }
  const int parent = rank_of(binomial::parent(v));
  if (kids.empty()) {
    for (const gather::Piece& p : gather::pieces(mine.lo, mine.hi, root, n))
      co_await recv_bytes(ch, parent, size_t(p.blocks) * block,
                          CopyTo{out + size_t(p.offset) * block});
    co_return;
  }
  Scratch scratch(ch, size_t(mine.hi - mine.lo) * block);
  for (const gather::Piece& p : gather::pieces(mine.lo, mine.hi, root, n))
    co_await recv_bytes(ch, parent, size_t(p.blocks) * block,
                        CopyTo{scratch.get() + size_t(p.offset) * block});
  for (int kid : kids) {
    const gather::BlockRun run = gather::subtree_run(kid, n);
    const char* at = scratch.get() + size_t(run.lo - v) * block;
    for (const gather::Piece& p : gather::pieces(run.lo, run.hi, root, n))
      co_await send_bytes(ch, rank_of(kid), at + size_t(p.offset) * block,
                          size_t(p.blocks) * block);
  }
  std::memcpy(out, scratch.get(), block);
  co_await ch.flush();  // the scratch was a source of sends
}

}  // namespace coll
