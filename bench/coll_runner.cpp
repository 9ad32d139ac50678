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

void CollRunner::run(Collective collective, const Workload& workload, const Message& m) {
  // The buffers and counts as make_message laid them out (collective.hpp);
  // the v-variants take the same arrays for sending and receiving.
  const coll_datatype_t type = workload.datatype;
  const coll_op_t op = workload.op;
  const int root = workload.root;
  const size_t* counts = m.counts.data();
  const size_t* displs = m.displs.data();
  int status = COLL_SUCCESS;
  switch (collective) {
    case Collective::allreduce:
      status = coll_allreduce(m.send, m.recv, m.count, type, op, comm_);
      break;
    case Collective::bcast:
      status = coll_bcast(m.send, m.count, type, root, comm_);
      break;
    case Collective::barrier:
      status = coll_barrier(comm_);
      break;
    case Collective::reduce:
      status = coll_reduce(m.send, m.recv, m.count, type, op, root, comm_);
      break;
    case Collective::allgather:
      status = coll_allgather(m.send, m.recv, m.count, type, comm_);
      break;
    case Collective::allgatherv:
      status = coll_allgatherv(m.send, m.count, m.recv, counts, displs, type, comm_);
      break;
    case Collective::reduce_scatter_block:
      status = coll_reduce_scatter_block(m.send, m.recv, counts[0], type, op, comm_);
      break;
    case Collective::reduce_scatter:
      status = coll_reduce_scatter(m.send, m.recv, counts, type, op, comm_);
      break;
    case Collective::gather:
      status = coll_gather(m.send, m.recv, m.count, type, root, comm_);
      break;
    case Collective::gatherv:
      status = coll_gatherv(m.send, m.count, m.recv, counts, displs, type, root, comm_);
      break;
    case Collective::scatter:
      status = coll_scatter(m.send, m.recv, m.count, type, root, comm_);
      break;
    case Collective::scatterv:
      status = coll_scatterv(m.send, counts, displs, m.recv, m.count, type, root, comm_);
      break;
    case Collective::alltoall:
      status = coll_alltoall(m.send, m.recv, m.count, type, comm_);
      break;
    case Collective::alltoallv:
      status = coll_alltoallv(m.send, counts, displs, m.recv, counts, displs, type, comm_);
      break;
    case Collective::scan:
      status = coll_scan(m.send, m.recv, m.count, type, op, comm_);
      break;
    case Collective::exscan:
      status = coll_exscan(m.send, m.recv, m.count, type, op, comm_);
      break;
  }
  if (status != COLL_SUCCESS) {
    check_coll(status, (std::string("coll_") + collective_name(collective)).c_str(), comm_);
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
