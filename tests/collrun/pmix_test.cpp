// The PMIx bootstrap under Open MPI's mpirun (pmix_helper.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "run_process.hpp"

namespace collrun_test {
namespace {

class PmixBootstrap : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    mpirun_ = path_from_env("MPIRUN");
    helper_ = path_from_env("PMIX_HELPER");
    ASSERT_FALSE(mpirun_.empty()) << "MPIRUN is not set (run through meson)";
    ASSERT_FALSE(helper_.empty()) << "PMIX_HELPER is not set";
  }

  ProcessResult mpirun(int np, const std::string& mode) {
    return run_process({mpirun_, "--allow-run-as-root", "--oversubscribe", "-np",
                        std::to_string(np), "-x", "COLL_BOOTSTRAP_DEBUG=1", helper_, mode},
                       // Not under collrun, whatever ran the test: PMIx must be chosen on
                       // its own merit.
                       {"COLL_BOOTSTRAP", "COLL_RANK", "COLL_SIZE", "COLL_JOBID",
                        // Containers often forbid the cross-memory attach Open MPI's
                        // shared-memory transport would use.
                        "OMPI_MCA_btl_vader_single_copy_mechanism=none",
                        // In a sanitizer build: Open MPI leaks by design, much of it from
                        // components it has unloaded (so no suppression can name them),
                        // and scanning its heap at exit takes minutes. libcoll's own
                        // leaks are checked by the tests that run without MPI.
                        "ASAN_OPTIONS=detect_leaks=0"},
                       240);
  }

  std::string mpirun_;
  std::string helper_;
};

TEST_P(PmixBootstrap, AllgathersUnderMpirun) {
  const std::string& mode = GetParam();
  ProcessResult r = mpirun(3, mode);
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(r.out.find("ok " + mode + " rank " + std::to_string(rank) + " of 3\n"),
              std::string::npos)
        << explain(r);
    EXPECT_NE(
        r.err.find("libcoll: bootstrap pmix: rank " + std::to_string(rank) + " of 3, job id pmix_"),
        std::string::npos)
        << explain(r);
  }
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
}

INSTANTIATE_TEST_SUITE_P(Modes, PmixBootstrap,
                         ::testing::Values("mpi-first", "coll-first", "no-mpi"));

TEST_F(PmixBootstrap, OneRank) {
  ProcessResult r = mpirun(1, "mpi-first");
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_NE(r.out.find("ok mpi-first rank 0 of 1\n"), std::string::npos) << explain(r);
}

TEST_F(PmixBootstrap, FenceTimesOutWhenARankDoesNotCome) {
  ProcessResult r = mpirun(2, "timeout");
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_NE(r.out.find("rank 0 got status 3: bootstrap allgather (PMIx fence"), std::string::npos)
      << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
  EXPECT_EQ(r.status, 42) << explain(r);  // mpirun passes rank 0's on
}

}  // namespace
}  // namespace collrun_test
