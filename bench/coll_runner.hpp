// libcoll behind the Runner interface, and the lifetime of libcoll itself.
#pragma once

#include <coll/coll.h>

#include "runner.hpp"

namespace bench {

// coll_init in the constructor, coll_finalize in the destructor.
class CollLibrary {
 public:
  CollLibrary(int* argc, char*** argv);
  ~CollLibrary();
  CollLibrary(const CollLibrary&) = delete;
  CollLibrary& operator=(const CollLibrary&) = delete;
};

// Throws LibraryError naming the call, the status and the communicator's
// last error unless status is COLL_SUCCESS.
void check_coll(int status, const char* call, coll_comm_t comm);

class CollRunner final : public Runner {
 public:
  explicit CollRunner(coll_comm_t comm);

  const char* library() const override { return "libcoll"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override;
  void run(Collective collective, const Workload& workload, const Message& message) override;
  std::string algorithm(Collective collective) const override;
  void allreduce_doubles(double* values, size_t count, coll_op_t op) override;

  const char* transport() const;
  const char* bootstrap() const;

 private:
  coll_comm_t comm_;
  int rank_ = 0;
  int size_ = 0;
};

}  // namespace bench
