// The reduce-scatter ring that ring_reduce_scatter.cpp and
// reduce_scatter_gather_reduce.cpp share (reduce_scatter_schedule.hpp):
// n - 1 steps in which every rank passes a partial result to its right
// neighbour and reduces the one from its left into its own input, in
// slot-sized chunks, chunk c of the send before chunk c of the receive.
#pragma once

#include <algorithm>
#include <vector>

#include "algorithms.hpp"
#include "channel.hpp"
#include "reduce_scatter_schedule.hpp"

namespace coll {

// off: the n + 1 block offsets (elements) of the input. in: this rank's
// input; acc: a buffer of the input's size and layout for the partial
// results (may be in); mine: where block r's result goes (may be
// acc + off[r]). Partial results are sent from acc, which therefore must
// not change before a flush; in is read only.
inline Task ring_reduce_scatter_steps(Channel& ch, const Args& a, const std::vector<size_t>& off,
                                      const char* in, char* acc, char* mine) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  auto chunks = [&](int block) {
    return (off[size_t(block) + 1] - off[size_t(block)] + chunk_elems - 1) / chunk_elems;
  };
  for (int s = 0; s < n - 1; ++s) {
    const int tx = reduce_scatter::ring_send_block(r, s, n);
    const int rx = reduce_scatter::ring_recv_block(r, s, n);
    const char* tx_base = s == 0 ? in : acc;
    // The last step reduces our own block, into its place.
    char* rx_dst = s == n - 2 ? mine : acc + off[size_t(rx)] * es;
    const size_t tx_chunks = chunks(tx), rx_chunks = chunks(rx);
    for (size_t c = 0; c < std::max(tx_chunks, rx_chunks); ++c) {
      const size_t at = c * chunk_elems;
      if (c < tx_chunks) {
        const size_t len = std::min(chunk_elems, off[size_t(tx) + 1] - off[size_t(tx)] - at);
        co_await ch.send(right, tx_base + (off[size_t(tx)] + at) * es, len * es);
      }
      if (c < rx_chunks) {
        const size_t len = std::min(chunk_elems, off[size_t(rx) + 1] - off[size_t(rx)] - at);
        const void* data = co_await ch.recv(left, len * es);
        // The partial of the ranks before us (on the ring) first.
        a.reduce(rx_dst + at * es, data, in + (off[size_t(rx)] + at) * es, len);
        co_await ch.release(left);
      }
    }
  }
}

}  // namespace coll
