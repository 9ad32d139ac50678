/* libcoll_mpi: ULFM's fault-recovery functions (MPIX_Comm_revoke, _shrink,
 * _agree, ...) for a program that runs under the PMPI shim on an MPI
 * without them (Open MPI 4.1 as Debian builds it).
 *
 * A program written for ULFM includes <mpi.h>, then this header (installed
 * as <coll/coll_mpi_ft.h>), and links against MPI alone: libcoll_mpi.so,
 * preloaded, defines the functions. They work on the communicators the shim
 * serves (coll_mpi_comm_served), by libcoll's coll_comm_revoke, _shrink,
 * ... (include/coll/coll.h has their model); on any other communicator
 * they return MPI_ERR_COMM through its error handler. Served collectives on
 * a revoked communicator fail with MPIX_ERR_REVOKED, those that lost a
 * peer with MPIX_ERR_PROC_FAILED. What works under which launcher (shrink
 * and agree need collrun's bootstrap; under mpirun they fail with
 * MPI_ERR_ARG saying so) and what a shrunken communicator can do: README.md,
 * "Fault recovery through the shim".
 *
 * Where mpi.h has ULFM already (MPIX_ERR_PROC_FAILED defined, e.g. Open
 * MPI built --with-ft and its mpi-ext.h included first), this header
 * declares nothing: MPI's own functions are the ones to use. */
#ifndef COLL_MPI_FT_H
#define COLL_MPI_FT_H

#include <mpi.h>

#ifndef MPIX_ERR_PROC_FAILED

/* Error classes above Open MPI's predefined ones. The shim adds them to
 * MPI at MPI_Init (MPI_Add_error_class gives exactly these when nothing
 * else added a class before), so MPI_Error_class, MPI_Error_string and
 * error handlers know them; MPI_Error_string also appends libcoll's
 * message of the last failure. */
#define MPIX_ERR_PROC_FAILED (MPI_ERR_LASTCODE + 1)
#define MPIX_ERR_PROC_FAILED_PENDING (MPI_ERR_LASTCODE + 2)
#define MPIX_ERR_REVOKED (MPI_ERR_LASTCODE + 3)

#define COLL_MPI_FT 1 /* these come from libcoll_mpi */

#ifdef __cplusplus
extern "C" {
#endif

/* Not collective: every pending and later served call on comm fails with
 * MPIX_ERR_REVOKED, here and at every other member. */
int MPIX_Comm_revoke(MPI_Comm comm);
int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
/* Collective over the survivors: *newcomm holds them, in comm's order. */
int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
/* Collective over the survivors: *flag becomes the AND of their flags. */
int MPIX_Comm_agree(MPI_Comm comm, int *flag);
/* The processes of comm this process knows as failed (MPI_GROUP_EMPTY: none). */
int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
/* Acknowledges the first num_to_ack failures known; *num_acked: how many are. */
int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
/* The older interface: acknowledge every failure known now; the group of
 * those acknowledged by the last MPIX_Comm_failure_ack. */
int MPIX_Comm_failure_ack(MPI_Comm comm);
int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);

#ifdef __cplusplus
}
#endif

#endif /* MPIX_ERR_PROC_FAILED */

#endif /* COLL_MPI_FT_H */
