// Argument errors: every rank can see them alone, so they need no traffic
// and every rank gets COLL_ERR_INVALID_ARG before anything is written. A
// rejected call is not a failure of the communicator (only TIMEOUT,
// PEER_LOST and TRANSPORT are sticky): a valid collective still works after.
#include <climits>
#include <cstdint>
#include <set>
#include <string>

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

TEST_F(BadInput, BitwiseOpOnFloatingPoint) {
  coll_comm_t w = mp::world();
  for (coll_datatype_t datatype : {COLL_FLOAT, COLL_DOUBLE}) {
    for (coll_op_t op : {COLL_BAND, COLL_BOR, COLL_BXOR}) {
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
}

}  // namespace
