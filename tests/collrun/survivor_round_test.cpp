// Survivors' rounds (Bootstrap::survivor_round, issue 33): real jobs under
// collrun (survivor_helper.cpp prints each member's answer), and the
// backends that have no launcher to serve them.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "run_process.hpp"

namespace collrun_test {
namespace {

class SurvivorRounds : public ::testing::Test {
 protected:
  void SetUp() override {
    collrun_ = path_from_env("COLLRUN");
    helper_ = path_from_env("SURVIVOR_HELPER");
    ASSERT_FALSE(collrun_.empty()) << "COLLRUN is not set (run through meson)";
    ASSERT_FALSE(helper_.empty()) << "SURVIVOR_HELPER is not set";
  }
  ProcessResult run(int np, const std::string& mode, bool recovery = true) {
    std::vector<std::string> argv = {collrun_};
    if (recovery) argv.push_back("--enable-recovery");
    argv.insert(argv.end(), {"-np", std::to_string(np), helper_, mode});
    return run_process(argv, {}, 120);
  }
  // The line rank `rank` printed for round `key`, or "" when none.
  static std::string line_of(const ProcessResult& r, int rank, int key) {
    const std::string prefix =
        "rank " + std::to_string(rank) + " key " + std::to_string(key) + ": ";
    for (const std::string& line : split_lines(r.out))
      if (line.starts_with(prefix)) return line.substr(prefix.size());
    return "";
  }
  std::string collrun_;
  std::string helper_;
};

TEST_F(SurvivorRounds, EveryMemberGetsEveryBlob) {
  for (bool recovery : {true, false}) {
    ProcessResult r = run(4, "all", recovery);
    ASSERT_EQ(r.status, 0) << explain(r);
    for (int rank = 0; rank < 4; ++rank)
      EXPECT_EQ(line_of(r, rank, 7), "r0,r1,r2,r3") << "rank " << rank << "\n" << explain(r);
  }
  ProcessResult alone = run(1, "all");
  ASSERT_EQ(alone.status, 0) << explain(alone);
  EXPECT_EQ(line_of(alone, 0, 7), "r0") << explain(alone);
}

TEST_F(SurvivorRounds, AKilledMemberIsAbsentForEveryone) {
  ProcessResult r = run(4, "killed");
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank : {0, 1, 3})
    EXPECT_EQ(line_of(r, rank, 7), "r0,r1,-,r3") << "rank " << rank << "\n" << explain(r);
  EXPECT_EQ(line_of(r, 2, 7), "") << explain(r);
  EXPECT_NE(r.err.find("rank 2 ("), std::string::npos) << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
}

TEST_F(SurvivorRounds, ASilentMemberIsKilledAndAbsentForEveryone) {
  ProcessResult r = run(4, "stopped");
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank : {0, 1, 2})
    EXPECT_EQ(line_of(r, rank, 7), "r0,r1,r2,-") << "rank " << rank << "\n" << explain(r);
  EXPECT_NE(r.err.find("collrun: rank 3 did not join the survivors' round in 1 s; killed (a "
                       "silent rank counts as failed)"),
            std::string::npos)
      << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
}

TEST_F(SurvivorRounds, RoundsOfTwoKeysCompleteInAnyOrder) {
  ProcessResult r = run(4, "interleaved");
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_EQ(line_of(r, rank, 11), "a0,a1,a2,a3") << "rank " << rank << "\n" << explain(r);
    EXPECT_EQ(line_of(r, rank, 12), "b0,b1,b2,b3") << "rank " << rank << "\n" << explain(r);
  }
}

TEST_F(SurvivorRounds, MismatchedMembersFailEveryCaller) {
  ProcessResult r = run(4, "mismatch");
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(line_of(r, rank, 7).starts_with("status 1: collrun: ")) << "rank " << rank << "\n"
                                                                        << explain(r);
  // Whichever rank came first, collrun names both lists' sizes once it
  // sees the lists differ.
  EXPECT_NE(r.err.find("survivors' round 7: rank "), std::string::npos) << explain(r);
  EXPECT_TRUE(r.out.find("named 4 members") != std::string::npos ||
              r.out.find("named 3 members") != std::string::npos)
      << explain(r);
}

TEST(SurvivorRoundBackends, ASingletonIsItsOwnAnswer) {
  auto boot = coll::make_singleton_bootstrap();
  EXPECT_EQ(boot->survivor_round(3, {0}, "mine", 1),
            (std::vector<std::optional<std::string>>{"mine"}));
  try {
    boot->survivor_round(3, {0, 1}, "mine", 1);
    ADD_FAILURE() << "members {0, 1} in a job of one were accepted";
  } catch (const coll::Error& error) {
    EXPECT_EQ(error.status(), COLL_ERR_INVALID_ARG);
  }
}

// A backend with no launcher to serve the rounds: the default.
class PlainBootstrap final : public coll::Bootstrap {
 public:
  const char* name() const override { return "plain"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string job_id() const override { return "plain"; }
  const std::string& secret() const override { return secret_; }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double) override {
    return {mine, mine};
  }

 private:
  std::string secret_ = std::string(32, 's');
};

TEST(SurvivorRoundBackends, OtherBackendsRefuse) {
  PlainBootstrap boot;
  try {
    boot.survivor_round(3, {0, 1}, "mine", 1);
    ADD_FAILURE() << "a backend without survivors' rounds ran one";
  } catch (const coll::Error& error) {
    EXPECT_EQ(error.status(), COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(error.what()).find("needs collrun's bootstrap; this job's is plain"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace collrun_test
