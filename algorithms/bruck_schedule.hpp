// Schedule math of Bruck's algorithms (allgather, allgatherv, alltoall):
// pure functions, unit-tested without any transport
// (tests/unit/bruck_schedule_test.cpp). J. Bruck et al., "Efficient
// algorithms for all-to-all communications in multiport message-passing
// systems", IEEE TPDS 8(11), 1997.
//
// Both work in ceil(log2 n) steps on any n, on a buffer of n blocks in
// rotated order: position i of rank r is about rank (r + i) mod n
// (allgather: the block of that rank; alltoall: see below).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace coll::bruck {

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// The steps: distances 1, 2, 4, ... below n.
inline int num_steps(int n) {
  int k = 0;
  for (int d = 1; d < n; d *= 2) ++k;
  return k;
}
inline int distance(int step) { return 1 << step; }

// ---------------------------------------------------------------------------
// Allgather. Rank r starts with its own block at position 0. At the step
// of distance d it sends positions [0, blocks) to r - d and receives
// positions [d, d + blocks) from r + d, with blocks = min(d, n - d): what
// r + d holds at its positions [0, blocks) are the blocks of ranks
// r + d .. r + d + blocks - 1, which are r's positions d .. d + blocks - 1.
// Before the step r holds positions [0, d); after it [0, min(2d, n)).

inline int allgather_blocks(int step, int n) {
  const int d = distance(step);
  return std::min(d, n - d);
}
inline int allgather_send_to(int r, int step, int n) { return mod(r - distance(step), n); }
inline int allgather_recv_from(int r, int step, int n) { return mod(r + distance(step), n); }
// The rank whose block is at position i of rank r.
inline int allgather_block_at(int r, int i, int n) { return mod(r + i, n); }

// ---------------------------------------------------------------------------
// Alltoall. Position i of rank r starts with r's block for rank r + i. At
// the step of distance d, r sends every position i with bit d set to r + d
// and receives the same positions from r - d, in place: a block moves d
// ranks forward, from position i to position i, once for every bit of i,
// so the block that r' put at position i (meant for r' + i) ends after all
// steps at rank r' + i, position i. At the end position i of rank r holds
// the block of rank r - i for r.

// The positions that move at a step, in increasing order (the order both
// sides pack and unpack them in).
inline std::vector<int> alltoall_positions(int step, int n) {
  std::vector<int> moved;
  const int d = distance(step);
  for (int i = 0; i < n; ++i)
    if (i & d) moved.push_back(i);
  return moved;
}
inline int alltoall_send_to(int r, int step, int n) { return mod(r + distance(step), n); }
inline int alltoall_recv_from(int r, int step, int n) { return mod(r - distance(step), n); }
// Position i of rank r at the start: r's block for this rank.
inline int alltoall_initial_dest(int r, int i, int n) { return mod(r + i, n); }
// Position i of rank r at the end: the block of this rank for r.
inline int alltoall_final_source(int r, int i, int n) { return mod(r - i, n); }
// The most positions any step moves (pack buffer size).
inline int alltoall_max_moved(int n) {
  int most = 0;
  for (int s = 0; s < num_steps(n); ++s)
    most = std::max(most, int(alltoall_positions(s, n).size()));
  return most;
}

}  // namespace coll::bruck
