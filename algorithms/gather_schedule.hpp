// Schedule math of the binomial gather and scatter: pure functions,
// unit-tested without any transport (tests/unit/gather_schedule_test.cpp).
//
// Ranks are relative to the root (binomial_schedule.hpp): v = (r - root)
// mod n. Rank v's subtree is [v, subtree_end(v)), so the blocks a subtree
// gathers (or is scattered) are a run of relative ranks, which forwarding
// ranks keep contiguous in relative order. At the root the run is a run of
// absolute ranks that may wrap around n: the root's buffer is in absolute
// order. Both sides of a link cut the run where it wraps (at absolute rank
// 0) and each piece into slot-sized chunks, so they agree on every
// message's length without the root's help.
#pragma once

#include <cstddef>
#include <vector>

#include "binomial_schedule.hpp"

namespace coll::gather {

// A piece of a run of relative ranks [lo, hi): blocks of the absolute
// ranks first .. first + blocks - 1 (no wrap), which are the run's blocks
// from `offset` (in blocks, relative to lo) on.
struct Piece {
  int first;   // absolute rank of its first block
  int blocks;  // how many
  int offset;  // blocks before it in the run
};

// At most two pieces: before and after absolute rank 0.
inline std::vector<Piece> pieces(int lo, int hi, int root, int n) {
  std::vector<Piece> out;
  if (hi <= lo) return out;
  const int first = binomial::absolute(lo, root, n);
  const int len = hi - lo;
  const int before_wrap = n - first;
  if (len <= before_wrap) {
    out.push_back({first, len, 0});
  } else {
    out.push_back({first, before_wrap, 0});
    out.push_back({0, len - before_wrap, before_wrap});
  }
  return out;
}

// The run of v's subtree, and of each child's.
struct BlockRun {
  int lo;
  int hi;
};
inline BlockRun subtree_run(int v, int n) { return {v, binomial::subtree_end(v, n)}; }

}  // namespace coll::gather
