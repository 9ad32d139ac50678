// The job as the launcher set it up, and the environment knobs the suite is
// run with (COLL_ALLREDUCE_ALGO, COLL_BCAST_ALGO, COLL_BARRIER_ALGO): asked
// for, they are used.
#include <cstdlib>
#include <string>
#include <vector>

#include "mp_support.hpp"

namespace {

TEST(Environment, RankAndSizeMatchTheLauncher) {
  int flag = 0;
  EXPECT_EQ(coll_initialized(&flag), COLL_SUCCESS);
  EXPECT_EQ(flag, 1);
  ASSERT_NE(mp::world(), nullptr);
  const int rank = mp::world_rank();
  const int size = mp::world_size();
  EXPECT_GE(rank, 0);
  EXPECT_LT(rank, size);
  if (const char* env_size = std::getenv("COLL_SIZE")) {
    EXPECT_EQ(size, std::atoi(env_size));
    ASSERT_NE(std::getenv("COLL_RANK"), nullptr);
    EXPECT_EQ(rank, std::atoi(std::getenv("COLL_RANK")));
    EXPECT_STREQ(coll_comm_bootstrap_name(mp::world()), "collrun");
  }
  const char* transport = coll_comm_transport_name(mp::world());
  ASSERT_NE(transport, nullptr);
  EXPECT_STRNE(transport, "");
}

TEST(Environment, DatatypeSizes) {
  EXPECT_EQ(coll_datatype_size(COLL_INT8), 1u);
  EXPECT_EQ(coll_datatype_size(COLL_INT16), 2u);
  EXPECT_EQ(coll_datatype_size(COLL_INT32), 4u);
  EXPECT_EQ(coll_datatype_size(COLL_INT64), 8u);
  EXPECT_EQ(coll_datatype_size(COLL_UINT8), 1u);
  EXPECT_EQ(coll_datatype_size(COLL_UINT16), 2u);
  EXPECT_EQ(coll_datatype_size(COLL_UINT32), 4u);
  EXPECT_EQ(coll_datatype_size(COLL_UINT64), 8u);
  EXPECT_EQ(coll_datatype_size(COLL_FLOAT), 4u);
  EXPECT_EQ(coll_datatype_size(COLL_DOUBLE), 8u);
  EXPECT_EQ(coll_datatype_size(COLL_FLOAT16), 2u);
  EXPECT_EQ(coll_datatype_size(COLL_BFLOAT16), 2u);
  EXPECT_EQ(coll_datatype_size(COLL_DATATYPE_COUNT), 0u);
  EXPECT_EQ(coll_datatype_size(static_cast<coll_datatype_t>(99)), 0u);
}

// With one rank there is nothing to schedule, so the knob is checked only
// where an algorithm really runs.
void expect_algorithm_honoured(const char* collective, const char* env_name) {
  const char* used = coll_comm_last_algorithm(mp::world(), collective);
  ASSERT_NE(used, nullptr) << collective;
  EXPECT_STRNE(used, "") << collective;
  const char* wanted = std::getenv(env_name);
  if (wanted != nullptr && *wanted != '\0' && mp::world_size() > 1) {
    EXPECT_STREQ(used, wanted) << env_name << " asked for " << wanted;
  }
}

TEST(Environment, AlgorithmKnobsAreHonoured) {
  // Both below and above one slot, so a size-based choice is covered.
  for (size_t count : {size_t{3}, mp::slot_bytes() / sizeof(float) * 2 + 5}) {
    std::vector<float> data(count, 1.0f);
    ASSERT_EQ(coll_allreduce(COLL_IN_PLACE, data.data(), count, COLL_FLOAT, COLL_SUM, mp::world()),
              COLL_SUCCESS);
    EXPECT_EQ(data[count - 1], static_cast<float>(mp::world_size()));
    expect_algorithm_honoured("allreduce", "COLL_ALLREDUCE_ALGO");

    ASSERT_EQ(coll_bcast(data.data(), count, COLL_FLOAT, mp::world_size() - 1, mp::world()),
              COLL_SUCCESS);
    expect_algorithm_honoured("bcast", "COLL_BCAST_ALGO");
  }
}

// In the Barrier suite: the barrier variants (meson.build) run only that
// suite, and must run the algorithm they ask for.
TEST(Barrier, AlgorithmKnobIsHonoured) {
  ASSERT_EQ(coll_barrier(mp::world()), COLL_SUCCESS) << coll_comm_last_error(mp::world());
  expect_algorithm_honoured("barrier", "COLL_BARRIER_ALGO");
}

}  // namespace
