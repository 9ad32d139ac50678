// Schedule math of the reduce-scatter algorithms (ring, recursive halving;
// the ring one also inside reduce's reduce-scatter + gather): pure
// functions, unit-tested without any transport
// (tests/unit/reduce_scatter_schedule_test.cpp).
//
// The input of every rank is n blocks in rank order; block i (elements
// [offset[i], offset[i + 1])) is reduced for rank i.
#pragma once

#include <cstddef>
#include <vector>

#include "binomial_schedule.hpp"

namespace coll::reduce_scatter {

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// offset[i]: the first element of block i; offset[n]: the total.
inline std::vector<size_t> offsets(const size_t* counts, size_t uniform, int n) {
  std::vector<size_t> off(size_t(n) + 1, 0);
  for (int i = 0; i < n; ++i) off[size_t(i) + 1] = off[size_t(i)] + (counts ? counts[i] : uniform);
  return off;
}

// ---------------------------------------------------------------------------
// Ring, n - 1 steps (s = 0 .. n-2): rank r sends its partial result of
// block r - s - 1 to r + 1 (its own input at step 0) and receives the
// partial of block r - s - 2 from r - 1, which it reduces with its own
// input. What r sends at step s + 1 is what it reduced at step s; a block
// starts at rank i + 1 and ends, reduced n times, at rank i after step
// n - 2.
inline int ring_send_block(int r, int s, int n) { return mod(r - s - 1, n); }
inline int ring_recv_block(int r, int s, int n) { return mod(r - s - 2, n); }

// ---------------------------------------------------------------------------
// Recursive halving (MPICH's reduce_scatter for commutative operators),
// on the exchange ranks of binomial::Doubling: each of the first `extra`
// even ranks folds its whole input into the odd rank above it first. The
// p = pof2 exchange ranks cut the blocks into p segments, exchange rank v's
// segment being the blocks of the ranks it stands for: ranks 2v and 2v + 1
// for v < extra, rank v + extra otherwise, so segments are runs of whole
// blocks in rank order. The halving steps are Rabenseifner's
// (binomial::halving_keep / halving_give over these segments); after them
// v holds its segment, fully reduced, and sends block 2v to the folded
// rank 2v when it stands for one.

// The first block of segment v (v = pof2 gives n).
inline int segment_first_block(int v, const binomial::Doubling& d) {
  return v < d.extra ? 2 * v : v + d.extra;
}
// The folded rank an exchange rank serves (-1: none).
inline int serves_folded(int v, const binomial::Doubling& d) { return v < d.extra ? 2 * v : -1; }

}  // namespace coll::reduce_scatter
