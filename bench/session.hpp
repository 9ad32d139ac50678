// The libraries one run of the benchmark measures: started in the
// constructor, stopped in the destructor. coll_bench links
// coll_session.cpp (libcoll alone, launched by collrun); coll_bench_mpi
// links mpi_session.cpp (Open MPI and libcoll in one process, launched by
// mpirun).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "report.hpp"
#include "runner.hpp"

namespace bench {

class Session {
 public:
  // Starts the libraries (defined by the program's session file). Throws
  // LibraryError when a library does not start.
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // True when another library runs beside libcoll.
  bool side_by_side() const { return runners_.size() > 1; }
  // Non-empty when the libraries cannot be measured together; every rank
  // sees the same problem, so every rank can stop without a hang.
  const std::string& startup_problem() const { return problem_; }
  // This process prints the tables and writes the files.
  bool reporting() const { return reporting_; }
  // libcoll first.
  const std::vector<Runner*>& runners() const { return runners_; }
  // Reduces the timings over the ranks: libcoll.
  Runner& reducer() const { return *runners_.front(); }
  // The other library (MPI) side by side, else null: its barrier can start
  // both libraries' collectives (--sync mpi).
  Runner* peer() const { return runners_.size() > 1 ? runners_.back() : nullptr; }
  // ranks, transport, bootstrap and the other library's version.
  const RunInfo& run_info() const { return info_; }
  // After a fatal error on this rank. Under MPI it ends the whole job
  // (MPI_Abort): the peers would otherwise wait in an MPI collective
  // forever. With libcoll alone it returns: the peers' waits end with
  // COLL_TIMEOUT or with the loss of this rank.
  void end_job_after_error(int code) const;
  // The library's registered memory (--alloc-mem): MPI_Alloc_mem where MPI
  // runs (coll_bench_mpi), coll_mem_alloc in coll_bench. nullptr when it
  // cannot; release frees it.
  static void* alloc_mem(size_t bytes);
  static void release_mem(void* pointer);

 private:
  // The libraries and their runners; set up by the constructor with the
  // members below.
  struct Libraries;
  std::unique_ptr<Libraries> libraries_;
  std::vector<Runner*> runners_;
  bool reporting_ = false;
  std::string problem_;
  RunInfo info_;
};

}  // namespace bench
