#include "mpi_runner.hpp"

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

MPI_Datatype mpi_datatype(coll_datatype_t datatype) {
  switch (datatype) {
    case COLL_INT8:
      return MPI_INT8_T;
    case COLL_INT16:
      return MPI_INT16_T;
    case COLL_INT32:
      return MPI_INT32_T;
    case COLL_INT64:
      return MPI_INT64_T;
    case COLL_UINT8:
      return MPI_UINT8_T;
    case COLL_UINT16:
      return MPI_UINT16_T;
    case COLL_UINT32:
      return MPI_UINT32_T;
    case COLL_UINT64:
      return MPI_UINT64_T;
    case COLL_FLOAT:
      return MPI_FLOAT;
    case COLL_DOUBLE:
      return MPI_DOUBLE;
    case COLL_DATATYPE_COUNT:
      break;
  }
  throw LibraryError("no MPI datatype for this datatype");
}

MPI_Op mpi_op(coll_op_t op) {
  switch (op) {
    case COLL_SUM:
      return MPI_SUM;
    case COLL_PROD:
      return MPI_PROD;
    case COLL_MIN:
      return MPI_MIN;
    case COLL_MAX:
      return MPI_MAX;
    case COLL_BAND:
      return MPI_BAND;
    case COLL_BOR:
      return MPI_BOR;
    case COLL_BXOR:
      return MPI_BXOR;
    case COLL_OP_COUNT:
      break;
  }
  throw LibraryError("no MPI operator for this operator");
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
  const int count = mpi_count(message.count);
  const MPI_Datatype datatype = mpi_datatype(workload.datatype);
  switch (collective) {
    case Collective::allreduce:
      check_mpi(MPI_Allreduce(message.send, message.recv, count, datatype, mpi_op(workload.op),
                              MPI_COMM_WORLD),
                "MPI_Allreduce");
      return;
    case Collective::bcast:
      check_mpi(MPI_Bcast(message.send, count, datatype, workload.root, MPI_COMM_WORLD),
                "MPI_Bcast");
      return;
  }
}

void MpiRunner::allreduce_doubles(double* values, size_t count, coll_op_t op) {
  check_mpi(
      MPI_Allreduce(MPI_IN_PLACE, values, mpi_count(count), MPI_DOUBLE, mpi_op(op), MPI_COMM_WORLD),
      "MPI_Allreduce");
}

}  // namespace bench
