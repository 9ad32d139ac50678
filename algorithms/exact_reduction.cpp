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
// Deadlock freedom: owner_schedule.hpp's (the small shape is one allgather
// or gather, its algorithm's argument; every rank takes the same shape,
// from the count and the rank count).
#include "exact_sum.hpp"
#include "owner_schedule.hpp"

namespace coll {
namespace {

// Below this many bytes of the others' contributions per rank, an
// allreduce or reduce gathers them whole.
constexpr size_t kSmallBytes = 16384;

bool small(const Args& a, int n) {
  return a.count < size_t(n) || a.count * a.elem_size * size_t(n - 1) <= kSmallBytes;
}

void exact_rows(const Args& a, char* rows, int n, size_t count, void* out) {
  exact_sum_rows(a.datatype, rows, size_t(n), count, count, out);
}

// Every contribution to every element, here: n rows of a.count.
Task exact_gathered(Channel& ch, const Args& a, bool allgather) {
  const int n = ch.size();
  const bool here = allgather || ch.rank() == a.root;
  Scratch all(ch, here ? a.count * size_t(n) * a.elem_size : 0);
  Args g;
  g.sendbuf = a.sendbuf;
  g.recvbuf = all.get();
  g.count = a.count;
  g.datatype = a.datatype;
  g.root = a.root;
  co_await run_step(ch, allgather ? Coll::kAllgather : Coll::kGather, g);
  if (here) exact_sum_rows(a.datatype, all.get(), size_t(n), a.count, a.count, a.recvbuf);
}

}  // namespace

Task exact_allreduce(Channel& ch, const Args& a) {
  return small(a, ch.size()) ? exact_gathered(ch, a, true) : allreduce_by_owner(ch, a, exact_rows);
}

Task exact_reduce(Channel& ch, const Args& a) {
  return small(a, ch.size()) ? exact_gathered(ch, a, false) : reduce_by_owner(ch, a, exact_rows);
}

Task exact_reduce_scatter_block(Channel& ch, const Args& a) {
  return reduce_scatter_block_by_owner(ch, a, exact_rows);
}

Task exact_reduce_scatter(Channel& ch, const Args& a) {
  return reduce_scatter_by_owner(ch, a, exact_rows);
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
