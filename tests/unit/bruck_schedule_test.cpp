// Bruck's allgather and alltoall schedules, simulated on every rank at once
// without any transport: every block ends where it must, and every
// message is one that its receiver expects.
#include "bruck_schedule.hpp"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace coll::bruck {
namespace {

constexpr int kMaxRanks = 40;

TEST(BruckSchedule, StepsAreCeilLog2) {
  EXPECT_EQ(num_steps(1), 0);
  EXPECT_EQ(num_steps(2), 1);
  EXPECT_EQ(num_steps(3), 2);
  EXPECT_EQ(num_steps(4), 2);
  EXPECT_EQ(num_steps(5), 3);
  EXPECT_EQ(num_steps(8), 3);
  EXPECT_EQ(num_steps(9), 4);
}

TEST(BruckSchedule, AllgatherGathersEveryBlockInRotatedOrder) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    // held[r][i]: the rank whose block r holds at position i, -1: none yet.
    std::vector<std::vector<int>> held(static_cast<size_t>(n), std::vector<int>(size_t(n), -1));
    for (int r = 0; r < n; ++r) held[size_t(r)][0] = r;
    for (int s = 0; s < num_steps(n); ++s) {
      const int d = distance(s), m = allgather_blocks(s, n);
      ASSERT_GT(m, 0);
      auto next = held;
      for (int r = 0; r < n; ++r) {
        const int to = allgather_send_to(r, s, n);
        // The receiver expects it from us, and it lands behind what it has.
        EXPECT_EQ(allgather_recv_from(to, s, n), r);
        for (int i = 0; i < m; ++i) {
          ASSERT_GE(held[size_t(r)][size_t(i)], 0) << "sends a block it does not have";
          EXPECT_EQ(next[size_t(to)][size_t(d + i)], -1) << "overwrites a block";
          next[size_t(to)][size_t(d + i)] = held[size_t(r)][size_t(i)];
        }
      }
      held = std::move(next);
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < std::min(2 * d, n); ++i)
          EXPECT_EQ(held[size_t(r)][size_t(i)], allgather_block_at(r, i, n));
    }
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i)
        EXPECT_EQ(held[size_t(r)][size_t(i)], allgather_block_at(r, i, n));
  }
}

TEST(BruckSchedule, AlltoallDeliversEveryBlockToItsDestination) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    // at[r][i]: (source, destination) of the block at position i of rank r.
    std::vector<std::vector<std::pair<int, int>>> at(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i) at[size_t(r)].push_back({r, alltoall_initial_dest(r, i, n)});
    // Every rank sends every destination exactly one block.
    for (int r = 0; r < n; ++r) {
      std::vector<int> seen(static_cast<size_t>(n), 0);
      for (auto [src, dst] : at[size_t(r)]) ++seen[size_t(dst)];
      for (int c : seen) EXPECT_EQ(c, 1);
    }
    for (int s = 0; s < num_steps(n); ++s) {
      const std::vector<int> moved = alltoall_positions(s, n);
      EXPECT_LE(int(moved.size()), alltoall_max_moved(n));
      auto next = at;
      for (int r = 0; r < n; ++r) {
        const int to = alltoall_send_to(r, s, n);
        EXPECT_EQ(alltoall_recv_from(to, s, n), r);
        for (int i : moved) next[size_t(to)][size_t(i)] = at[size_t(r)][size_t(i)];
      }
      at = std::move(next);
    }
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < n; ++i)
        EXPECT_EQ(at[size_t(r)][size_t(i)], std::make_pair(alltoall_final_source(r, i, n), r))
            << "rank " << r << " position " << i;
  }
}

}  // namespace
}  // namespace coll::bruck
