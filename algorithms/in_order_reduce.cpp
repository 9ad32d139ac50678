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
// Two shapes, the same association, so the same bits:
//   - small: recursive doubling itself, on the whole vector (into scratch
//     at every rank for reduce, which keeps the root's result). It moves
//     the whole vector log2 p times.
//   - from kByOwnerBytes (and for reduce_scatter(_block) always): by owner
//     (owner_schedule.hpp). Each rank gets every rank's contribution to its
//     block and combines them itself in the tree's order (tree_rows), then
//     the results go where the call wants them: a ring's bytes.
//
// Deadlock freedom: that of recursive_doubling_allreduce.cpp, or
// owner_schedule.hpp's; every rank takes the same shape (from the count and
// the rank count).
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "owner_schedule.hpp"

namespace coll {
namespace {

// From this many bytes of the vector, allreduce and reduce go by owner.
constexpr size_t kByOwnerBytes = 65536;

bool by_owner(const Args& a, int n) {
  return a.count >= size_t(n) && a.count * a.elem_size >= kByOwnerBytes;
}

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

// Whole-input allreduce, then the root keeps it.
Task whole_reduce(Channel& ch, const Args& a) {
  Scratch result(ch, a.count * a.elem_size);
  co_await allreduce_into(ch, a, a.count, result.get());
  if (ch.rank() == a.root) std::memcpy(a.recvbuf, result.get(), a.count * a.elem_size);
}

}  // namespace

Task in_order_allreduce(Channel& ch, const Args& a) {
  return by_owner(a, ch.size()) ? allreduce_by_owner(ch, a, tree_rows)
                                : recursive_doubling_allreduce(ch, a);
}

// Recursive doubling's synchronous form where the coroutine would run
// recursive doubling: the rank that takes it and the one that does not
// (it hands over to steps_from, or to the coroutine from the start) must
// run one schedule. Not where the coroutine goes by owner.
bool in_order_allreduce_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return !by_owner(a, ch.size()) && recursive_doubling_allreduce_now(ch, a, polls, rest);
}

Task in_order_reduce(Channel& ch, const Args& a) {
  return by_owner(a, ch.size()) ? reduce_by_owner(ch, a, tree_rows) : whole_reduce(ch, a);
}

Task in_order_reduce_scatter_block(Channel& ch, const Args& a) {
  return reduce_scatter_block_by_owner(ch, a, tree_rows);
}

Task in_order_reduce_scatter(Channel& ch, const Args& a) {
  return reduce_scatter_by_owner(ch, a, tree_rows);
}

}  // namespace coll
