#include "mpi_runner.hpp"

#include "mpi_map.hpp"

#include <mpi.h>

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

void MpiRunner::run(Collective collective, const Workload& workload, const Message& message) {
  if (collective == Collective::barrier) {  // no message: its datatype is not looked up
    barrier();
    return;
  }
  const int count = mpi_count(message.count);
  const MPI_Datatype datatype = checked_datatype(workload.datatype);
  switch (collective) {
    case Collective::allreduce:
      check_mpi(MPI_Allreduce(message.send, message.recv, count, datatype, checked_op(workload.op),
                              MPI_COMM_WORLD),
                "MPI_Allreduce");
      return;
    case Collective::bcast:
      check_mpi(MPI_Bcast(message.send, count, datatype, workload.root, MPI_COMM_WORLD),
                "MPI_Bcast");
      return;
    case Collective::barrier:
      return;  // above
  }
}

void MpiRunner::allreduce_doubles(double* values, size_t count, coll_op_t op) {
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, values, mpi_count(count), MPI_DOUBLE, checked_op(op), MPI_COMM_WORLD),
      "MPI_Allreduce");
}

}  // namespace bench
