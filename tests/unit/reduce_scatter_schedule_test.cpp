// The reduce-scatter schedules (ring, recursive halving with the fold)
// simulated on every rank at once, without any transport: contributions
// are sets of ranks, and every block must end at its rank with every
// rank's contribution exactly once.
#include "reduce_scatter_schedule.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace coll::reduce_scatter {
namespace {

constexpr int kMaxRanks = 40;
using Set = uint64_t;  // a bit per rank
using Blocks = std::vector<Set>;

Set all_of(int n) { return n == 64 ? ~Set(0) : (Set(1) << n) - 1; }

TEST(ReduceScatterSchedule, OffsetsArePrefixSums) {
  const size_t counts[] = {3, 0, 5, 1};
  EXPECT_EQ(offsets(counts, 0, 4), (std::vector<size_t>{0, 3, 3, 8, 9}));
  EXPECT_EQ(offsets(nullptr, 7, 3), (std::vector<size_t>{0, 7, 14, 21}));
}

TEST(ReduceScatterSchedule, RingReducesEveryBlockOnceAtItsRank) {
  for (int n = 2; n <= kMaxRanks; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    std::vector<Blocks> acc(static_cast<size_t>(n), Blocks(size_t(n), 0));
    for (int s = 0; s < n - 1; ++s) {
      auto next = acc;
      for (int r = 0; r < n; ++r) {
        const int to = (r + 1) % n, b = ring_send_block(r, s, n);
        // The right neighbour expects this block now.
        EXPECT_EQ(ring_recv_block(to, s, n), b);
        const Set sent = s == 0 ? Set(1) << r : acc[size_t(r)][size_t(b)];
        EXPECT_NE(sent, 0u) << "sends a partial it has not made";
        EXPECT_EQ(sent & (Set(1) << to), 0u) << "a contribution twice";
        next[size_t(to)][size_t(b)] = sent | (Set(1) << to);
      }
      acc = std::move(next);
    }
    for (int r = 0; r < n; ++r) EXPECT_EQ(acc[size_t(r)][size_t(r)], all_of(n));
  }
}

TEST(ReduceScatterSchedule, SegmentsAreRunsOfWholeBlocks) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    const binomial::Doubling d = binomial::doubling(n);
    EXPECT_EQ(segment_first_block(0, d), 0);
    EXPECT_EQ(segment_first_block(d.pof2, d), n);
    for (int v = 0; v < d.pof2; ++v) {
      const int len = segment_first_block(v + 1, d) - segment_first_block(v, d);
      EXPECT_EQ(len, v < d.extra ? 2 : 1);
      // The exchange rank's own rank is in its segment, and so is the
      // folded rank it serves.
      const int r = binomial::doubling_to_rank(v, d);
      EXPECT_GE(r, segment_first_block(v, d));
      EXPECT_LT(r, segment_first_block(v + 1, d));
      if (serves_folded(v, d) >= 0) {
        EXPECT_EQ(serves_folded(v, d), r - 1);
      }
    }
  }
}

TEST(ReduceScatterSchedule, RecursiveHalvingReducesEveryBlockOnceAtItsRank) {
  for (int n = 2; n <= kMaxRanks; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const binomial::Doubling d = binomial::doubling(n);
    // mine[r][b]: the contributions rank r holds for block b.
    std::vector<Blocks> mine(static_cast<size_t>(n), Blocks(size_t(n), 0));
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < n; ++b) mine[size_t(r)][size_t(b)] = Set(1) << r;
    for (int r = 1; r < 2 * d.extra; r += 2)  // the fold: r - 1 into r
      for (int b = 0; b < n; ++b) mine[size_t(r)][size_t(b)] |= mine[size_t(r - 1)][size_t(b)];
    auto block_of_segment = [&](int seg) { return segment_first_block(seg, d); };
    for (int m = d.pof2 / 2; m >= 1; m /= 2) {
      auto next = mine;
      for (int v = 0; v < d.pof2; ++v) {
        const int r = binomial::doubling_to_rank(v, d), p = binomial::doubling_to_rank(v ^ m, d);
        const binomial::Window keep = binomial::halving_keep(v, m);
        // What the partner gives is what we keep.
        const binomial::Window theirs = binomial::halving_give(v ^ m, m);
        EXPECT_EQ(theirs.lo, keep.lo);
        EXPECT_EQ(theirs.hi, keep.hi);
        for (int b = block_of_segment(keep.lo); b < block_of_segment(keep.hi); ++b) {
          EXPECT_EQ(mine[size_t(r)][size_t(b)] & mine[size_t(p)][size_t(b)], 0u);
          next[size_t(r)][size_t(b)] = mine[size_t(r)][size_t(b)] | mine[size_t(p)][size_t(b)];
        }
      }
      mine = std::move(next);
    }
    for (int v = 0; v < d.pof2; ++v) {
      const int r = binomial::doubling_to_rank(v, d);
      for (int b = block_of_segment(v); b < block_of_segment(v + 1); ++b)
        EXPECT_EQ(mine[size_t(r)][size_t(b)], all_of(n)) << "block " << b << " at rank " << r;
    }
  }
}

}  // namespace
}  // namespace coll::reduce_scatter
