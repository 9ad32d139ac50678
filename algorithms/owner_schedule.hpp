// Reductions by owner, for the reproducible modes (exact_reduction.cpp,
// in_order_reduce.cpp): every rank's contributions to the elements rank j
// owns go to j raw (one alltoallv), and j combines the n rows it then holds
// in an order of its choosing - the association that the mode fixes - with
// no partial result on the way. Then the results go where the call wants
// them (an allgatherv, a gatherv, or nowhere for reduce_scatter). The bytes
// are a ring allreduce's; the reductions are each element's n - 1 at its
// owner, as in a ring.
//
// Deadlock freedom: the steps run one after the other, each that of its
// algorithm's file; every rank runs the same steps with the same
// algorithms (chosen from counts that every rank has alike), and flushes
// its sends before the buffers they read are written or freed.
#pragma once

#include <cstddef>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "coll/coll.h"

namespace coll {

// Runs collective c with `k` (its raw fields set) on ch: the descriptor's
// check fills the derived fields, the table picks the algorithm.
inline Task run_step(Channel& ch, Coll c, Args& k) {
  collective_info(c).check(k, ch.size(), ch.rank());
  co_await choose_algorithm(c, ch.size(), k.select_bytes).run(ch, k);
  co_await ch.flush();  // what it sent from is written or freed next
}

// Counts and displacements, in elements, of a vector split among n ranks.
struct Split {
  std::vector<size_t> counts, displs;
  explicit Split(int n) : counts(size_t(n)), displs(size_t(n)) {}
  // As evenly as can be: the first total % n ranks one more.
  void even(size_t total) {
    const size_t n = counts.size(), base = total / n, extra = total % n;
    for (size_t j = 0, at = 0; j < n; at += counts[j], ++j) {
      counts[j] = base + (j < extra ? 1 : 0);
      displs[j] = at;
    }
  }
  void of(const size_t* c) {
    for (size_t j = 0, at = 0; j < counts.size(); at += c[j], ++j) {
      counts[j] = c[j];
      displs[j] = at;
    }
  }
};

// Combines `rows` rows of `count` elements (row p: rank p's contribution,
// at rows + p * count elements) into out; may overwrite the rows.
using CombineRows = void (*)(const Args& a, char* rows, int n, size_t count, void* out);

// The contributions of a.sendbuf to the elements `blocks` gives each rank
// go to that rank; this rank's arrive as n rows and `combine` makes its
// block of the result in `out`.
inline Task reduce_own_block(Channel& ch, const Args& a, const Split& blocks, void* out,
                             CombineRows combine) {
  const int n = ch.size();
  const size_t mine = blocks.counts[size_t(ch.rank())];
  Scratch rows(ch, mine * size_t(n) * a.elem_size);
  Split from(n);
  const std::vector<size_t> row_counts(size_t(n), mine);
  from.of(row_counts.data());
  Args t;
  t.sendbuf = a.sendbuf;
  t.sendcounts = blocks.counts.data();
  t.sdispls = blocks.displs.data();
  t.recvbuf = rows.get();
  t.recvcounts = from.counts.data();
  t.rdispls = from.displs.data();
  t.datatype = a.datatype;
  co_await run_step(ch, Coll::kAlltoallv, t);
  if (mine > 0) combine(a, rows.get(), n, mine, out);
}

// Allreduce by owner: blocks of about count / n; in place, sendbuf is
// recvbuf, and the alltoallv has read all of it (and flushed) before this
// rank's block of the result is written there.
inline Task allreduce_by_owner(Channel& ch, const Args& a, CombineRows combine) {
  Split blocks(ch.size());
  blocks.even(a.count);
  const size_t me = size_t(ch.rank());
  co_await reduce_own_block(ch, a, blocks,
                            static_cast<char*>(a.recvbuf) + blocks.displs[me] * a.elem_size,
                            combine);
  Args g;
  g.sendbuf = COLL_IN_PLACE;
  g.recvbuf = a.recvbuf;
  g.recvcounts = blocks.counts.data();
  g.rdispls = blocks.displs.data();
  g.datatype = a.datatype;
  co_await run_step(ch, Coll::kAllgatherv, g);
}

// Reduce by owner: the blocks' results gathered at the root.
inline Task reduce_by_owner(Channel& ch, const Args& a, CombineRows combine) {
  Split blocks(ch.size());
  blocks.even(a.count);
  const size_t me = size_t(ch.rank());
  Scratch sum(ch, blocks.counts[me] * a.elem_size);
  co_await reduce_own_block(ch, a, blocks, sum.get(), combine);
  Args g;
  g.sendbuf = sum.get();
  g.sendcount = blocks.counts[me];
  g.recvbuf = ch.rank() == a.root ? a.recvbuf : nullptr;
  g.recvcounts = blocks.counts.data();
  g.rdispls = blocks.displs.data();
  g.datatype = a.datatype;
  g.root = a.root;
  co_await run_step(ch, Coll::kGatherv, g);
}

// reduce_scatter_block (each rank a.count) and reduce_scatter (recvcounts).
inline Task reduce_scatter_block_by_owner(Channel& ch, const Args& a, CombineRows combine) {
  Split blocks(ch.size());
  blocks.even(a.count * size_t(ch.size()));
  co_await reduce_own_block(ch, a, blocks, a.recvbuf, combine);
}
inline Task reduce_scatter_by_owner(Channel& ch, const Args& a, CombineRows combine) {
  Split blocks(ch.size());
  blocks.of(a.recvcounts);
  co_await reduce_own_block(ch, a, blocks, a.recvbuf, combine);
}

}  // namespace coll
