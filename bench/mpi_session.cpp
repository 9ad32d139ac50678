// Session of coll_bench_mpi: Open MPI and libcoll in one process, both
// spanning the ranks that mpirun started (libcoll finds them through
// mpirun's PMIx server).
#include <mpi.h>

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

struct Session::Libraries {
  // MPI first, as a host application would: libcoll's PMIx client then
  // joins the PMIx session that MPI_Init opened.
  Libraries(int* argc, char*** argv) : mpi_library(argc, argv), coll_library(argc, argv) {}

  MpiLibrary mpi_library;
  CollLibrary coll_library;  // finalized before MPI (reverse order)
  MpiRunner mpi;
  CollRunner coll{coll_comm_world()};
};

Session::Session(int* argc, char*** argv) : libraries_(std::make_unique<Libraries>(argc, argv)) {
  CollRunner& coll = libraries_->coll;
  MpiRunner& mpi = libraries_->mpi;
  runners_ = {&coll, &mpi};
  // MPI's rank 0: when libcoll fell back to singletons every process is its
  // rank 0.
  reporting_ = mpi.rank() == 0;
  problem_ = size_mismatch(mpi, coll);
  info_.ranks = coll.size();
  info_.transport = coll.transport();
  info_.bootstrap = coll.bootstrap();
  info_.mpi_version = MpiLibrary::version();
}

Session::~Session() = default;

void* Session::alloc_mem(size_t bytes) {
  void* pointer = nullptr;
  return MPI_Alloc_mem(static_cast<MPI_Aint>(bytes), MPI_INFO_NULL, &pointer) == MPI_SUCCESS
             ? pointer
             : nullptr;
}

void Session::release_mem(void* pointer) { MPI_Free_mem(pointer); }

void Session::end_job_after_error(int code) const { MpiLibrary::abort_job(code); }

}  // namespace bench
