// Barrier: that it returns, repeatedly, and that it really separates
// phases: no rank leaves barrier k before every rank has entered it.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "mp_support.hpp"

namespace {

namespace fs = std::filesystem;

TEST(Barrier, RepeatedBarriersSucceed) {
  for (int i = 0; i < 200; ++i) {
    const int status = coll_barrier(mp::world());
    ASSERT_EQ(status, COLL_SUCCESS)
        << mp::rank_tag() << " barrier " << i << ": " << coll_comm_last_error(mp::world());
  }
}

// Before barrier k each rank drops a marker file; after it, every rank must
// see the markers of all ranks for round k. One rank per round arrives late
// (it naps first), so a barrier that lets ranks through early is caught.
// Ranks share a directory named by a token from rank 0 (broadcast), which
// assumes one node: this suite runs on one.
TEST(Barrier, NoRankLeavesBeforeAllArrive) {
  const int rank = mp::world_rank();
  const int ranks = mp::world_size();
  uint64_t token = rank == 0 ? mp::mix(static_cast<uint64_t>(getpid()), 0xba221e2) : 0;
  ASSERT_EQ(coll_bcast(&token, 1, COLL_UINT64, 0, mp::world()), COLL_SUCCESS);
  const fs::path dir = fs::temp_directory_path() / ("coll-mp-barrier-" + std::to_string(token));
  if (rank == 0) fs::create_directories(dir);
  ASSERT_EQ(coll_barrier(mp::world()), COLL_SUCCESS);

  constexpr int kRounds = 12;
  for (int round = 0; round < kRounds; ++round) {
    if (round % ranks == rank) usleep(20 * 1000);  // arrive last; not a timing assertion
    std::ofstream(dir / (std::to_string(round) + "-" + std::to_string(rank))).put('x');
    EXPECT_EQ(coll_barrier(mp::world()), COLL_SUCCESS) << coll_comm_last_error(mp::world());
    for (int peer = 0; peer < ranks; ++peer) {
      EXPECT_TRUE(fs::exists(dir / (std::to_string(round) + "-" + std::to_string(peer))))
          << mp::rank_tag() << " left barrier " << round << " before rank " << peer
          << " entered it";
    }
  }
  EXPECT_EQ(coll_barrier(mp::world()), COLL_SUCCESS);
  if (rank == 0) {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
}

// A sequence of different collectives interleaved with barriers: each one
// must see the right data, not a neighbour's leftovers in a reused slot.
TEST(Barrier, InterleavedWithAllreduceAndBcast) {
  const int rank = mp::world_rank();
  const int ranks = mp::world_size();
  for (int step = 0; step < 40; ++step) {
    int64_t value = static_cast<int64_t>(rank + 1) * (step + 1);
    int64_t sum = -1;
    EXPECT_EQ(coll_allreduce(&value, &sum, 1, COLL_INT64, COLL_SUM, mp::world()), COLL_SUCCESS);
    EXPECT_EQ(sum, static_cast<int64_t>(step + 1) * ranks * (ranks + 1) / 2) << "step " << step;

    EXPECT_EQ(coll_barrier(mp::world()), COLL_SUCCESS);

    const int root = step % ranks;
    int32_t message[3] = {-1, -1, -1};
    if (rank == root) {
      message[0] = step;
      message[1] = root;
      message[2] = step * 1000 + root;
    }
    EXPECT_EQ(coll_bcast(message, 3, COLL_INT32, root, mp::world()), COLL_SUCCESS);
    EXPECT_EQ(message[0], step);
    EXPECT_EQ(message[1], root);
    EXPECT_EQ(message[2], step * 1000 + root);

    if (step % 3 == 0) {
      EXPECT_EQ(coll_barrier(mp::world()), COLL_SUCCESS);
    }
  }
}

}  // namespace
