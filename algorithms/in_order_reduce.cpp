// Reduce and reduce-scatter for non-commutative user operators
// (coll_op_create with commute = 0), which MPI applies in rank order:
// x0 op x1 op ... op x(n-1).
//
// Why not the table's algorithms: the binomial reduce's tree is rooted at
// the root, so its runs of relative ranks wrap past n - 1 to 0 for any
// other root; reduce_scatter_gather and recursive halving (reduce, and
// reduce_scatter(_block)) pair exchange ranks v and v ^ m from the largest
// m down, so a rank's first partial joins ranks p/2 apart, not neighbours;
// the ring's blocks start at rank i + 1 and wrap. Each would give a
// permuted product. The recursive-doubling allreduce keeps the order
// (recursive_doubling_allreduce.cpp: its steps go m = 1, 2, 4, ..., so
// every reduction joins two runs of consecutive exchange ranks, the lower
// run's operand first, and the folded ranks fold into the rank above:
// exchange ranks stand for runs of ranks in rank order). So these run it
// on the whole input into scratch at every rank and keep what the call
// wants: the root's result, or this rank's block. That moves the whole
// vector log2 p times where the commutative algorithms move about a
// vector in all; MPICH also falls back to whole-vector exchanges for
// non-commutative reduce-scatter.
//
// Deadlock freedom: that of recursive_doubling_allreduce.cpp; nothing is
// sent after it.
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {
namespace {

// The reduction of every rank's count elements at sendbuf, into result.
Task allreduce_into(Channel& ch, const Args& a, size_t count, char* result) {
  Args whole = a;  // lives in this frame while the allreduce runs
  whole.recvbuf = result;
  whole.count = count;
  whole.in_place = false;
  co_await recursive_doubling_allreduce(ch, whole);
  // The allreduce sent from result and from sendbuf (which is recvbuf in
  // place): both change or go next, after the writes are done.
  co_await ch.flush();
}

// Whole-input allreduce, then `len` bytes at `at` of it to recvbuf.
Task keep_part(Channel& ch, const Args& a, size_t total, size_t at, size_t len, bool keep) {
  const size_t es = a.elem_size;
  Scratch result(ch, total * es);
  co_await allreduce_into(ch, a, total, result.get());
  if (keep && len > 0) std::memcpy(a.recvbuf, result.get() + at, len);
}

}  // namespace

Task in_order_reduce(Channel& ch, const Args& a) {
  return keep_part(ch, a, a.count, 0, a.count * a.elem_size, ch.rank() == a.root);
}

Task in_order_reduce_scatter_block(Channel& ch, const Args& a) {
  const size_t block = a.count * a.elem_size;
  return keep_part(ch, a, a.count * size_t(ch.size()), size_t(ch.rank()) * block, block, true);
}

Task in_order_reduce_scatter(Channel& ch, const Args& a) {
  size_t before = 0;
  for (int i = 0; i < ch.rank(); ++i) before += a.recvcounts[i];
  // a.count is the sum of recvcounts (the descriptor's check).
  return keep_part(ch, a, a.count, before * a.elem_size, a.recvcounts[ch.rank()] * a.elem_size,
                   true);
}

}  // namespace coll
