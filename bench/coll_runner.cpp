#include "coll_runner.hpp"

#include <string>

namespace bench {

CollLibrary::CollLibrary(int* argc, char*** argv) {
  check_coll(coll_init(argc, argv), "coll_init", nullptr);
}

CollLibrary::~CollLibrary() { coll_finalize(); }

void check_coll(int status, const char* call, coll_comm_t comm) {
  if (status == COLL_SUCCESS) return;
  std::string message = std::string(call) + " failed: " + coll_strerror(status);
  const char* detail = coll_comm_last_error(comm);
  if (detail && *detail) message += std::string(": ") + detail;
  throw LibraryError(message);
}

CollRunner::CollRunner(coll_comm_t comm) : comm_(comm) {
  if (!comm_) throw LibraryError("coll_comm_world() is NULL after coll_init");
  check_coll(coll_comm_rank(comm_, &rank_), "coll_comm_rank", comm_);
  check_coll(coll_comm_size(comm_, &size_), "coll_comm_size", comm_);
}

void CollRunner::barrier() { check_coll(coll_barrier(comm_), "coll_barrier", comm_); }

void CollRunner::run(Collective collective, const Workload& workload, const Message& message) {
  switch (collective) {
    case Collective::allreduce:
      check_coll(coll_allreduce(message.send, message.recv, message.count, workload.datatype,
                                workload.op, comm_),
                 "coll_allreduce", comm_);
      return;
    case Collective::bcast:
      check_coll(coll_bcast(message.send, message.count, workload.datatype, workload.root, comm_),
                 "coll_bcast", comm_);
      return;
    case Collective::barrier:
      check_coll(coll_barrier(comm_), "coll_barrier", comm_);
      return;
  }
}

std::string CollRunner::algorithm(Collective collective) const {
  const char* name = coll_comm_last_algorithm(comm_, collective_name(collective));
  return name ? name : "";
}

void CollRunner::allreduce_doubles(double* values, size_t count, coll_op_t op) {
  check_coll(coll_allreduce(COLL_IN_PLACE, values, count, COLL_DOUBLE, op, comm_), "coll_allreduce",
             comm_);
}

const char* CollRunner::transport() const {
  const char* name = coll_comm_transport_name(comm_);
  return name ? name : "unknown";
}

const char* CollRunner::bootstrap() const {
  const char* name = coll_comm_bootstrap_name(comm_);
  return name ? name : "unknown";
}

}  // namespace bench
