// Reductions in one order fixed by the number of ranks: for non-commutative
// user operators (coll_op_create with commute = 0), which MPI applies in
// rank order, x0 op x1 op ... op x(n-1), and under COLL_REPRODUCIBLE=order
// for every order-sensitive reduction (floating-point SUM and PROD, user
// operators), whose bits must not depend on the size, algorithm, chunk or
// transport.
//
// The order: recursive doubling's (recursive_doubling_allreduce.cpp: its
// steps go m = 1, 2, 4, ..., so every reduction joins two runs of
// consecutive exchange ranks, the lower run's operand first, after the
// ranks beyond the largest power of two fold into the rank above): a
// balanced tree over the exchange ranks in rank order. Why not the table's
// algorithms: the binomial reduce's tree is rooted at the root, so its runs
// of relative ranks wrap past n - 1 to 0 for any other root;
// reduce_scatter_gather and recursive halving (reduce, and
// reduce_scatter(_block)) pair exchange ranks v and v ^ m from the largest
// m down; the ring's blocks start at rank i + 1 and wrap. Each would give a
// permuted product, or other bits.
//
// reduce: recursive doubling itself, on the whole vector into scratch at
// every rank, and the root keeps its result (it moves the whole vector
// log2 p times). reduce_scatter(_block): by owner (owner_schedule.hpp):
// each rank gets every rank's contribution to its block and combines them
// itself in the tree's order (tree_rows) - a ring's bytes, in one step.
// By owner was measured for allreduce and reduce too, and lost to
// recursive doubling from 64 KiB to 4 MiB at np 2 and 4 (1.6-2.2x the
// default where recursive doubling is 0.9-1.5x: bench/reproducible_cost.sh,
// 2026-12-06): its three steps each copy through scratch.
//
// Deadlock freedom: that of recursive_doubling_allreduce.cpp, or
// owner_schedule.hpp's.
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "owner_schedule.hpp"

namespace coll {
namespace {

// The rows combined as recursive doubling does, for every element: the
// ranks below 2 * extra fold in pairs (2v, 2v + 1), the even one's
// operand first; then the pof2 exchange ranks' values meet in a balanced
// tree, the lower run first. The reductions write the lower operand's row
// (Reducer allows the destination to be an operand).
void tree_rows(const Args& a, char* rows, int n, size_t count, void* out) {
  const size_t bytes = count * a.elem_size;
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int extra = n - pof2;
  std::vector<char*> v(size_t(pof2), nullptr);
  for (int x = 0; x < pof2; ++x) {
    if (x < extra) {
      char* even = rows + size_t(2 * x) * bytes;
      a.reduce(even, even, even + bytes, count);
      v[size_t(x)] = even;
    } else {
      v[size_t(x)] = rows + size_t(x + extra) * bytes;
    }
  }
  for (int m = 1; m < pof2; m *= 2)
    for (int x = 0; x < pof2; x += 2 * m)
      a.reduce(m * 2 == pof2 ? out : v[size_t(x)], v[size_t(x)], v[size_t(x + m)], count);
  if (pof2 == 1) std::memcpy(out, v[0], bytes);
}

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

}  // namespace

Task in_order_reduce(Channel& ch, const Args& a) {
  Scratch result(ch, a.count * a.elem_size);
  co_await allreduce_into(ch, a, a.count, result.get());
  if (ch.rank() == a.root) std::memcpy(a.recvbuf, result.get(), a.count * a.elem_size);
}

Task in_order_reduce_scatter_block(Channel& ch, const Args& a) {
  return reduce_scatter_block_by_owner(ch, a, tree_rows);
}

Task in_order_reduce_scatter(Channel& ch, const Args& a) {
  return reduce_scatter_by_owner(ch, a, tree_rows);
}

}  // namespace coll
