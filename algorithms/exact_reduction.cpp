// Exact sums (COLL_REPRODUCIBLE=exact): allreduce, reduce and
// reduce_scatter(_block) of float, double, float16 and bfloat16 SUM whose
// bits depend on the contributions alone - the same at any number of
// ranks, for any algorithm, chunk, slot size or transport
// (libcoll/exact_sum.hpp has the definition and the arithmetic).
//
// The definition needs every contribution to an element in one place (the
// largest one fixes the grid), and partial sums that travel would have to
// travel wide (128 bits a double). So no partial sum travels: the raw
// contributions go to the rank that owns the element, which sums them
// (exact_sum_rows), and the results go where the call wants them.
//   - reduce_scatter(_block): an alltoallv of the contributions, each
//     rank's block to its owner, then each rank sums its own block: the
//     bytes of a linear reduce-scatter, in one step.
//   - allreduce: the same on blocks of about count / n elements, then an
//     allgatherv of the results: the bytes of a ring allreduce. Small
//     vectors (below kSmallBytes of contributions per rank beside its own):
//     an allgather of every contribution, and every rank sums all of them:
//     one step, where the split costs two.
//   - reduce: the same two shapes, ending in a gather(v) to the root.
// Each moving step runs the table's algorithm for that collective and
// size (the contributions are the caller's datatype, moved as they are).
//
// Deadlock freedom: the steps run one after the other, each that of its
// algorithm's file; every rank runs the same steps with the same
// algorithms (chosen from the count, the datatype and the rank count,
// which every rank has alike), and flushes its sends before the buffers
// they read are written or freed.
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "coll/coll.h"
#include "exact_sum.hpp"

namespace coll {
namespace {

// Below this many bytes of the others' contributions per rank, an
// allreduce or reduce gathers them whole.
constexpr size_t kSmallBytes = 16384;

bool small(const Args& a, int n) {
  return a.count < size_t(n) || a.count * a.elem_size * size_t(n - 1) <= kSmallBytes;
}

// Runs collective c with `k` (its raw fields set) on ch: the descriptor's
// check fills the derived fields, the table picks the algorithm.
Task run_step(Channel& ch, Coll c, Args& k) {
  collective_info(c).check(k, ch.size(), ch.rank());
  co_await choose_algorithm(c, ch.size(), k.select_bytes).run(ch, k);
  co_await ch.flush();  // what it sent from is written or freed next
}

// Counts and displacements, in elements, of a vector split among n ranks.
struct Split {
  std::vector<size_t> counts, displs;
  explicit Split(int n) : counts(size_t(n)), displs(size_t(n)) {}
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

// Each rank's contributions to the elements `blocks` gives rank j go to
// j; this rank's block's contributions arrive as n rows of its count in
// `rows` (row p from rank p), and their exact sums go to `out`.
Task sum_own_block(Channel& ch, const Args& a, const Split& blocks, void* out) {
  const int n = ch.size(), me = ch.rank();
  const size_t mine = blocks.counts[size_t(me)];
  Scratch rows(ch, mine * size_t(n) * a.elem_size);
  Split from(n);
  std::vector<size_t> row_counts(size_t(n), mine);
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
  if (mine > 0) exact_sum_rows(a.datatype, rows.get(), size_t(n), mine, mine, out);
}

}  // namespace

Task exact_allreduce(Channel& ch, const Args& a) {
  const int n = ch.size();
  if (small(a, n)) {
    Scratch all(ch, a.count * size_t(n) * a.elem_size);
    Args g;
    g.sendbuf = a.sendbuf;
    g.recvbuf = all.get();
    g.count = a.count;
    g.datatype = a.datatype;
    co_await run_step(ch, Coll::kAllgather, g);
    exact_sum_rows(a.datatype, all.get(), size_t(n), a.count, a.count, a.recvbuf);
    co_return;
  }
  Split blocks(n);
  blocks.even(a.count);
  const size_t me = size_t(ch.rank());
  // In place, sendbuf is recvbuf: the alltoallv has read all of it (and
  // flushed) before this rank's block of the result is written there.
  co_await sum_own_block(ch, a, blocks, static_cast<char*>(a.recvbuf) + blocks.displs[me] * a.elem_size);
  Args g;
  g.sendbuf = COLL_IN_PLACE;
  g.recvbuf = a.recvbuf;
  g.recvcounts = blocks.counts.data();
  g.rdispls = blocks.displs.data();
  g.datatype = a.datatype;
  co_await run_step(ch, Coll::kAllgatherv, g);
}

Task exact_reduce(Channel& ch, const Args& a) {
  const int n = ch.size();
  const bool root = ch.rank() == a.root;
  if (small(a, n)) {
    Scratch all(ch, root ? a.count * size_t(n) * a.elem_size : 0);
    Args g;
    g.sendbuf = a.sendbuf;
    g.recvbuf = all.get();
    g.count = a.count;
    g.datatype = a.datatype;
    g.root = a.root;
    co_await run_step(ch, Coll::kGather, g);
    if (root) exact_sum_rows(a.datatype, all.get(), size_t(n), a.count, a.count, a.recvbuf);
    co_return;
  }
  Split blocks(n);
  blocks.even(a.count);
  const size_t me = size_t(ch.rank());
  Scratch sum(ch, blocks.counts[me] * a.elem_size);
  co_await sum_own_block(ch, a, blocks, sum.get());
  Args g;
  g.sendbuf = sum.get();
  g.sendcount = blocks.counts[me];
  g.recvbuf = root ? a.recvbuf : nullptr;
  g.recvcounts = blocks.counts.data();
  g.rdispls = blocks.displs.data();
  g.datatype = a.datatype;
  g.root = a.root;
  co_await run_step(ch, Coll::kGatherv, g);
}

Task exact_reduce_scatter_block(Channel& ch, const Args& a) {
  Split blocks(ch.size());
  blocks.even(a.count * size_t(ch.size()));
  co_await sum_own_block(ch, a, blocks, a.recvbuf);
}

Task exact_reduce_scatter(Channel& ch, const Args& a) {
  Split blocks(ch.size());
  blocks.of(a.recvcounts);
  co_await sum_own_block(ch, a, blocks, a.recvbuf);
}

// One rank: the definition applied to its own contributions (a copy for
// every finite value; NaN payloads become the quiet NaN, as at n ranks).
// At one rank every form's result is its whole input.
void exact_local(Coll, const Args& a) {
  exact_sum_rows(a.datatype, a.sendbuf, 1, a.count, a.count, a.recvbuf);
}

namespace {
const Algorithm kExact[] = {
    {"exact", exact_allreduce},
    {"exact", exact_reduce},
    {"exact", exact_reduce_scatter_block},
    {"exact", exact_reduce_scatter},
};
}  // namespace

const Algorithm* exact_algorithm(Coll c, const Args& a, int nranks) {
  if (!exact_sum_applies(a.datatype, a.op) || nranks >= (1 << 21)) return nullptr;
  switch (c) {
    case Coll::kAllreduce: return &kExact[0];
    case Coll::kReduce: return &kExact[1];
    case Coll::kReduceScatterBlock: return &kExact[2];
    case Coll::kReduceScatter: return &kExact[3];
    default: return nullptr;
  }
}

}  // namespace coll
