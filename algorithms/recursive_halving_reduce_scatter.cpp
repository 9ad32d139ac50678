// Recursive-halving reduce-scatter, for small and medium messages
// (reduce_scatter_schedule.hpp; MPICH's choice for commutative operators):
// log2(p) steps among the p exchange ranks (the largest power of two
// <= n), each trading half of what a rank still holds with a partner, the
// ranks beyond p folded in first and served their block last. Every rank
// sends about (p - 1) / p of the input in log2(p) messages instead of the
// ring's n - 1. Serves reduce_scatter_block and reduce_scatter (any block
// sizes, empty ones included).
//
// Partial results live in a scratch copy of the input's layout, or in
// recvbuf itself when the call is in place (the result then moves to its
// start).
//
// Deadlock freedom: as in rabenseifner_allreduce.cpp. At each step both
// partners send the chunks of what they give and receive those of what they
// keep (each gives what the other keeps: the same chunks), chunk c of one
// before chunk c of the other; order the work by (fold, step, chunk, send
// before receive, unfold). A receive waits for the partner's send with the
// same key, a send for the release of an earlier message on the same pair,
// which has a smaller key; every rank's program follows that order.
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "reduce_scatter_schedule.hpp"

namespace coll {
namespace {

Task halve(Channel& ch, const Args& a, const size_t* counts, size_t uniform) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const std::vector<size_t> off = reduce_scatter::offsets(counts, uniform, n);
  const size_t total = off[size_t(n)] * es;
  const binomial::Doubling d = binomial::doubling(n);
  const int v = binomial::doubling_rank(r, d);
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  auto bytes_at = [&](int block) { return off[size_t(block)] * es; };
  auto block_len = [&](int block) { return bytes_at(block + 1) - bytes_at(block); };

  if (v < 0) {  // folded: hand the input to r + 1, get our block back
    co_await send_bytes(ch, r + 1, in, total);
    co_await ch.flush();  // in place, the result lands on what was sent
    co_await recv_bytes(ch, r + 1, block_len(r), CopyTo{out});
    co_return;
  }
  Scratch scratch;
  if (!a.in_place) scratch.allocate(ch, total);
  char* acc = a.in_place ? out : scratch.get();
  const char* mine = in;
  const bool takes_fold = r < 2 * d.extra;
  if (takes_fold) {
    co_await recv_bytes(ch, r - 1, total, [&](size_t at, const void* data, size_t len) {
      a.reduce(acc + at, data, in + at, len / es);  // r - 1's operand first
    });
    mine = acc;
  }
  // Where segment k of the exchange begins, in bytes.
  auto seg = [&](int k) { return bytes_at(reduce_scatter::segment_first_block(k, d)); };
  for (int m = d.pof2 / 2; m >= 1; m /= 2) {
    const int peer = binomial::doubling_to_rank(v ^ m, d);
    const bool lower = (v & m) == 0;
    const binomial::Window give = binomial::halving_give(v, m), keep = binomial::halving_keep(v, m);
    const size_t keep_at = seg(keep.lo);
    const char* from = mine;
    co_await exchange(ch, peer, from + seg(give.lo), seg(give.hi) - seg(give.lo), peer,
                      seg(keep.hi) - keep_at, [&](size_t at, const void* data, size_t len) {
                        const char* own = from + keep_at + at;
                        a.reduce(acc + keep_at + at, lower ? own : data, lower ? data : own,
                                 len / es);
                      });
    mine = acc;
  }
  // Segment v is reduced, in acc: serve the folded rank, then our block.
  if (takes_fold) co_await send_bytes(ch, r - 1, acc + bytes_at(r - 1), block_len(r - 1));
  if (block_len(r) > 0 && acc + bytes_at(r) != out) {
    if (a.in_place) co_await ch.flush();  // our block moves over what was sent from recvbuf
    std::memmove(out, acc + bytes_at(r), block_len(r));
  }
  if (scratch.get()) co_await ch.flush();  // the scratch was a source of sends
}

}  // namespace

Task recursive_halving_reduce_scatter_block(Channel& ch, const Args& a) {
  return halve(ch, a, nullptr, a.count);
}

Task recursive_halving_reduce_scatter(Channel& ch, const Args& a) {
  return halve(ch, a, a.recvcounts, 0);
}

}  // namespace coll
