// Schedule math of the ring algorithms: pure functions, unit-tested without
// any transport (tests/unit/ring_schedule_test.cpp).
#pragma once

#include <algorithm>
#include <cstddef>

namespace coll::ring {

struct Range {
  size_t offset;  // in elements
  size_t count;   // in elements
};

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// The count elements are cut into n segments, the first count % n of them
// one element longer: segment sizes differ by at most one element.
inline Range segment(size_t count, int n, int seg) {
  const size_t base = count / size_t(n), rem = count % size_t(n);
  const size_t s = size_t(seg);
  return {s * base + std::min(s, rem), base + (s < rem ? 1 : 0)};
}

// Reduce-scatter step s (0 .. n-2): rank r sends segment r - s to r + 1 and
// receives segment r - s - 1 from r - 1, which it reduces into its own. After
// n - 1 steps rank r holds the full reduction of segment owned(r).
inline int rs_send_segment(int r, int s, int n) { return mod(r - s, n); }
inline int rs_recv_segment(int r, int s, int n) { return mod(r - s - 1, n); }
inline int owned_segment(int r, int n) { return mod(r + 1, n); }

// Allgather step s (0 .. n-2): rank r sends segment r + 1 - s to r + 1 and
// receives segment r - s from r - 1.
inline int ag_send_segment(int r, int s, int n) { return mod(r + 1 - s, n); }
inline int ag_recv_segment(int r, int s, int n) { return mod(r - s, n); }

// A segment moves in chunks of at most chunk_elems elements.
inline size_t num_chunks(size_t elems, size_t chunk_elems) {
  return (elems + chunk_elems - 1) / chunk_elems;
}
inline Range chunk(Range seg, size_t c, size_t chunk_elems) {
  const size_t off = c * chunk_elems;
  return {seg.offset + off, std::min(chunk_elems, seg.count - off)};
}

// Zero-copy chunks of a chain broadcast. Their data goes straight into the
// next rank's buffer, not through a slot (only each chunk's flag takes
// one), so the chunk only serves the pipeline along the chain: a chain of
// 2 ranks has none, and the message goes in one write (over tcp at np 2,
// slot-sized chunks kept at most num_slots of them in flight, a credit's
// round trip each: 1.13-1.34x Open MPI's tcp BTL at 512 KiB-4 MiB, against
// 0.93-1.03 in one write); longer chains keep slot-sized chunks. Never
// above max_message (the longest zero-copy message), never 0.
inline size_t zero_copy_chunk(size_t bytes, int n, size_t slot_bytes, size_t max_message) {
  const size_t chunk = n == 2 ? bytes : slot_bytes;
  return std::max<size_t>(1, std::min(chunk, max_message));
}

// Chain (pipelined ring) broadcast: positions relative to the root.
inline int chain_position(int r, int root, int n) { return mod(r - root, n); }
inline int chain_prev(int r, int n) { return mod(r - 1, n); }
inline int chain_next(int r, int n) { return mod(r + 1, n); }

}  // namespace coll::ring
