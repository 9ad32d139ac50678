// Linear reduce-scatter, for small vectors on few ranks: every rank writes
// block i of its input straight to rank i, for every other rank i, and
// reduces the n - 1 pieces of its own block that it receives with its own,
// one slot-sized chunk of every block per round (a block of k chunks takes
// part in the first k rounds). A round is one step: recursive halving's
// log2(p) steps (and its fold where n is not a power of two) each wait for
// a partner's previous step, and with more ranks than cores each dependent
// step is a rank that must be scheduled before the next can go on. Each
// rank sends (n - 1) / n of its input in n - 1 messages, the least any
// reduce-scatter sends, and receives its own block n - 1 times (recursive
// halving receives about as much), so it suits few ranks and small
// blocks. Serves reduce_scatter_block (blocks of count) and reduce_scatter
// (recvcounts; an empty block is neither sent nor expected).
//
// Deterministic: every element is reduced at one rank, in one order fixed
// by the rank count and that rank, relative rank order (its own operand
// first, then r + 1, r + 2, ...: reduce(out, a, b), a the operand of the
// lower relative ranks), as the binomial reduce orders its tree; the same
// in both forms, at every size and chunking. (Commutative operators only:
// a non-commutative one runs in_order_algorithm.)
//
// The partial result of a chunk lives where the result goes (recvbuf), or,
// in place, in a scratch buffer: there recvbuf's start, where the result
// goes, holds blocks still to be sent (and our own block's input) until
// the last round; the result is copied there after a flush.
//
// Deadlock freedom: order the work by (round, send before receive). A
// receive of round c waits for the peer's send of round c; a send waits
// for the release of an earlier chunk on the same pair, made in the
// receive phase of an earlier round (or of an earlier call). Both have
// smaller keys, and every rank's program follows that order.
#include <algorithm>
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"
#include "reduce_scatter_schedule.hpp"

namespace coll {
namespace {

// The first element of rank i's block, in a form that costs no allocation
// where the blocks are uniform (the smallest calls).
struct Offsets {
  const size_t* counts;
  size_t uniform;
  std::vector<size_t> off;
  Offsets(const size_t* c, size_t u, int n) : counts(c), uniform(u) {
    if (counts) off = reduce_scatter::offsets(counts, 0, n);
  }
  size_t at(int i) const { return counts ? off[size_t(i)] : size_t(i) * uniform; }
  size_t count(int i) const { return counts ? counts[i] : uniform; }
};

// first_sent: this rank's sends of the first round are done (the
// synchronous form hands the call over here when a piece is not there
// yet).
Task linear(Channel& ch, const Args& a, const size_t* counts, size_t uniform, bool first_sent) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  const Offsets blocks(counts, uniform, n);
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  const size_t own = blocks.count(r);
  Scratch scratch;
  if (a.in_place) scratch.allocate(ch, own * es);
  char* acc = a.in_place ? scratch.get() : out;
  size_t most = 0;
  for (int i = 0; i < n; ++i) most = std::max(most, blocks.count(i));
  for (size_t off = 0; off < most; off += chunk_elems) {
    if (!(first_sent && off == 0))
      for (int k = 1; k < n; ++k) {
        const int p = (r + k) % n;
        if (off < blocks.count(p))
          co_await ch.send(p, in + (blocks.at(p) + off) * es,
                           std::min(chunk_elems, blocks.count(p) - off) * es);
      }
    if (off >= own) continue;
    const size_t len = std::min(chunk_elems, own - off);
    const char* sum = in + (blocks.at(r) + off) * es;
    for (int k = 1; k < n; ++k) {
      const int p = (r + k) % n;
      a.reduce(acc + off * es, sum, co_await ch.recv(p, len * es), len);
      co_await ch.release(p);
      sum = acc + off * es;
    }
  }
  if (a.in_place && own > 0) {
    co_await ch.flush();  // the result goes over what was sent from recvbuf
    std::memcpy(out, acc, own * es);
  }
}

// The synchronous form (NowFn) where every block fits a slot: waits for a
// credit on every pair it sends on (each waits for a release of an earlier
// call's message, nothing of this call), sends every block, then waits
// until every piece of its own block is there and reduces them in the
// coroutine's order. When a credit does not come within the polls nothing
// is done; when a piece does not, nothing is taken yet and the coroutine
// goes on from the receives.
bool linear_now(Channel& ch, const Args& a, Polls& polls, Task& rest, const size_t* counts,
                size_t uniform) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, slot = ch.slot_bytes();
  if (counts) {
    for (int i = 0; i < n; ++i)
      if (counts[i] * es > slot) return false;
  } else if (uniform * es > slot) {
    return false;
  }
  const Offsets blocks(counts, uniform, n);
  if (!credits_now(ch, blocks, polls)) return false;
  const auto* in = static_cast<const char*>(a.sendbuf);
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    if (blocks.count(p) > 0) ch.send_now(p, in + blocks.at(p) * es, blocks.count(p) * es);
  }
  const size_t own = blocks.count(r), bytes = own * es;
  if (own == 0) return true;
  for (int i = 0; i < n; ++i)
    if (i != r)
      while (!ch.message(i, bytes))
        if (!polls.next()) {
          rest = linear(ch, a, counts, uniform, true);
          return false;
        }
  // Every piece is here and every send completed at post (its bytes are
  // in the peer's window): in place, our input block is the only part of
  // recvbuf still needed, and it moves to the result's place first (the
  // reductions then work in place there, our operand first).
  auto* out = static_cast<char*>(a.recvbuf);
  const char* sum = in + blocks.at(r) * es;
  if (a.in_place) {
    if (sum != out) std::memmove(out, sum, bytes);
    sum = out;
  }
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    a.reduce(out, sum, ch.message(p, bytes), own);
    ch.release_now(p);
    sum = out;
  }
  return true;
}

}  // namespace

Task linear_reduce_scatter_block(Channel& ch, const Args& a) {
  return linear(ch, a, nullptr, a.count, false);
}

Task linear_reduce_scatter(Channel& ch, const Args& a) {
  return linear(ch, a, a.recvcounts, 0, false);
}

bool linear_reduce_scatter_block_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return linear_now(ch, a, polls, rest, nullptr, a.count);
}

bool linear_reduce_scatter_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return linear_now(ch, a, polls, rest, a.recvcounts, 0);
}

}  // namespace coll
