// Calls before coll_init and after coll_finalize get
// COLL_ERR_NOT_INITIALIZED (and never touch the buffers). Run alone, with
// no launcher: coll_init then makes a singleton, which must work in between.
#include <coll/coll.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace {

constexpr int64_t kUntouched = 0x0123456789abcdefll;

// Every call that needs the library, on `comm` (NULL before coll_init, the
// stale world handle after coll_finalize).
void expect_every_call_not_initialized(coll_comm_t comm, const char* when) {
  int64_t send[4] = {1, 2, 3, 4};
  int64_t recv[4] = {kUntouched, kUntouched, kUntouched, kUntouched};
  int out = -7;
  EXPECT_EQ(coll_allreduce(send, recv, 4, COLL_INT64, COLL_SUM, comm), COLL_ERR_NOT_INITIALIZED)
      << when;
  EXPECT_EQ(coll_allreduce(COLL_IN_PLACE, recv, 4, COLL_INT64, COLL_SUM, comm),
            COLL_ERR_NOT_INITIALIZED)
      << when;
  EXPECT_EQ(coll_bcast(recv, 4, COLL_INT64, 0, comm), COLL_ERR_NOT_INITIALIZED) << when;
  EXPECT_EQ(coll_barrier(comm), COLL_ERR_NOT_INITIALIZED) << when;
  EXPECT_EQ(coll_comm_rank(comm, &out), COLL_ERR_NOT_INITIALIZED) << when;
  EXPECT_EQ(coll_comm_size(comm, &out), COLL_ERR_NOT_INITIALIZED) << when;
  EXPECT_EQ(coll_finalize(), COLL_ERR_NOT_INITIALIZED) << when;
  EXPECT_EQ(out, -7) << when << ": out-argument written";
  for (int64_t v : recv) EXPECT_EQ(v, kUntouched) << when << ": buffer written";

  int flag = -1;
  EXPECT_EQ(coll_initialized(&flag), COLL_SUCCESS) << when;
  EXPECT_EQ(flag, 0) << when;
  EXPECT_EQ(coll_comm_world(), nullptr) << when;
  // Names of codes need no initialisation.
  ASSERT_NE(coll_strerror(COLL_ERR_NOT_INITIALIZED), nullptr);
  EXPECT_STRNE(coll_strerror(COLL_ERR_NOT_INITIALIZED), "");
  EXPECT_EQ(coll_datatype_size(COLL_DOUBLE), sizeof(double)) << when;
}

TEST(NotInitialized, BeforeInitAndAfterFinalize) {
  expect_every_call_not_initialized(nullptr, "before coll_init");

  ASSERT_EQ(coll_init(nullptr, nullptr), COLL_SUCCESS) << coll_comm_last_error(nullptr);
  int flag = 0;
  EXPECT_EQ(coll_initialized(&flag), COLL_SUCCESS);
  EXPECT_EQ(flag, 1);
  coll_comm_t world = coll_comm_world();
  ASSERT_NE(world, nullptr);
  int rank = -1;
  int size = -1;
  EXPECT_EQ(coll_comm_rank(world, &rank), COLL_SUCCESS);
  EXPECT_EQ(coll_comm_size(world, &size), COLL_SUCCESS);
  EXPECT_EQ(rank, 0);
  EXPECT_EQ(size, 1);
  EXPECT_STREQ(coll_comm_bootstrap_name(world), "singleton");

  // A singleton's collectives are copies: check they work.
  int32_t send[3] = {5, -6, 7};
  int32_t recv[3] = {0, 0, 0};
  EXPECT_EQ(coll_allreduce(send, recv, 3, COLL_INT32, COLL_SUM, world), COLL_SUCCESS);
  EXPECT_EQ(std::memcmp(send, recv, sizeof send), 0);
  EXPECT_EQ(coll_bcast(recv, 3, COLL_INT32, 0, world), COLL_SUCCESS);
  EXPECT_EQ(coll_barrier(world), COLL_SUCCESS);
  EXPECT_EQ(coll_bcast(recv, 3, COLL_INT32, 1, world), COLL_ERR_INVALID_ARG);

  ASSERT_EQ(coll_finalize(), COLL_SUCCESS);
  expect_every_call_not_initialized(world, "after coll_finalize");
}

}  // namespace

namespace {

// A malformed knob fails coll_init with a message that names it, and leaves
// the library uninitialised (a later coll_init with a good value works).
TEST(NotInitialized, MalformedKnobFailsInit) {
  const struct {
    const char* name;
    const char* value;
  } knobs[] = {{"COLL_BARRIER_ALGO", "bogus"},
               {"COLL_ALLREDUCE_ALGO", "bogus"},
               {"COLL_NUM_SLOTS", "2"},
               {"COLL_REGCACHE", "yes"},
               {"COLL_CHECK_ARGS", "2"},
               {"COLL_REGCACHE_MONITOR", "bogus"}};
  for (const auto& knob : knobs) {
    ASSERT_EQ(setenv(knob.name, knob.value, 1), 0);
    EXPECT_EQ(coll_init(nullptr, nullptr), COLL_ERR_INVALID_ARG) << knob.name;
    const char* why = coll_comm_last_error(nullptr);
    ASSERT_NE(why, nullptr);
    EXPECT_NE(std::strstr(why, knob.name), nullptr) << knob.name << ": " << why;
    int flag = -1;
    EXPECT_EQ(coll_initialized(&flag), COLL_SUCCESS);
    EXPECT_EQ(flag, 0) << knob.name;
    ASSERT_EQ(unsetenv(knob.name), 0);
  }
  setenv("COLL_BARRIER_ALGO", "dissemination", 1);
  ASSERT_EQ(coll_init(nullptr, nullptr), COLL_SUCCESS) << coll_comm_last_error(nullptr);
  EXPECT_EQ(coll_barrier(coll_comm_world()), COLL_SUCCESS);
  EXPECT_EQ(coll_finalize(), COLL_SUCCESS);
  unsetenv("COLL_BARRIER_ALGO");
}

}  // namespace
