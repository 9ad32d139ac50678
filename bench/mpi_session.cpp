// Session of coll_bench_mpi: Open MPI and libcoll in one process, both
// spanning the ranks that mpirun started (libcoll finds them through
// mpirun's PMIx server).
#include "coll_runner.hpp"
#include "mpi_runner.hpp"
#include "session.hpp"

namespace bench {
namespace {

// libcoll that did not find mpirun's PMIx server runs as a singleton in
// every process: the two libraries would then measure different jobs.
std::string size_mismatch(const MpiRunner& mpi, const CollRunner& coll) {
  if (mpi.size() == coll.size()) return "";
  return "libcoll sees " + std::to_string(coll.size()) + " rank(s) (bootstrap '" +
         coll.bootstrap() + "') but MPI_COMM_WORLD has " + std::to_string(mpi.size()) +
         ": libcoll did not find mpirun's PMIx server, so the two libraries "
         "would measure different jobs. Is libcoll built with PMIx (meson "
         "configure -Dpmix=enabled)? coll_bench under collrun measures "
         "libcoll alone.";
}

}  // namespace

struct Session::State {
  // MPI first, as a host application would: libcoll's PMIx client then
  // joins the PMIx session that MPI_Init opened.
  State(int* argc, char*** argv) : mpi_library(argc, argv), coll_library(argc, argv) {}

  MpiLibrary mpi_library;
  CollLibrary coll_library;  // finalized before MPI (reverse order)
  MpiRunner mpi;
  CollRunner coll{coll_comm_world()};
  std::vector<Runner*> runners{&coll, &mpi};
  std::string problem = size_mismatch(mpi, coll);
};

Session::Session(int* argc, char*** argv) : state_(std::make_unique<State>(argc, argv)) {}

Session::~Session() = default;

bool Session::side_by_side() const { return true; }

const std::string& Session::startup_problem() const { return state_->problem; }

// MPI's rank 0: when libcoll fell back to singletons every process is its
// rank 0.
bool Session::reporting() const { return state_->mpi.rank() == 0; }

const std::vector<Runner*>& Session::runners() const { return state_->runners; }

Runner& Session::reducer() const { return state_->coll; }

RunInfo Session::run_info() const {
  RunInfo info;
  info.ranks = state_->coll.size();
  info.transport = state_->coll.transport();
  info.bootstrap = state_->coll.bootstrap();
  info.mpi_version = MpiLibrary::version();
  return info;
}

void Session::end_job_after_error(int code) const { MpiLibrary::abort_job(code); }

}  // namespace bench
