#include "mpi_runner.hpp"

#include "mpi_map.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

namespace bench {
namespace {

void check_mpi(int status, const char* call) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(status, text, &length);
  throw LibraryError(std::string(call) +
                     " failed: " + std::string(text, static_cast<size_t>(length)));
}

MPI_Datatype checked_datatype(coll_datatype_t datatype) {
  const MPI_Datatype type = mpi_datatype(datatype);
  if (type == MPI_DATATYPE_NULL) throw LibraryError("no MPI datatype for this datatype");
  return type;
}

MPI_Op checked_op(coll_op_t op) {
  const MPI_Op mpi = mpi_op(op);
  if (mpi == MPI_OP_NULL) throw LibraryError("no MPI operator for this operator");
  return mpi;
}

// MPI counts are int.
int mpi_count(size_t count) {
  if (count > static_cast<size_t>(INT_MAX)) {
    throw LibraryError("message of " + std::to_string(count) +
                       " elements is beyond MPI's int count");
  }
  return static_cast<int>(count);
}

}  // namespace

MpiLibrary::MpiLibrary(int* argc, char*** argv) {
  // Errors come back as codes so that they are reported like libcoll's.
  check_mpi(MPI_Init(argc, argv), "MPI_Init");
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}

MpiLibrary::~MpiLibrary() { MPI_Finalize(); }

std::string MpiLibrary::version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(length));
  const size_t end = version.find_first_of(",\n");
  return end == std::string::npos ? version : version.substr(0, end);
}

void MpiLibrary::abort_job(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);  // MPI_Abort does not return; this satisfies [[noreturn]]
}

MpiRunner::MpiRunner() {
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
}

void MpiRunner::barrier() { check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

void MpiRunner::prepare(Collective collective, const Message& message) {
  counts_.clear();
  displs_.clear();
  for (size_t count : message.counts) counts_.push_back(mpi_count(count));
  for (size_t displ : message.displs) displs_.push_back(mpi_count(displ));
  // Blocks of count elements reach count x ranks: beyond int, MPI's int
  // displacements (and the non-v variants' buffers) cannot address them.
  if (traits(collective).layout == Layout::blocks) {
    mpi_count(message.count * static_cast<size_t>(std::max(size_, 1)));
  }
}

void MpiRunner::run(Collective collective, const Workload& workload, const Message& m) {
  if (collective == Collective::barrier) {  // no message: its datatype is not looked up
    barrier();
    return;
  }
  // The same calls on the same buffers as CollRunner::run, in MPI's terms:
  // counts and displacements as prepared, send and receive types alike.
  const int count = mpi_count(m.count);
  const MPI_Datatype type = checked_datatype(workload.datatype);
  const MPI_Op op = takes_op(collective) ? checked_op(workload.op) : MPI_OP_NULL;
  const int root = workload.root;
  const int* counts = counts_.data();
  const int* displs = displs_.data();
  const MPI_Comm world = MPI_COMM_WORLD;
  int status = MPI_SUCCESS;
  switch (collective) {
    case Collective::allreduce:
      status = MPI_Allreduce(m.send, m.recv, count, type, op, world);
      break;
    case Collective::bcast:
      status = MPI_Bcast(m.send, count, type, root, world);
      break;
    case Collective::barrier:
      break;  // above
    case Collective::reduce:
      status = MPI_Reduce(m.send, m.recv, count, type, op, root, world);
      break;
    case Collective::allgather:
      status = MPI_Allgather(m.send, count, type, m.recv, count, type, world);
      break;
    case Collective::allgatherv:
      status = MPI_Allgatherv(m.send, count, type, m.recv, counts, displs, type, world);
      break;
    case Collective::reduce_scatter_block:
      status = MPI_Reduce_scatter_block(m.send, m.recv, counts[0], type, op, world);
      break;
    case Collective::reduce_scatter:
      status = MPI_Reduce_scatter(m.send, m.recv, counts, type, op, world);
      break;
    case Collective::gather:
      status = MPI_Gather(m.send, count, type, m.recv, count, type, root, world);
      break;
    case Collective::gatherv:
      status = MPI_Gatherv(m.send, count, type, m.recv, counts, displs, type, root, world);
      break;
    case Collective::scatter:
      status = MPI_Scatter(m.send, count, type, m.recv, count, type, root, world);
      break;
    case Collective::scatterv:
      status = MPI_Scatterv(m.send, counts, displs, type, m.recv, count, type, root, world);
      break;
    case Collective::alltoall:
      status = MPI_Alltoall(m.send, count, type, m.recv, count, type, world);
      break;
    case Collective::alltoallv:
      status = MPI_Alltoallv(m.send, counts, displs, type, m.recv, counts, displs, type, world);
      break;
    case Collective::scan:
      status = MPI_Scan(m.send, m.recv, count, type, op, world);
      break;
    case Collective::exscan:
      status = MPI_Exscan(m.send, m.recv, count, type, op, world);
      break;
  }
  if (status != MPI_SUCCESS) {
    check_mpi(status, (std::string("MPI_") + traits(collective).title).c_str());
  }
}

void MpiRunner::allreduce_doubles(double* values, size_t count, coll_op_t op) {
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, values, mpi_count(count), MPI_DOUBLE, checked_op(op), MPI_COMM_WORLD),
      "MPI_Allreduce");
}

}  // namespace bench
