// Direct allreduce, for small vectors on few ranks: every rank writes its
// vector to every other rank at once, then reduces the n vectors itself, in
// slot-sized chunks. One message latency a chunk: recursive doubling's
// log2 n exchanges (two more at a rank count that is not a power of two, to
// fold the extra ranks in and out) are dependent steps, and with more ranks
// than cores each is a rank that must be scheduled before the next can go
// on. The price is n - 1 writes and n - 1 reductions of the whole vector at
// every rank, which only small vectors on few ranks can afford.
//
// Bitwise identical results on every rank: each computes the same left fold
// in rank order, ((x0 op x1) op x2) op ..., the lower ranks' operand first
// (Reducer: `a` is the lower ranks'), so it also keeps the rank order of a
// non-commutative operator. In place, recvbuf holds this rank's operand,
// which the fold would overwrite before its turn: a rank above 1 keeps a
// copy of it (rank 0's and rank 1's are read by the first reduction, whose
// destination may alias either operand: Reducer).
//
// Deadlock freedom: order the work by (chunk, send before receive). A
// receive of chunk c waits for the peer's send of chunk c; a send waits for
// the release of an earlier chunk on the same pair, made in the receive
// phase of an earlier chunk or call. Both have smaller keys, and every
// rank's program follows that order.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {

Task direct_allreduce(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  // In place: COLL_IN_PLACE, or (allreduce's rule) sendbuf == recvbuf.
  const bool in_place = a.sendbuf == a.recvbuf;
  Scratch own_copy;
  const char* own = in;
  if (in_place && r > 1) {
    own_copy.allocate_local(a.count * es);  // read here only, never sent
    std::memcpy(own_copy.get(), in, a.count * es);
    own = own_copy.get();
  }
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  for (size_t off = 0; off < a.count; off += chunk_elems) {
    const size_t len = std::min(chunk_elems, a.count - off);
    for (int k = 1; k < n; ++k) co_await ch.send((r + k) % n, in + off * es, len * es);
    // Sent from recvbuf in place: its bytes must be out before the fold
    // writes there (Channel::send wants its source unchanged until a flush).
    if (in_place) co_await ch.flush();
    char* acc = out + off * es;
    const void* first = r == 0 ? own + off * es : co_await ch.recv(0, len * es);
    for (int p = 1; p < n; ++p) {
      const void* next = p == r ? own + off * es : co_await ch.recv(p, len * es);
      a.reduce(acc, p == 1 ? first : acc, next, len);
      if (p != r) co_await ch.release(p);
    }
    if (r != 0) co_await ch.release(0);
  }
}

}  // namespace coll
