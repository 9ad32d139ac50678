// main() of the multi-process suite: every rank runs every test in the
// same order (each test issues the same collectives on every rank). Rank 0
// prints GoogleTest's usual output; the other ranks print only their
// failures, tagged with their rank. The exit status is this rank's result,
// and collrun returns the first non-zero one, so a failure on any rank
// fails the job.
#include <coll/coll.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace {

// Prints failures of a non-zero rank, which has no default printer.
class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "unknown", result.line_number(),
                 result.message());
  }

  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    }
  }

  void OnTestProgramEnd(const testing::UnitTest& unit) override {
    if (unit.failed_test_count() > 0) {
      std::fprintf(stderr, "[rank %d] %d test(s) failed\n", rank_, unit.failed_test_count());
    }
    std::fflush(stderr);
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  // The order of tests is the order of collectives: a shuffle must be the
  // same on every rank, so its seed cannot come from each rank's clock.
  if (GTEST_FLAG_GET(shuffle) && GTEST_FLAG_GET(random_seed) == 0) GTEST_FLAG_SET(random_seed, 1);

  int status = coll_init(&argc, &argv);
  if (status != COLL_SUCCESS) {
    std::fprintf(stderr, "coll_init failed: %s: %s\n", coll_strerror(status),
                 coll_comm_last_error(nullptr));
    return 1;
  }
  int rank = -1;
  coll_comm_rank(coll_comm_world(), &rank);
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }

  const int result = RUN_ALL_TESTS();

  status = coll_finalize();
  if (status != COLL_SUCCESS) {
    std::fprintf(stderr, "[rank %d] coll_finalize failed: %s\n", rank, coll_strerror(status));
    return 1;
  }
  return result;
}
