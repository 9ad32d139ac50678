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

  // Scatter: receive the segments of my subtree, pass on my children's.
  if (v != 0) {
    const binomial::Span mine = binomial::subtree_span(a.bytes, n, v);
    const int parent = rank_of(binomial::parent(v));
    for (size_t off = 0; off < mine.bytes; off += chunk) {
      const size_t len = std::min(chunk, mine.bytes - off);
      const void* data = co_await ch.recv(parent, len);
      std::memcpy(buf + mine.offset + off, data, len);
      co_await ch.release(parent);
    }
  }
  const std::vector<int> kids = binomial::children(v, n);
  for (auto kid = kids.rbegin(); kid != kids.rend(); ++kid) {
    const binomial::Span theirs = binomial::subtree_span(a.bytes, n, *kid);
    for (size_t off = 0; off < theirs.bytes; off += chunk)
      co_await ch.send(rank_of(*kid), buf + theirs.offset + off,
                       std::min(chunk, theirs.bytes - off));
  }

  // Ring allgather of the segments.
  const int right = rank_of(v + 1), left = rank_of(v - 1 + n);
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
        co_await ch.send(right, buf + tx.offset + off, std::min(chunk, tx.bytes - off));
      if (c < rx_chunks) {
        const size_t len = std::min(chunk, rx.bytes - off);
        const void* data = co_await ch.recv(left, len);
        std::memcpy(buf + rx.offset + off, data, len);
        co_await ch.release(left);
      }
    }
  }
}

}  // namespace coll
