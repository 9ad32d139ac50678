// Direct (one-step) scan and exscan, for small vectors on few ranks: every
// rank r writes its input straight to every higher rank (r + 1 .. n - 1),
// and reduces the inputs it receives from ranks 0 .. r - 1 (and, for scan,
// its own), one slot-sized chunk of the vector per round. A round is one
// step: the chain (linear_scan.cpp) is n - 1 dependent steps, rank r
// waiting for r - 1's prefix, and recursive doubling ceil(log2 n), each
// waiting for a partner's previous step; with more ranks than cores every
// dependent step is a rank that must be scheduled before the next can go
// on. Rank r sends n - 1 - r messages and receives r (n (n - 1) / 2 in
// all, where the chain sends n - 1), and the last rank reduces n - 1
// vectors, so it suits few ranks and small vectors. The named "linear"
// scan is the chain; this one is "direct".
//
// Every rank's result reduces its operands strictly in rank order, the
// same at every size and chunking and in both forms: a left fold,
// ((x0 op x1) op x2) op ... op x_r for scan and ... op x_{r-1} for exscan
// (reduce(out, a, b): a the operand of the lower ranks), as the chain
// associates them. So a non-commutative operator would keep its order,
// but such a call (and every order-sensitive one under
// COLL_REPRODUCIBLE=order) runs in_order_algorithm, recursive doubling,
// whatever the table or the knob say: this grouping is not that one.
// Exscan: rank 0 writes nothing (its recvbuf is untouched, as MPI says),
// rank 1 gets rank 0's input; the last rank never reads its sendbuf (it
// may be NULL in an exscan).
//
// Sends read the input where it is (sendbuf, or in place recvbuf). In
// place, a rank that receives accumulates its result in a scratch vector
// (the fold needs its own input last, and recvbuf is the source of its
// sends), flushes its sends, and copies the result over recvbuf at the end.
//
// Deadlock freedom: order the work by (round, send before receive). A
// receive of round c waits for a lower rank's send of round c; a send
// waits for the release of an earlier chunk on the same pair, made in the
// receive phase of an earlier round (or of an earlier call). Both have
// smaller keys, and every rank's program follows that order. (Data only
// moves up the ranks, so no two ranks ever wait for each other.)
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {
namespace {

// acc = the fold of this chunk's operands, in rank order: the messages of
// ranks 0 .. r - 1 (msg(p)), then own (nullptr for exscan). acc may be own
// (exactly) where own is read last. r >= 1.
template <class Msg>
void fold(const Args& a, int r, char* acc, const char* own, size_t len, Msg msg) {
  if (r == 1) {
    if (own)
      a.reduce(acc, msg(0), own, len);
    else
      std::memcpy(acc, msg(0), len * a.elem_size);
    return;
  }
  a.reduce(acc, msg(0), msg(1), len);
  for (int p = 2; p < r; ++p) a.reduce(acc, acc, msg(p), len);
  if (own) a.reduce(acc, acc, own, len);
}

// first_sent: this rank's sends of the first round are done (the
// synchronous form hands the call over here when a message is not there
// yet).
Task direct(Channel& ch, const Args& a, bool exclusive, bool first_sent) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size, chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  const bool last = r == n - 1;
  // The last rank of an exscan does not touch its sendbuf.
  const auto* in = exclusive && last ? nullptr : static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  Scratch scratch;
  if (a.in_place && r > 0) scratch.allocate(ch, a.count * es);
  char* acc = scratch.get() ? scratch.get() : out;
  for (size_t off = 0; off < a.count; off += chunk_elems) {
    const size_t len = std::min(chunk_elems, a.count - off), at = off * es, bytes = len * es;
    if (!last && !(first_sent && off == 0))
      for (int p = r + 1; p < n; ++p) co_await ch.send(p, in + at, bytes);
    if (r == 0) {
      if (!exclusive && out != in) std::memcpy(out + at, in + at, bytes);
      continue;
    }
    // Every lower rank's chunk, in rank order; each is released once the
    // fold has read it.
    const void* m0 = co_await ch.recv(0, bytes);
    if (r == 1) {
      fold(a, 1, acc + at, exclusive ? nullptr : in + at, len, [&](int) { return m0; });
      co_await ch.release(0);
      continue;
    }
    const void* m1 = co_await ch.recv(1, bytes);
    a.reduce(acc + at, m0, m1, len);
    co_await ch.release(0);
    co_await ch.release(1);
    for (int p = 2; p < r; ++p) {
      a.reduce(acc + at, acc + at, co_await ch.recv(p, bytes), len);
      co_await ch.release(p);
    }
    if (!exclusive) a.reduce(acc + at, acc + at, in + at, len);
  }
  if (scratch.get()) {
    if (!last) co_await ch.flush();  // the result goes over what was sent from recvbuf
    std::memcpy(out, acc, a.count * es);
  }
}

// The synchronous form (NowFn) where the vector fits a slot: waits for a
// credit on every pair it sends on (each waits for a release of an earlier
// call's message, nothing of this call), sends its input to every higher
// rank, then waits until every lower rank's input is there and folds them
// in the coroutine's order. When a credit does not come within the polls
// nothing is done; when a message does not, nothing is taken yet and the
// coroutine goes on from the receives. Writes complete at post here, so
// in place the result may go straight over recvbuf; only scan's own
// operand, read last, is kept aside first (from rank 2 on, where the fold
// writes before it reads it).
bool direct_now(Channel& ch, const Args& a, Polls& polls, Task& rest, bool exclusive) {
  const int n = ch.size(), r = ch.rank();
  const size_t bytes = a.count * a.elem_size;
  if (bytes > ch.slot_bytes()) return false;
  for (int p = r + 1; p < n; ++p)
    while (!ch.can_send(p))
      if (!polls.next()) return false;
  for (int p = r + 1; p < n; ++p) ch.send_now(p, a.sendbuf, bytes);
  auto* out = static_cast<char*>(a.recvbuf);
  const auto* in = static_cast<const char*>(a.sendbuf);
  if (r == 0) {
    if (!exclusive && out != in) std::memcpy(out, in, bytes);
    return true;
  }
  for (int p = 0; p < r; ++p)
    while (!ch.message(p, bytes))
      if (!polls.next()) {
        rest = direct(ch, a, exclusive, true);
        return false;
      }
  const char* own = exclusive ? nullptr : in;
  Scratch kept;
  if (own && a.in_place && r >= 2) {
    kept.allocate(ch, bytes);
    std::memcpy(kept.get(), in, bytes);
    own = kept.get();
  }
  fold(a, r, out, own, a.count, [&](int p) { return ch.message(p, bytes); });
  for (int p = 0; p < r; ++p) ch.release_now(p);
  return true;
}

}  // namespace

Task direct_scan(Channel& ch, const Args& a) { return direct(ch, a, false, false); }
Task direct_exscan(Channel& ch, const Args& a) { return direct(ch, a, true, false); }

bool direct_scan_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return direct_now(ch, a, polls, rest, false);
}
bool direct_exscan_now(Channel& ch, const Args& a, Polls& polls, Task& rest) {
  return direct_now(ch, a, polls, rest, true);
}

}  // namespace coll
