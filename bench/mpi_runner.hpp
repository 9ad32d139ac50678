// Open MPI behind the Runner interface, and the lifetime of MPI itself.
#pragma once

#include <string>
#include <vector>

#include "runner.hpp"

namespace bench {

// MPI_Init in the constructor, MPI_Finalize in the destructor.
class MpiLibrary {
 public:
  MpiLibrary(int* argc, char*** argv);
  ~MpiLibrary();
  MpiLibrary(const MpiLibrary&) = delete;
  MpiLibrary& operator=(const MpiLibrary&) = delete;

  // "Open MPI v4.1.4": the first part of MPI_Get_library_version.
  static std::string version();
  // Ends every process of the job (MPI_Abort): a rank alone cannot leave
  // without leaving its peers blocked in a collective.
  [[noreturn]] static void abort_job(int code);
};

class MpiRunner final : public Runner {
 public:
  MpiRunner();  // on MPI_COMM_WORLD

  const char* library() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void prepare(Collective collective, const Message& message) override;
  void run(Collective collective, const Workload& workload, const Message& message) override;
  std::string algorithm(Collective) const override { return ""; }
  void allreduce_doubles(double* values, size_t count, coll_op_t op) override;

 private:
  int rank_ = 0;
  int size_ = 0;
  // The message's counts and displacements as MPI's ints (prepare).
  std::vector<int> counts_;
  std::vector<int> displs_;
};

}  // namespace bench
