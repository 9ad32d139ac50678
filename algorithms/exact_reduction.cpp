// Exact sums (COLL_REPRODUCIBLE=exact): allreduce, reduce and
// reduce_scatter(_block) of float, double, float16 and bfloat16 SUM whose
// bits depend on the contributions alone - the same at any number of
// ranks, for any algorithm, chunk, slot size or transport
// (libcoll/exact_sum.hpp has the definition and the arithmetic).
//
// Each call is two reductions of integers, which no schedule can make
// inexact: every rank takes its elements' keys (the exponent of each
// element's magnitude) and the ranks agree on their MAX with an allreduce
// of 16-bit keys; each rank then puts its elements on the grid that key
// fixes, as 64- or 128-bit integers, the ranks SUM those with the
// collective's own algorithm (the table's choice for the integer vector's
// size: allreduce, reduce to the root, reduce_scatter(_block)), and each
// rank that gets a result rounds it once into the type. The cost against
// the default: a 2-byte allreduce per element and 2x (float, double) or 4x
// (16-bit types) the bytes in the reduction itself.
//
// Deadlock freedom: the calls' phases run one after the other, each that
// of its algorithm's file; every rank runs the same phases with the same
// algorithms (chosen from sizes that every rank computes alike: the
// vector's element count), and flushes its sends before the scratch they
// read goes away.
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "coll/coll.h"
#include "exact_sum.hpp"

namespace coll {
namespace {

// An integer reduction of `count` elements of `elem_size` bytes.
Args integer_args(const void* in, void* out, size_t count, size_t elem_size, Reducer r) {
  Args k;
  k.sendbuf = in;
  k.recvbuf = out;
  k.in_place = in == out;
  k.count = count;
  k.elem_size = elem_size;
  k.reduce = r;
  k.bytes = count * elem_size;
  k.select_bytes = k.bytes;
  return k;
}

Reducer fixed_reducer(int datatype) {
  if (const int dt = exact_fixed_datatype(datatype)) return Reducer{reduce_function(dt, COLL_SUM)};
  return Reducer{exact_sum_fixed128};
}

// Steps 1 and 2 for the `count` elements at a.sendbuf: keys agreed by
// every rank, and this rank's elements on their grid in `fixed`.
Task agree_and_fix(Channel& ch, const Args& a, size_t count, uint16_t* keys, char* fixed) {
  exact_keys(a.datatype, a.sendbuf, keys, count);
  const Args k = integer_args(keys, keys, count, sizeof *keys,
                              Reducer{reduce_function(COLL_UINT16, COLL_MAX)});
  co_await choose_algorithm(Coll::kAllreduce, ch.size(), k.select_bytes).run(ch, k);
  exact_to_fixed(a.datatype, a.sendbuf, keys, fixed, count);
}

// The whole-vector part that every form shares: keys and the integer
// vector (in.get()) of this rank's contributions.
struct Exact {
  Exact(Channel& ch, const Args& a, size_t count)
      : fsz(exact_fixed_size(a.datatype)), keys(ch, count * sizeof(uint16_t)), in(ch, count * fsz) {}
  uint16_t* key_at(size_t i) const { return reinterpret_cast<uint16_t*>(keys.get()) + i; }
  size_t fsz;
  Scratch keys, in;
};

}  // namespace

Task exact_allreduce(Channel& ch, const Args& a) {
  Exact e(ch, a, a.count);
  co_await agree_and_fix(ch, a, a.count, e.key_at(0), e.in.get());
  const Args s = integer_args(e.in.get(), e.in.get(), a.count, e.fsz, fixed_reducer(a.datatype));
  co_await choose_algorithm(Coll::kAllreduce, ch.size(), s.select_bytes).run(ch, s);
  co_await ch.flush();  // the sends read the scratch, freed next
  exact_from_fixed(a.datatype, e.in.get(), e.key_at(0), a.recvbuf, a.count);
}

Task exact_reduce(Channel& ch, const Args& a) {
  Exact e(ch, a, a.count);
  co_await agree_and_fix(ch, a, a.count, e.key_at(0), e.in.get());
  // Every rank gets a result buffer: a reduce algorithm may use it as its
  // work area at any rank.
  Scratch sum(ch, a.count * e.fsz);
  Args s = integer_args(e.in.get(), sum.get(), a.count, e.fsz, fixed_reducer(a.datatype));
  s.root = a.root;
  co_await choose_algorithm(Coll::kReduce, ch.size(), s.select_bytes).run(ch, s);
  co_await ch.flush();
  if (ch.rank() == a.root) exact_from_fixed(a.datatype, sum.get(), e.key_at(0), a.recvbuf, a.count);
}

// reduce_scatter(_block): the whole vector's keys (each rank converts all
// its contributions), the integer reduce_scatter, then this rank's block.
Task exact_reduce_scatter_block(Channel& ch, const Args& a) {
  const size_t total = a.count * size_t(ch.size());
  Exact e(ch, a, total);
  co_await agree_and_fix(ch, a, total, e.key_at(0), e.in.get());
  Scratch block(ch, a.count * e.fsz);
  Args s = integer_args(e.in.get(), block.get(), a.count, e.fsz, fixed_reducer(a.datatype));
  s.in_place = false;
  co_await choose_algorithm(Coll::kReduceScatterBlock, ch.size(), s.select_bytes).run(ch, s);
  co_await ch.flush();
  exact_from_fixed(a.datatype, block.get(), e.key_at(size_t(ch.rank()) * a.count), a.recvbuf,
                   a.count);
}

Task exact_reduce_scatter(Channel& ch, const Args& a) {
  Exact e(ch, a, a.count);  // a.count: the sum of recvcounts (the check)
  co_await agree_and_fix(ch, a, a.count, e.key_at(0), e.in.get());
  const size_t mine = a.recvcounts[ch.rank()];
  size_t before = 0;
  for (int i = 0; i < ch.rank(); ++i) before += a.recvcounts[i];
  Scratch block(ch, mine * e.fsz);
  Args s = integer_args(e.in.get(), block.get(), a.count, e.fsz, fixed_reducer(a.datatype));
  s.in_place = false;
  s.recvcounts = a.recvcounts;
  s.bytes = mine * e.fsz;
  s.select_bytes = a.count * e.fsz / size_t(ch.size());  // the mean block, as the check
  co_await choose_algorithm(Coll::kReduceScatter, ch.size(), s.select_bytes).run(ch, s);
  co_await ch.flush();
  if (mine > 0) exact_from_fixed(a.datatype, block.get(), e.key_at(before), a.recvbuf, mine);
}

// One rank: the definition applied to its own contributions (a copy for
// every finite value; NaN payloads become the quiet NaN, as at n ranks).
void exact_local(Coll c, const Args& a) {
  (void)c;  // at one rank each form's result is its whole input
  const size_t fsz = exact_fixed_size(a.datatype);
  std::vector<uint16_t> keys(a.count);
  std::vector<char> fixed(a.count * fsz);
  exact_keys(a.datatype, a.sendbuf, keys.data(), a.count);
  exact_to_fixed(a.datatype, a.sendbuf, keys.data(), fixed.data(), a.count);
  exact_from_fixed(a.datatype, fixed.data(), keys.data(), a.recvbuf, a.count);
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
