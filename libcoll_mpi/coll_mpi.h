/* libcoll_mpi: what the PMPI shim tells about itself, for tests and tools.
 *
 * libcoll_mpi.so serves MPI collectives with libcoll under an unmodified MPI
 * program (LD_PRELOAD, or linked before -lmpi); see README.md, "Use it under
 * an existing MPI program". A program that only may run under the shim looks
 * these up with dlsym(RTLD_DEFAULT, "coll_mpi_counts"). */
#ifndef COLL_MPI_H
#define COLL_MPI_H

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How many calls of an MPI function ("MPI_Allreduce", ...) this rank served
 * with libcoll and passed to MPI so far. 0, or -1 for a name the shim does
 * not intercept. */
int coll_mpi_counts(const char *mpi_function, unsigned long long *served,
                    unsigned long long *passed);
typedef int (*coll_mpi_counts_fn)(const char *, unsigned long long *, unsigned long long *);

/* 1 when collectives on comm go to a libcoll communicator now. */
int coll_mpi_comm_served(MPI_Comm comm);
typedef int (*coll_mpi_comm_served_fn)(MPI_Comm);

/* 1 when the shim serves calls at all (libcoll up on every rank, not
 * COLL_MPI_DISABLE=1). */
int coll_mpi_active(void);
typedef int (*coll_mpi_active_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* COLL_MPI_H */
