// A GoogleTest listener for ranks other than 0, which run without the
// default printer: it prints only failures, tagged with the rank, so a job's
// output is rank 0's report plus whatever went wrong elsewhere.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>

namespace mp {

class RankFailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}

  // Replaces the default printer of this process by one of these (rank > 0).
  static void install_for_rank(int rank) {
    if (rank == 0) return;
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }

  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "unknown", result.line_number(),
                 result.message());
  }

  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(),
                   info.name());
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

}  // namespace mp
