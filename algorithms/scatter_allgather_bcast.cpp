// Scatter-allgather broadcast, for large messages (van de Geijn's, as in
// MPICH): the buffer is cut into n segments; a binomial-tree scatter gives
// every rank its own segment, and a ring allgather then gives every rank
// all of them (binomial_schedule.hpp). The root sends each byte about once,
// and every rank receives about twice the buffer, against once per hop of
// the chain or trees, but all links work at once.
//
// Deadlock freedom: order the work by (scatter, depth) before (allgather
// step, chunk, send before receive). In the scatter data only moves down
// the tree; in the ring a receive waits for the left neighbour's send with
// the same key. A send waits for the release of an earlier message on the
// same pair, which has a smaller key; each rank's program follows the key.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "channel.hpp"

namespace coll {
namespace {

size_t chunks_of(size_t bytes, size_t chunk) { return (bytes + chunk - 1) / chunk; }

}  // namespace

Task scatter_allgather_bcast(Channel& ch, const Args& a) {
  const int n = ch.size();
  const int v = binomial::relative(ch.rank(), a.root, n);
  auto rank_of = [&](int rel) { return binomial::absolute(rel, a.root, n); };
  auto* buf = static_cast<char*>(a.recvbuf);
  const size_t chunk = ch.slot_bytes();
  const int right = rank_of(v + 1), left = rank_of(v - 1 + n);
  const int parent = v != 0 ? rank_of(binomial::parent(v)) : -1;

  // A buffer from coll_mem_alloc takes its chunks in place (Channel::offer):
  // every rank's buffer has the same layout, so a chunk goes to the offset
  // it has at its sender. The parent's scatter chunks come before the left
  // neighbour's ring chunks, one offer where the two are one rank.
  if (v != 0) {
    const uint64_t scattered = chunks_of(binomial::subtree_span(a.bytes, n, v).bytes, chunk);
    uint64_t ringed = 0;
    for (int s = 0; s < n - 1; ++s)
      if (!binomial::in_subtree(binomial::allgather_recv_segment(v, s, n), v, n))
        ringed += chunks_of(
            binomial::segment(a.bytes, n, binomial::allgather_recv_segment(v, s, n)).bytes, chunk);
    if (parent == left) {
      ch.offer(left, buf, a.bytes, scattered + ringed);
    } else {
      ch.offer(parent, buf, a.bytes, scattered);
      ch.offer(left, buf, a.bytes, ringed);
    }
  }

  // Scatter: receive the segments of my subtree, pass on my children's.
  if (v != 0) {
    const binomial::Span mine = binomial::subtree_span(a.bytes, n, v);
    for (size_t off = 0; off < mine.bytes; off += chunk) {
      const size_t len = std::min(chunk, mine.bytes - off);
      char* at = buf + mine.offset + off;
      const void* data = co_await ch.recv_placed(parent, at, len);
      if (data != at) std::memcpy(at, data, len);
      co_await ch.release(parent);
    }
  }
  const std::vector<int> kids = binomial::children(v, n);
  for (auto kid = kids.rbegin(); kid != kids.rend(); ++kid) {
    const binomial::Span theirs = binomial::subtree_span(a.bytes, n, *kid);
    for (size_t off = 0; off < theirs.bytes; off += chunk)
      co_await ch.send_placed(rank_of(*kid), buf + theirs.offset + off,
                              std::min(chunk, theirs.bytes - off), theirs.offset + off);
  }

  // Ring allgather of the segments.
  for (int s = 0; s < n - 1; ++s) {
    const binomial::Span tx =
        binomial::segment(a.bytes, n, binomial::allgather_send_segment(v, s, n));
    const binomial::Span rx =
        binomial::segment(a.bytes, n, binomial::allgather_recv_segment(v, s, n));
    // Segments the receiver holds since the scatter do not travel.
    const bool tx_needed =
        !binomial::in_subtree(binomial::allgather_send_segment(v, s, n), (v + 1) % n, n);
    const bool rx_needed = !binomial::in_subtree(binomial::allgather_recv_segment(v, s, n), v, n);
    const size_t tx_chunks = tx_needed ? chunks_of(tx.bytes, chunk) : 0;
    const size_t rx_chunks = rx_needed ? chunks_of(rx.bytes, chunk) : 0;
    for (size_t c = 0; c < std::max(tx_chunks, rx_chunks); ++c) {
      const size_t off = c * chunk;
      if (c < tx_chunks)
        co_await ch.send_placed(right, buf + tx.offset + off, std::min(chunk, tx.bytes - off),
                                tx.offset + off);
      if (c < rx_chunks) {
        const size_t len = std::min(chunk, rx.bytes - off);
        const void* data = co_await ch.recv_placed(left, buf + rx.offset + off, len);
        if (data != buf + rx.offset + off) std::memcpy(buf + rx.offset + off, data, len);
        co_await ch.release(left);
      }
    }
  }
}

}  // namespace coll
