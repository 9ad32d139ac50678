// Ring allreduce: reduce-scatter then allgather, each segment cut into
// slot-sized chunks that stream through the peers' windows. For large calls
// the allgather goes zero-copy: each rank exposes its recvbuf to its left
// neighbour, which writes the reduced segments straight into it; below
// that, a recvbuf from coll_mem_alloc takes them in place (Channel::offer).
//
// Each segment is reduced at exactly one rank and then copied everywhere,
// so the result is bitwise identical on every rank.
//
// Deadlock freedom: a rank sends at most two messages more than it has
// received (segments differ by at most one element, so by at most one
// chunk), and the channel has at least three slots per peer, so a full ring
// of ranks each waiting for a credit cannot form.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "channel.hpp"
#include "ring_schedule.hpp"

namespace coll {

Task ring_allreduce(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const int right = ring::chain_next(r, n), left = ring::chain_prev(r, n);
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  auto* out = static_cast<char*>(a.recvbuf);
  const auto* in = static_cast<const char*>(a.sendbuf);
  const bool zero_copy = ch.zero_copy(a.count * es);
  // Exposed first, so that the left neighbour never waits for it.
  if (zero_copy) ch.expose(left, out, a.count * es);
  // Else a recvbuf from coll_mem_alloc takes the allgather's chunks in
  // place (Channel::offer): those after the reduce-scatter's.
  if (!zero_copy) {
    uint64_t rs = 0, ag = 0;
    for (int s = 0; s < n - 1; ++s) {
      rs += ring::num_chunks(ring::segment(a.count, n, ring::rs_recv_segment(r, s, n)).count,
                             chunk_elems);
      ag += ring::num_chunks(ring::segment(a.count, n, ring::ag_recv_segment(r, s, n)).count,
                             chunk_elems);
    }
    ch.offer(left, out, a.count * es, ag, rs);
  }

  // Reduce-scatter. Step 0 sends from sendbuf; a received chunk is reduced
  // with our own input straight into recvbuf, and later steps send from
  // recvbuf. Every segment but our step-0 one is written this way; that one
  // arrives in the allgather.
  for (int s = 0; s < n - 1; ++s) {
    const ring::Range tx = ring::segment(a.count, n, ring::rs_send_segment(r, s, n));
    const ring::Range rx = ring::segment(a.count, n, ring::rs_recv_segment(r, s, n));
    const char* tx_base = s == 0 ? in : out;
    const size_t tx_chunks = ring::num_chunks(tx.count, chunk_elems);
    const size_t rx_chunks = ring::num_chunks(rx.count, chunk_elems);
    for (size_t c = 0; c < std::max(tx_chunks, rx_chunks); ++c) {
      if (c < tx_chunks) {
        const ring::Range t = ring::chunk(tx, c, chunk_elems);
        co_await ch.send(right, tx_base + t.offset * es, t.count * es);
      }
      if (c < rx_chunks) {
        const ring::Range x = ring::chunk(rx, c, chunk_elems);
        const void* data = co_await ch.recv(left, x.count * es);
        a.reduce(out + x.offset * es, in + x.offset * es, data, x.count);
        co_await ch.release(left);
      }
    }
  }

  // Allgather of the reduced segments.
  const RemoteRegion right_buf = zero_copy ? co_await ch.exposed_by(right) : RemoteRegion{};
  for (int s = 0; s < n - 1; ++s) {
    const ring::Range tx = ring::segment(a.count, n, ring::ag_send_segment(r, s, n));
    const ring::Range rx = ring::segment(a.count, n, ring::ag_recv_segment(r, s, n));
    const size_t tx_chunks = ring::num_chunks(tx.count, chunk_elems);
    const size_t rx_chunks = ring::num_chunks(rx.count, chunk_elems);
    for (size_t c = 0; c < std::max(tx_chunks, rx_chunks); ++c) {
      if (c < tx_chunks) {
        const ring::Range t = ring::chunk(tx, c, chunk_elems);
        if (zero_copy)
          co_await ch.send_direct(right, right_buf, t.offset * es, out + t.offset * es,
                                  t.count * es);
        else
          co_await ch.send_placed(right, out + t.offset * es, t.count * es, t.offset * es);
      }
      if (c < rx_chunks) {
        const ring::Range x = ring::chunk(rx, c, chunk_elems);
        if (zero_copy) {
          co_await ch.recv_direct(left, x.count * es);
        } else {
          const void* data = co_await ch.recv_placed(left, out + x.offset * es, x.count * es);
          if (data != out + x.offset * es) std::memcpy(out + x.offset * es, data, x.count * es);
          co_await ch.release(left);
        }
      }
    }
  }
}

}  // namespace coll
