// libcoll datatypes and operators as Open MPI's: one table for the
// side-by-side benchmark and the comparison test (tests/ompi).
#pragma once

#include <coll/coll.h>
#include <mpi.h>

namespace bench {

// MPI_DATATYPE_NULL for a value that is not a libcoll datatype, and for
// COLL_FLOAT16 and COLL_BFLOAT16: Open MPI 4.1 has no standard type for them.
inline MPI_Datatype mpi_datatype(coll_datatype_t datatype) {
  switch (datatype) {
    case COLL_INT8: return MPI_INT8_T;
    case COLL_INT16: return MPI_INT16_T;
    case COLL_INT32: return MPI_INT32_T;
    case COLL_INT64: return MPI_INT64_T;
    case COLL_UINT8: return MPI_UINT8_T;
    case COLL_UINT16: return MPI_UINT16_T;
    case COLL_UINT32: return MPI_UINT32_T;
    case COLL_UINT64: return MPI_UINT64_T;
    case COLL_FLOAT: return MPI_FLOAT;
    case COLL_DOUBLE: return MPI_DOUBLE;
    case COLL_FLOAT_INT: return MPI_FLOAT_INT;
    case COLL_DOUBLE_INT: return MPI_DOUBLE_INT;
    case COLL_LONG_INT: return MPI_LONG_INT;
    case COLL_2INT: return MPI_2INT;
    case COLL_SHORT_INT: return MPI_SHORT_INT;
    case COLL_LONG_DOUBLE_INT: return MPI_LONG_DOUBLE_INT;
    default: return MPI_DATATYPE_NULL;
  }
}

// MPI_OP_NULL for a value that is not a libcoll operator.
inline MPI_Op mpi_op(coll_op_t op) {
  switch (op) {
    case COLL_SUM: return MPI_SUM;
    case COLL_PROD: return MPI_PROD;
    case COLL_MIN: return MPI_MIN;
    case COLL_MAX: return MPI_MAX;
    case COLL_BAND: return MPI_BAND;
    case COLL_BOR: return MPI_BOR;
    case COLL_BXOR: return MPI_BXOR;
    case COLL_LAND: return MPI_LAND;
    case COLL_LOR: return MPI_LOR;
    case COLL_LXOR: return MPI_LXOR;
    case COLL_MAXLOC: return MPI_MAXLOC;
    case COLL_MINLOC: return MPI_MINLOC;
    default: return MPI_OP_NULL;
  }
}

}  // namespace bench
