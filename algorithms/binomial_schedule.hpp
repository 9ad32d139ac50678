// Schedule math of the binomial-tree, recursive-doubling and
// scatter-allgather algorithms: pure functions, unit-tested without any
// transport (tests/unit/binomial_schedule_test.cpp).
//
// Ranks are renumbered relative to the root: v = (r - root) mod n, so that
// the root is 0.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace coll::binomial {

inline int mod(int a, int n) { return ((a % n) + n) % n; }
inline int relative(int r, int root, int n) { return mod(r - root, n); }
inline int absolute(int v, int root, int n) { return mod(v + root, n); }

inline int lowest_bit(int v) { return v & -v; }

// Smallest power of two >= n (n >= 1).
inline int ceil_pow2(int n) {
  int p = 1;
  while (p < n) p <<= 1;
  return p;
}
// Largest power of two <= n (n >= 1).
inline int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p <<= 1;
  return p;
}

// Binomial tree rooted at 0: v > 0 hangs below v minus its lowest set bit;
// its subtree is [v, v + lowest_bit(v)) cut at n, the root's is [0, n).
inline int parent(int v) { return v == 0 ? -1 : v - lowest_bit(v); }
inline int subtree_end(int v, int n) { return v == 0 ? n : std::min(n, v + lowest_bit(v)); }
inline bool in_subtree(int x, int v, int n) { return x >= v && x < subtree_end(v, n); }

// Children of v, smallest subtree first: v + 1, v + 2, v + 4, ... below
// v's lowest set bit (every bit for the root) and below n. A reduction
// receives in this order (the small subtrees finish first); a broadcast
// sends in the reverse order (the big subtrees have the longest way to go).
inline std::vector<int> children(int v, int n) {
  std::vector<int> kids;
  const int limit = v == 0 ? ceil_pow2(n) : lowest_bit(v);
  for (int mask = 1; mask < limit && v + mask < n; mask <<= 1) kids.push_back(v + mask);
  return kids;
}

// ---------------------------------------------------------------------------
// Recursive doubling on n ranks, n not necessarily a power of two (as in
// MPICH's allreduce): with p the largest power of two <= n and e = n - p,
// each of the first e even ranks folds its data into the odd rank above it
// and waits; the p remaining ranks run log2(p) exchange steps under new
// numbers 0..p-1; the result is then copied back to the folded ranks.

struct Doubling {
  int pof2;   // ranks in the exchange
  int extra;  // ranks folded away (n - pof2)
};

inline Doubling doubling(int n) {
  const int p = floor_pow2(n);
  return {p, n - p};
}

// -1 for a rank folded away (an even rank below 2 * extra).
inline int doubling_rank(int r, const Doubling& d) {
  if (r < 2 * d.extra) return r % 2 == 0 ? -1 : r / 2;
  return r - d.extra;
}
inline int doubling_to_rank(int v, const Doubling& d) {
  return v < d.extra ? 2 * v + 1 : v + d.extra;
}

// ---------------------------------------------------------------------------
// Rabenseifner's allreduce on the p exchange ranks of Doubling: a
// reduce-scatter by recursive halving, then an allgather by recursive
// doubling. The count elements are cut into p segments (segment_begin
// below). Each rank holds a window of segments, at first all of them; at the
// halving step with mask m (p/2, p/4, ..., 1) v and its partner v ^ m hold
// the same window, the aligned block of 2m segments that holds both; v
// keeps the half that holds segment v and sends the other, which the
// partner keeps. After the last step v holds segment v alone, fully
// reduced. The allgather runs the steps backwards (m = 1, 2, ..., p/2):
// partners trade the halves they kept, whose union is the window they held
// before that halving step. A window is thus a function of v and m: no rank
// keeps a stack of them.

struct Window {
  int lo;  // first segment
  int hi;  // one past the last
};

// The aligned block of m segments (m a power of two) that holds segment v.
inline Window block(int v, int m) {
  const int lo = v & ~(m - 1);
  return {lo, lo + m};
}
inline Window halving_keep(int v, int m) { return block(v, m); }
inline Window halving_give(int v, int m) { return block(v ^ m, m); }

// ---------------------------------------------------------------------------
// Scatter-allgather broadcast: the bytes are cut into n segments, segment v
// for relative rank v (sizes differ by at most one byte). The scatter runs
// down the binomial tree: v receives the segments of its whole subtree,
// which are contiguous. The ring allgather then runs over relative ranks:
// at step s (0 .. n-2) v sends segment v - s to v + 1 and receives segment
// v - s - 1 from v - 1. A segment that the receiver already holds from the
// scatter (one of its subtree's) is neither sent nor received: both sides
// know.

struct Span {
  size_t offset;  // bytes
  size_t bytes;
};

// Where segment v of n begins in `total` bytes (or elements).
inline size_t segment_begin(size_t total, int n, int v) {
  const size_t base = total / size_t(n), rem = total % size_t(n);
  return size_t(v) * base + std::min(size_t(v), rem);
}
inline Span segment(size_t bytes, int n, int v) {
  const size_t b = segment_begin(bytes, n, v);
  return {b, segment_begin(bytes, n, v + 1) - b};
}
// The segments of v's binomial subtree.
inline Span subtree_span(size_t bytes, int n, int v) {
  const size_t b = segment_begin(bytes, n, v);
  return {b, segment_begin(bytes, n, subtree_end(v, n)) - b};
}

inline int allgather_send_segment(int v, int s, int n) { return mod(v - s, n); }
inline int allgather_recv_segment(int v, int s, int n) { return mod(v - s - 1, n); }

}  // namespace coll::binomial
