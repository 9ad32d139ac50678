// The binomial gather and scatter schedule without any transport: the
// pieces of a run name exactly its blocks, and a simulated gather brings
// every block to the root at its place.
#include "gather_schedule.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace coll::gather {
namespace {

constexpr int kMaxRanks = 33;

TEST(GatherSchedule, PiecesNameTheRunsBlocksInOrder) {
  for (int n = 1; n <= kMaxRanks; ++n)
    for (int root = 0; root < n; ++root)
      for (int lo = 0; lo < n; ++lo)
        for (int hi = lo; hi <= n; ++hi) {
          SCOPED_TRACE("n=" + std::to_string(n) + " root=" + std::to_string(root) +
                       " run=" + std::to_string(lo) + ".." + std::to_string(hi));
          const std::vector<Piece> ps = pieces(lo, hi, root, n);
          EXPECT_LE(ps.size(), 2u);
          int offset = 0;
          for (const Piece& p : ps) {
            EXPECT_EQ(p.offset, offset);
            EXPECT_GT(p.blocks, 0);
            EXPECT_GE(p.first, 0);
            EXPECT_LE(p.first + p.blocks, n) << "a piece wraps";
            for (int b = 0; b < p.blocks; ++b)
              EXPECT_EQ(p.first + b, binomial::absolute(lo + offset + b, root, n));
            offset += p.blocks;
          }
          EXPECT_EQ(offset, hi - lo);
        }
}

// Each rank's scratch holds its subtree's blocks in relative order; a
// child's run lands at its offset in the parent's; the root places pieces
// by absolute rank. Simulated bottom-up (children have larger relative
// ranks, so a descending sweep sees every child before its parent).
TEST(GatherSchedule, SimulatedGatherPlacesEveryBlockAtTheRoot) {
  for (int n = 1; n <= kMaxRanks; ++n)
    for (int root = 0; root < n; ++root) {
      SCOPED_TRACE("n=" + std::to_string(n) + " root=" + std::to_string(root));
      std::vector<std::vector<int>> scratch(static_cast<size_t>(n));
      std::vector<int> at_root(static_cast<size_t>(n), -1);
      for (int v = n - 1; v >= 0; --v) {
        const BlockRun mine = subtree_run(v, n);
        std::vector<int>& s = scratch[size_t(v)];
        s.assign(size_t(mine.hi - mine.lo), -1);
        s[0] = binomial::absolute(v, root, n);  // its own block
        if (v == 0) at_root[size_t(root)] = root;
        for (int kid : binomial::children(v, n)) {
          const BlockRun run = subtree_run(kid, n);
          ASSERT_GE(run.lo, mine.lo);
          ASSERT_LE(run.hi, mine.hi);
          // What the child sends, piece by piece, from its scratch.
          for (const Piece& p : pieces(run.lo, run.hi, root, n))
            for (int b = 0; b < p.blocks; ++b) {
              const int block = scratch[size_t(kid)][size_t(p.offset + b)];
              if (v == 0) {
                EXPECT_EQ(at_root[size_t(p.first + b)], -1);
                at_root[size_t(p.first + b)] = block;
              } else {
                int& slot = s[size_t(run.lo - v + p.offset + b)];
                EXPECT_EQ(slot, -1);
                slot = block;
              }
            }
        }
        if (v != 0) {
          for (int i = 0; i < mine.hi - mine.lo; ++i)
            EXPECT_EQ(s[size_t(i)], binomial::absolute(v + i, root, n));
        }
      }
      for (int r = 0; r < n; ++r) EXPECT_EQ(at_root[size_t(r)], r);
    }
}

}  // namespace
}  // namespace coll::gather
