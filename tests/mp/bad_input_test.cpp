// Argument errors: every rank can see them alone, so they need no traffic
// and every rank gets COLL_ERR_INVALID_ARG before anything is written. A
// rejected call is not a failure of the communicator (only TIMEOUT,
// PEER_LOST and TRANSPORT are sticky): a valid collective still works after.
#include <climits>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "mp_support.hpp"

namespace {

using mp::GuardedBuffer;

constexpr size_t kCount = 16;
constexpr uint64_t kRecvSeed = 0x7ec7;
constexpr uint64_t kSendSeed = 0x5e4d;

class BadInput : public testing::Test {
 protected:
  GuardedBuffer send_{kCount, sizeof(int64_t)};
  GuardedBuffer recv_{kCount, sizeof(int64_t)};

  void SetUp() override {
    send_.fill_pattern(kSendSeed);
    recv_.fill_pattern(kRecvSeed);
  }

  // The call was refused with INVALID_ARG, said why, and wrote nothing.
  void expect_rejected(int status, const std::string& what, coll_comm_t comm_for_message) {
    EXPECT_EQ(status, COLL_ERR_INVALID_ARG) << what << ": got " << coll_strerror(status);
    if (comm_for_message != nullptr) {
      const char* message = coll_comm_last_error(comm_for_message);
      ASSERT_NE(message, nullptr) << what;
      EXPECT_STRNE(message, "") << what << ": no message after a failure";
    }
    EXPECT_TRUE(recv_.has_pattern(kRecvSeed)) << what << ": recvbuf written by a rejected call";
    EXPECT_TRUE(send_.has_pattern(kSendSeed)) << what << ": sendbuf written by a rejected call";
    EXPECT_TRUE(recv_.guards_intact() && send_.guards_intact()) << what;
  }
};

TEST_F(BadInput, NullBuffersWithElements) {
  coll_comm_t w = mp::world();
  expect_rejected(coll_allreduce(nullptr, recv_.data(), kCount, COLL_INT64, COLL_SUM, w),
                  "allreduce null sendbuf", w);
  expect_rejected(coll_allreduce(send_.data(), nullptr, kCount, COLL_INT64, COLL_SUM, w),
                  "allreduce null recvbuf", w);
  expect_rejected(coll_allreduce(COLL_IN_PLACE, nullptr, kCount, COLL_INT64, COLL_SUM, w),
                  "allreduce in place, null recvbuf", w);
  expect_rejected(coll_bcast(nullptr, kCount, COLL_INT64, 0, w), "bcast null buffer", w);
}

TEST_F(BadInput, ByteCountOverflow) {
  coll_comm_t w = mp::world();
  // count * element size wraps around size_t: must be refused, not truncated.
  const size_t wraps_for_int16 = SIZE_MAX / 2 + 1;
  const size_t wraps_for_int64 = SIZE_MAX / 8 + 2;
  expect_rejected(
      coll_allreduce(send_.data(), recv_.data(), wraps_for_int16, COLL_INT16, COLL_SUM, w),
      "allreduce count*2 overflows", w);
  expect_rejected(
      coll_allreduce(COLL_IN_PLACE, recv_.data(), wraps_for_int64, COLL_INT64, COLL_MAX, w),
      "allreduce in place count*8 overflows", w);
  expect_rejected(coll_bcast(recv_.data(), wraps_for_int64, COLL_DOUBLE, 0, w),
                  "bcast count*8 overflows", w);
}

TEST_F(BadInput, UnknownDatatype) {
  coll_comm_t w = mp::world();
  for (int bad : {99, static_cast<int>(COLL_DATATYPE_COUNT), -1}) {
    const auto datatype = static_cast<coll_datatype_t>(bad);
    const std::string what = "datatype " + std::to_string(bad);
    expect_rejected(coll_allreduce(send_.data(), recv_.data(), kCount, datatype, COLL_SUM, w),
                    "allreduce " + what, w);
    expect_rejected(coll_bcast(recv_.data(), kCount, datatype, 0, w), "bcast " + what, w);
  }
}

TEST_F(BadInput, UnknownOp) {
  coll_comm_t w = mp::world();
  for (int bad : {99, static_cast<int>(COLL_OP_COUNT), -1}) {
    expect_rejected(coll_allreduce(send_.data(), recv_.data(), kCount, COLL_INT64,
                                   static_cast<coll_op_t>(bad), w),
                    "allreduce op " + std::to_string(bad), w);
  }
}

// The bitwise and the logical operators: MPI defines them on integers only.
TEST_F(BadInput, BitwiseOpOnFloatingPoint) {
  coll_comm_t w = mp::world();
  for (coll_datatype_t datatype : {COLL_FLOAT, COLL_DOUBLE, COLL_FLOAT16, COLL_BFLOAT16}) {
    for (coll_op_t op : {COLL_BAND, COLL_BOR, COLL_BXOR, COLL_LAND, COLL_LOR, COLL_LXOR}) {
      const std::string what =
          std::string("allreduce ") + mp::op_name(op) + " on " + mp::datatype_name(datatype);
      expect_rejected(coll_allreduce(send_.data(), recv_.data(), kCount / 2, datatype, op, w), what,
                      w);
      expect_rejected(coll_allreduce(COLL_IN_PLACE, recv_.data(), kCount / 2, datatype, op, w),
                      what + " in place", w);
    }
  }
}

TEST_F(BadInput, RootOutOfRange) {
  coll_comm_t w = mp::world();
  for (int root : {-1, mp::world_size(), mp::world_size() + 1, INT_MAX, INT_MIN}) {
    expect_rejected(coll_bcast(recv_.data(), kCount, COLL_INT64, root, w),
                    "bcast root " + std::to_string(root), w);
  }
}

TEST_F(BadInput, NullCommunicator) {
  expect_rejected(coll_allreduce(send_.data(), recv_.data(), kCount, COLL_INT64, COLL_SUM, nullptr),
                  "allreduce on NULL comm", nullptr);
  expect_rejected(coll_bcast(recv_.data(), kCount, COLL_INT64, 0, nullptr), "bcast on NULL comm",
                  nullptr);
  expect_rejected(coll_barrier(nullptr), "barrier on NULL comm", nullptr);
  int value = -7;
  expect_rejected(coll_comm_rank(nullptr, &value), "comm_rank on NULL comm", nullptr);
  expect_rejected(coll_comm_size(nullptr, &value), "comm_size on NULL comm", nullptr);
  EXPECT_EQ(value, -7) << "an out-argument was written by a rejected call";
}

TEST_F(BadInput, NullOutArguments) {
  expect_rejected(coll_comm_rank(mp::world(), nullptr), "comm_rank NULL rank", mp::world());
  expect_rejected(coll_comm_size(mp::world(), nullptr), "comm_size NULL size", mp::world());
  expect_rejected(coll_initialized(nullptr), "initialized NULL flag", nullptr);
}

// The collectives of issue 12. Every rank passes an argument it can see is
// wrong, so every rank refuses the call before any message.
TEST_F(BadInput, NewCollectivesRefuseNullBuffersOnEveryRank) {
  coll_comm_t w = mp::world();
  const int n = mp::world_size();
  void* r = recv_.data();
  const void* s = send_.data();
  std::vector<size_t> counts(size_t(n), 1), displs(size_t(n), 0);
  expect_rejected(coll_reduce(nullptr, r, kCount, COLL_INT64, COLL_SUM, 0, w),
                  "reduce null sendbuf", w);
  expect_rejected(coll_scan(nullptr, r, kCount, COLL_INT64, COLL_SUM, w), "scan null sendbuf", w);
  expect_rejected(coll_exscan(s, nullptr, kCount, COLL_INT64, COLL_SUM, w), "exscan null recvbuf",
                  w);
  expect_rejected(coll_allgather(s, nullptr, 1, COLL_INT64, w), "allgather null recvbuf", w);
  expect_rejected(coll_alltoall(nullptr, r, 1, COLL_INT64, w), "alltoall null sendbuf", w);
  expect_rejected(coll_reduce_scatter_block(s, nullptr, 1, COLL_INT64, COLL_SUM, w),
                  "reduce_scatter_block null recvbuf", w);
  expect_rejected(coll_reduce_scatter(s, r, nullptr, COLL_INT64, COLL_SUM, w),
                  "reduce_scatter null recvcounts", w);
  expect_rejected(coll_allgatherv(s, 1, r, nullptr, displs.data(), COLL_INT64, w),
                  "allgatherv null recvcounts", w);
  expect_rejected(coll_allgatherv(s, 1, r, counts.data(), nullptr, COLL_INT64, w),
                  "allgatherv null displs", w);
  expect_rejected(
      coll_alltoallv(s, counts.data(), nullptr, r, counts.data(), displs.data(), COLL_INT64, w),
      "alltoallv null sdispls", w);
  expect_rejected(
      coll_alltoallv(s, counts.data(), displs.data(), r, nullptr, displs.data(), COLL_INT64, w),
      "alltoallv null recvcounts", w);
  // Every rank a non-root with a NULL sendbuf, or the root with a NULL
  // recvbuf (gather), and the same for scatter the other way round.
  expect_rejected(coll_gather(nullptr, r, 1, COLL_INT64, 0, w), "gather null sendbuf", w);
  expect_rejected(coll_scatter(s, nullptr, 1, COLL_INT64, 0, w), "scatter null recvbuf", w);
  // The root refuses its NULL root-only buffer, the others COLL_IN_PLACE,
  // which only the root may pass.
  const bool root = mp::world_rank() == 0;
  expect_rejected(
      coll_reduce(COLL_IN_PLACE, root ? nullptr : r, kCount, COLL_INT64, COLL_SUM, 0, w),
      "reduce in place: root NULL recvbuf / in place elsewhere", w);
  expect_rejected(coll_gather(COLL_IN_PLACE, root ? nullptr : r, 1, COLL_INT64, 0, w),
                  "gather in place: root NULL recvbuf / in place elsewhere", w);
  // COLL_IN_PLACE is recvbuf's for scatter, never sendbuf's.
  expect_rejected(coll_scatter(COLL_IN_PLACE, r, 1, COLL_INT64, 0, w), "scatter in place sendbuf",
                  w);
}

// Arguments that only the root uses: on a communicator of one rank (every
// rank its own root), so that every rank sees its own mistake.
TEST_F(BadInput, RootOnlyArgumentsAreCheckedAtTheRoot) {
  coll_comm_t alone = COLL_COMM_NULL;
  ASSERT_EQ(coll_comm_split(mp::world(), mp::world_rank(), 0, &alone), COLL_SUCCESS);
  void* r = recv_.data();
  const void* s = send_.data();
  size_t one[1] = {1}, zero[1] = {0}, two[1] = {2};
  expect_rejected(coll_reduce(s, nullptr, kCount, COLL_INT64, COLL_SUM, 0, alone),
                  "reduce root null recvbuf", alone);
  expect_rejected(coll_gather(s, nullptr, 1, COLL_INT64, 0, alone), "gather root null recvbuf",
                  alone);
  expect_rejected(coll_gatherv(s, 1, r, nullptr, zero, COLL_INT64, 0, alone),
                  "gatherv root null recvcounts", alone);
  expect_rejected(coll_gatherv(s, 1, r, one, nullptr, COLL_INT64, 0, alone),
                  "gatherv root null displs", alone);
  expect_rejected(coll_gatherv(s, 1, nullptr, one, zero, COLL_INT64, 0, alone),
                  "gatherv root null recvbuf", alone);
  expect_rejected(coll_scatter(nullptr, r, 1, COLL_INT64, 0, alone), "scatter root null sendbuf",
                  alone);
  expect_rejected(coll_scatterv(s, nullptr, zero, r, 1, COLL_INT64, 0, alone),
                  "scatterv root null sendcounts", alone);
  expect_rejected(coll_scatterv(nullptr, one, zero, r, 1, COLL_INT64, 0, alone),
                  "scatterv root null sendbuf", alone);
  // The root's own count against its entry in the root's array.
  expect_rejected(coll_gatherv(s, 1, r, two, zero, COLL_INT64, 0, alone),
                  "gatherv root sendcount 1, recvcounts[root] 2", alone);
  expect_rejected(coll_scatterv(s, two, zero, r, 1, COLL_INT64, 0, alone),
                  "scatterv root recvcount 1, sendcounts[root] 2", alone);
  EXPECT_EQ(coll_comm_free(&alone), COLL_SUCCESS);
}

TEST_F(BadInput, NewCollectivesRefuseCountOverflowAndMismatchedOwnCounts) {
  coll_comm_t w = mp::world();
  const int n = mp::world_size(), me = mp::world_rank();
  void* r = recv_.data();
  const void* s = send_.data();
  // Per-rank counts that fit alone but not times the rank count (n >= 2),
  // or not at all (n == 1).
  const size_t huge = SIZE_MAX / 8 / size_t(n) + 1;
  expect_rejected(coll_reduce(s, r, SIZE_MAX / 2 + 1, COLL_INT16, COLL_SUM, 0, w),
                  "reduce count*2 overflows", w);
  expect_rejected(coll_allgather(s, r, huge, COLL_INT64, w), "allgather count*8*n overflows", w);
  expect_rejected(coll_alltoall(s, r, huge, COLL_INT64, w), "alltoall count*8*n overflows", w);
  expect_rejected(coll_gather(s, r, huge, COLL_INT64, 0, w), "gather count*8*n overflows", w);
  expect_rejected(coll_scatter(s, r, huge, COLL_INT64, 0, w), "scatter count*8*n overflows", w);
  expect_rejected(coll_reduce_scatter_block(s, r, huge, COLL_INT64, COLL_SUM, w),
                  "reduce_scatter_block recvcount*8*n overflows", w);
  expect_rejected(coll_scan(s, r, SIZE_MAX / 4, COLL_INT64, COLL_SUM, w), "scan count*8 overflows",
                  w);
  std::vector<size_t> counts(size_t(n), 1), displs(size_t(n), 0);
  for (int i = 0; i < n; ++i) displs[size_t(i)] = size_t(i);
  std::vector<size_t> big = counts;
  big[size_t(n - 1)] = SIZE_MAX / 8;
  expect_rejected(coll_allgatherv(s, 1, r, big.data(), displs.data(), COLL_INT64, w),
                  "allgatherv recvcounts overflow", w);
  expect_rejected(coll_reduce_scatter(s, r, big.data(), COLL_INT64, COLL_SUM, w),
                  "reduce_scatter recvcounts overflow", w);
  std::vector<size_t> far = displs;
  far[0] = SIZE_MAX / 8;
  expect_rejected(
      coll_alltoallv(s, counts.data(), far.data(), r, counts.data(), displs.data(), COLL_INT64, w),
      "alltoallv sdispls + count overflow", w);
  // What a rank sends itself against what it receives from itself.
  expect_rejected(coll_allgatherv(s, 2, r, counts.data(), displs.data(), COLL_INT64, w),
                  "allgatherv sendcount 2 but recvcounts[rank] 1", w);
  std::vector<size_t> more = counts;
  more[size_t(me)] = 2;
  expect_rejected(
      coll_alltoallv(s, more.data(), displs.data(), r, counts.data(), displs.data(), COLL_INT64, w),
      "alltoallv sendcounts[rank] 2 but recvcounts[rank] 1", w);
}

TEST_F(BadInput, NewCollectivesRefuseBadRootsOpsAndOverlaps) {
  coll_comm_t w = mp::world();
  void* r = recv_.data();
  const void* s = send_.data();
  for (int root : {-1, mp::world_size(), INT_MAX}) {
    const std::string at = " root " + std::to_string(root);
    expect_rejected(coll_reduce(s, r, 1, COLL_INT64, COLL_SUM, root, w), "reduce" + at, w);
    expect_rejected(coll_gather(s, r, 1, COLL_INT64, root, w), "gather" + at, w);
    expect_rejected(coll_scatter(s, r, 1, COLL_INT64, root, w), "scatter" + at, w);
  }
  expect_rejected(coll_reduce(s, r, 4, COLL_DOUBLE, COLL_BXOR, 0, w), "reduce bxor on double", w);
  expect_rejected(coll_scan(s, r, 4, COLL_FLOAT, COLL_BAND, w), "scan band on float", w);
  expect_rejected(coll_exscan(s, r, 4, COLL_INT64, static_cast<coll_op_t>(99), w), "exscan op 99",
                  w);
  expect_rejected(coll_reduce_scatter_block(s, r, 1, static_cast<coll_datatype_t>(99), COLL_SUM, w),
                  "reduce_scatter_block datatype 99", w);
  // The same buffer as sendbuf and recvbuf, not COLL_IN_PLACE, where the
  // two have different layouts (for the vector reductions, as for
  // allreduce, it means in place).
  expect_rejected(coll_alltoall(r, r, 1, COLL_INT64, w), "alltoall sendbuf == recvbuf", w);
  expect_rejected(coll_reduce_scatter_block(r, r, 1, COLL_INT64, COLL_SUM, w),
                  "reduce_scatter_block sendbuf == recvbuf", w);
}

TEST(StatusNames, EveryCodeHasADistinctNonEmptyName) {
  std::set<std::string> names;
  for (int status = COLL_SUCCESS; status <= COLL_ERR_INTERNAL; ++status) {
    const char* name = coll_strerror(status);
    ASSERT_NE(name, nullptr) << status;
    EXPECT_STRNE(name, "") << status;
    EXPECT_TRUE(names.insert(name).second) << "two codes named \"" << name << "\"";
  }
  for (int unknown : {-1, COLL_ERR_INTERNAL + 1, 12345}) {
    const char* name = coll_strerror(unknown);
    ASSERT_NE(name, nullptr) << unknown;
    EXPECT_STRNE(name, "") << unknown;
  }
}

// Collective, on every rank: refused calls left the communicator usable,
// and an empty collective with NULL buffers is valid (nothing to read).
TEST(BadInputAftermath, CommunicatorStillWorks) {
  const int ranks = mp::world_size();
  int64_t value = mp::world_rank() + 1;
  int64_t sum = 0;
  EXPECT_EQ(coll_allreduce(&value, &sum, 1, COLL_INT64, COLL_SUM, mp::world()), COLL_SUCCESS)
      << coll_comm_last_error(mp::world());
  EXPECT_EQ(sum, static_cast<int64_t>(ranks) * (ranks + 1) / 2);
  EXPECT_EQ(coll_allreduce(nullptr, nullptr, 0, COLL_INT32, COLL_SUM, mp::world()), COLL_SUCCESS)
      << coll_comm_last_error(mp::world());
  EXPECT_EQ(coll_bcast(nullptr, 0, COLL_INT32, 0, mp::world()), COLL_SUCCESS)
      << coll_comm_last_error(mp::world());
  EXPECT_EQ(coll_barrier(mp::world()), COLL_SUCCESS) << coll_comm_last_error(mp::world());
  // The new collectives with nothing to move, NULL everywhere.
  EXPECT_EQ(coll_reduce(nullptr, nullptr, 0, COLL_INT32, COLL_SUM, 0, mp::world()), COLL_SUCCESS);
  EXPECT_EQ(coll_alltoall(nullptr, nullptr, 0, COLL_INT32, mp::world()), COLL_SUCCESS);
  EXPECT_EQ(coll_gather(nullptr, nullptr, 0, COLL_INT32, 0, mp::world()), COLL_SUCCESS);
  EXPECT_EQ(coll_exscan(nullptr, nullptr, 0, COLL_INT32, COLL_SUM, mp::world()), COLL_SUCCESS);
}

}  // namespace
