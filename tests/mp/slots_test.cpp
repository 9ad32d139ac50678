// The window slots a rank commits in a peer's window (Channel::commit_slots,
// docs/architecture.md "Window layout"): the first message of a length
// into any of its slots there commits all of them to that length, so that
// no later call of that size meets a page for the first time (about 6 us a
// page on the development VM: a 16 KiB alltoall through the PMPI shim took
// 75-200 us instead of 2-3 in the calls that did). Read back through
// coll_comm_resource_stats, which counts what the rank committed.
#include <cstdlib>
#include <vector>

#include "mp_support.hpp"

namespace {

TEST(Slots, FirstMessageOfALengthCommitsEverySlotOfThePair) {
  if (mp::world_size() < 2) GTEST_SKIP() << "no peer to write to";
  // Zero-copy blocks go straight into the receiver's buffer, past the slots.
  if (std::getenv("COLL_ZCOPY_THRESHOLD") != nullptr) GTEST_SKIP() << "COLL_ZCOPY_THRESHOLD set";
  // A fresh communicator: no slot of its windows written yet.
  coll_comm_t comm = COLL_COMM_NULL;
  ASSERT_EQ(coll_comm_dup(mp::world(), &comm), COLL_SUCCESS);
  const int rank = mp::world_rank(), size = mp::world_size();
  // One page a rank, gathered at rank 0: past a line message, within the
  // smallest slot (4 KiB), so every other rank sends it as one message
  // through one slot of rank 0's window (the linear gather; a tree's
  // forwarded blocks are longer, and committed the same way).
  constexpr size_t kBytes = 4096;
  std::vector<float> mine(kBytes / sizeof(float), float(rank));
  std::vector<float> all(rank == 0 ? mine.size() * size_t(size) : 0);
  ASSERT_EQ(
      coll_gather(mine.data(), rank == 0 ? all.data() : nullptr, mine.size(), COLL_FLOAT, 0, comm),
      COLL_SUCCESS)
      << coll_comm_last_error(comm);
  coll_resource_stats_t stats{};
  ASSERT_EQ(coll_comm_resource_stats(comm, &stats), COLL_SUCCESS);
  if (rank != 0) {
    // Every slot of the pair (3 to 16 of them), not only the one written:
    // one slot's page was all that a single message committed before.
    EXPECT_GE(stats.slots_committed_bytes, 3 * kBytes);
    EXPECT_EQ(stats.slots_committed_bytes % kBytes, 0u) << stats.slots_committed_bytes;
    EXPECT_GE(stats.slot_peers, 1u);
  }
  for (int r = 1; r < (rank == 0 ? size : 1); ++r)
    EXPECT_EQ(all[size_t(r) * mine.size()], float(r)) << "block of rank " << r;
  EXPECT_EQ(coll_comm_free(&comm), COLL_SUCCESS);
}

}  // namespace
