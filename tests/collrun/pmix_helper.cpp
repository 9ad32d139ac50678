// A rank program for the PMIx bootstrap tests, started by Open MPI's
// mpirun. argv[1] picks the scenario:
//
//   mpi-first    MPI_Init, then the bootstrap; checks rank and size against
//                MPI's and runs the allgather rounds
//   coll-first   the bootstrap, then MPI_Init; the bootstrap is destroyed
//                after MPI_Finalize
//   no-mpi       the bootstrap alone, twice in a row (as a program that
//                initializes twice)
//   timeout      rank 1 never joins; rank 0's allgather with a 1 s timeout
//                must fail with COLL_ERR_TIMEOUT, then it exits 42
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "allgather_rounds.hpp"
#include "bootstrap/bootstrap.hpp"
#include "error.hpp"

namespace {

using collrun_test::check;
using collrun_test::failures;

constexpr double kTimeout = 60;

void check_against_mpi(const coll::Bootstrap& bootstrap) {
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  check(std::strcmp(bootstrap.name(), "pmix") == 0,
        std::string("bootstrap ") + bootstrap.name() + ", expected pmix");
  check(bootstrap.rank() == rank,
        "rank " + std::to_string(bootstrap.rank()) + " but MPI says " + std::to_string(rank));
  check(bootstrap.size() == size,
        "size " + std::to_string(bootstrap.size()) + " but MPI says " + std::to_string(size));
}

void check_job_id(const coll::Bootstrap& bootstrap) {
  std::string id = bootstrap.job_id();
  check(id.starts_with("pmix_"), "job id " + id);
  for (char c : id)
    check(std::isalnum(static_cast<unsigned char>(c)) || c == '_',
          "job id " + id + " has '" + std::string(1, c) + "'");
}

int report(const coll::Bootstrap* bootstrap, const char* mode) {
  std::printf("ok %s rank %d of %d\n", mode, bootstrap ? bootstrap->rank() : -1,
              bootstrap ? bootstrap->size() : -1);
  return failures == 0 ? 0 : 1;
}

int run(const std::string& mode, int* argc, char*** argv) {
  if (mode == "mpi-first") {
    MPI_Init(argc, argv);
    auto bootstrap = coll::make_bootstrap_from_environment(kTimeout);
    check_against_mpi(*bootstrap);
    check_job_id(*bootstrap);
    collrun_test::run_rounds(*bootstrap, 0, kTimeout);
    MPI_Barrier(MPI_COMM_WORLD);
    int code = report(bootstrap.get(), mode.c_str());
    bootstrap.reset();
    MPI_Finalize();
    return code;
  }
  if (mode == "coll-first") {
    auto bootstrap = coll::make_bootstrap_from_environment(kTimeout);
    MPI_Init(argc, argv);
    check_against_mpi(*bootstrap);
    collrun_test::run_rounds(*bootstrap, 0, kTimeout);
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    check(sum == bootstrap->size(), "MPI_Allreduce gave " + std::to_string(sum));
    MPI_Finalize();
    collrun_test::run_rounds(*bootstrap, 50, kTimeout);
    int code = report(bootstrap.get(), mode.c_str());
    return code;  // the bootstrap is destroyed after MPI_Finalize
  }
  if (mode == "no-mpi") {
    for (int time = 0; time < 2; ++time) {
      auto bootstrap = coll::make_bootstrap_from_environment(kTimeout);
      check(std::strcmp(bootstrap->name(), "pmix") == 0, bootstrap->name());
      check_job_id(*bootstrap);
      collrun_test::run_rounds(*bootstrap, 100 * time, kTimeout);
      if (time == 1) return report(bootstrap.get(), mode.c_str());
    }
  }
  if (mode == "timeout") {
    auto bootstrap = coll::make_bootstrap_from_environment(kTimeout);
    if (bootstrap->rank() == 1) {
      for (int i = 0; i < 600; ++i) ::sleep(1);  // until mpirun ends it
      return 99;
    }
    if (bootstrap->rank() != 0) return 0;
    try {
      bootstrap->allgather("x", 1.0);
      check(false, "allgather succeeded without rank 1");
    } catch (const coll::Error& error) {
      std::printf("rank 0 got status %d: %s\n", error.status(), error.what());
      check(error.status() == COLL_ERR_TIMEOUT, "status");
    }
    std::fflush(stdout);
    bootstrap.reset();
    return failures == 0 ? 42 : 1;
  }
  std::fprintf(stderr, "pmix_helper: unknown mode %s\n", mode.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  try {
    return run(argv[1], &argc, &argv);
  } catch (const coll::Error& error) {
    std::printf("FAIL coll::Error status %d: %s\n", error.status(), error.what());
    return 1;
  }
}
