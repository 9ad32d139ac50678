// main() of the multi-process suite: every rank runs every test in the
// same order (each test issues the same collectives on every rank). Rank 0
// prints GoogleTest's usual output; the other ranks print only their
// failures, tagged with their rank. The exit status is this rank's result,
// and collrun returns the first non-zero one, so a failure on any rank
// fails the job.
#include <coll/coll.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "rank_failure_printer.hpp"

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
  mp::RankFailurePrinter::install_for_rank(rank);

  const int result = RUN_ALL_TESTS();

  status = coll_finalize();
  if (status != COLL_SUCCESS) {
    std::fprintf(stderr, "[rank %d] coll_finalize failed: %s\n", rank, coll_strerror(status));
    return 1;
  }
  return result;
}
