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
  // Throws LibraryError when a library does not start.
  Session(int* argc, char*** argv);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // True when another library runs beside libcoll.
  bool side_by_side() const;
  // Non-empty when the libraries cannot be measured together; every rank
  // sees the same problem, so every rank can stop without a hang.
  const std::string& startup_problem() const;
  // This process prints the tables and writes the files.
  bool reporting() const;
  // libcoll first.
  const std::vector<Runner*>& runners() const;
  // Reduces the timings over the ranks.
  Runner& reducer() const;
  // ranks, transport, bootstrap and the other library's version.
  RunInfo run_info() const;
  // After a fatal error on this rank. Under MPI it ends the whole job
  // (MPI_Abort): the peers would otherwise wait in an MPI collective
  // forever. With libcoll alone it returns: the peers' waits end with
  // COLL_TIMEOUT or with the loss of this rank.
  void end_job_after_error(int code) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace bench
