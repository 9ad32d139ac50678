// The pairwise exchange (alltoall) and the recursive-doubling scan
// schedules without any transport.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pairwise_schedule.hpp"
#include "scan_schedule.hpp"

namespace coll {
namespace {

constexpr int kMaxRanks = 40;

TEST(PairwiseSchedule, EveryStepIsAMatchingAndEveryPairMeetsOnce) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::vector<std::vector<int>> met(static_cast<size_t>(n), std::vector<int>(size_t(n), 0));
    for (int s = 0; s < n; ++s)
      for (int r = 0; r < n; ++r) {
        const int p = pairwise::partner(r, s, n);
        ASSERT_GE(p, 0);
        ASSERT_LT(p, n);
        EXPECT_EQ(pairwise::partner(p, s, n), r) << "n=" << n << " s=" << s << " r=" << r;
        ++met[size_t(r)][size_t(p)];
      }
    for (int r = 0; r < n; ++r)
      for (int p = 0; p < n; ++p)
        EXPECT_EQ(met[size_t(r)][size_t(p)], 1) << n << " " << r << " " << p;
  }
}

// Contributions as ordered lists of ranks: the scan's result at r must be
// 0, 1, ..., r (exscan: ..., r - 1), and the partials the ranks of the
// group, in order: the lower group's operand first at every step.
TEST(ScanSchedule, RecursiveDoublingGivesEveryRankItsPrefixInRankOrder) {
  for (int n = 1; n <= kMaxRanks; ++n)
    for (bool exclusive : {false, true}) {
      SCOPED_TRACE("n=" + std::to_string(n) + (exclusive ? " exscan" : " scan"));
      std::vector<std::vector<int>> partial(static_cast<size_t>(n)), result(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        partial[size_t(r)] = {r};
        if (!exclusive) result[size_t(r)] = {r};
      }
      for (int m = 1; m < n; m <<= 1) {
        auto next = partial;
        for (int r = 0; r < n; ++r) {
          const int p = scan::partner(r, m, n);
          if (p < 0) {
            EXPECT_GE(r ^ m, n);
            continue;
          }
          EXPECT_EQ(scan::partner(p, m, n), r);
          const std::vector<int>& theirs = partial[size_t(p)];
          std::vector<int>& mine = next[size_t(r)];
          if (p < r) {
            std::vector<int> joined = theirs;
            joined.insert(joined.end(), result[size_t(r)].begin(), result[size_t(r)].end());
            result[size_t(r)] = joined;
            mine = theirs;
            mine.insert(mine.end(), partial[size_t(r)].begin(), partial[size_t(r)].end());
          } else {
            mine.insert(mine.end(), theirs.begin(), theirs.end());
          }
        }
        partial = std::move(next);
      }
      for (int r = 0; r < n; ++r) {
        std::vector<int> want;
        for (int k = 0; k < (exclusive ? r : r + 1); ++k) want.push_back(k);
        EXPECT_EQ(result[size_t(r)], want) << "rank " << r;
      }
    }
}

}  // namespace
}  // namespace coll
