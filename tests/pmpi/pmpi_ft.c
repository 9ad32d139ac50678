/* ULFM's recovery functions through the shim (coll_mpi_ft.h), under
 * mpirun with no failure: a program written for ULFM (mpi.h, then the
 * header) builds and runs. On a served communicator with
 * MPI_ERRORS_RETURN: no failure known (MPIX_Comm_get_failed: an empty
 * group; ack and the older failure_ack / get_acked: none); agree and
 * shrink give their result or, under mpirun's bootstrap, MPI_ERR_ARG with
 * libcoll's message naming collrun; MPIX_Comm_revoke by rank 0 makes the
 * next MPI_Allreduce fail with MPIX_ERR_REVOKED on every rank (MPI_Error_class
 * and MPI_Error_string know the class) and MPIX_Comm_is_revoked say so;
 * the revoked communicator is freed; the world still works. On a
 * communicator the shim does not serve: MPI_ERR_COMM. */
#include <mpi.h>

#include "coll_mpi.h"
#include "coll_mpi_ft.h"

#include <stdio.h>
#include <string.h>

#include "pmpi_check.h"

static int rank, size, errors;

static int class_of(int rc) {
  int cls = -1;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  return rc == MPI_SUCCESS ? MPI_SUCCESS : cls;
}

/* Under mpirun: the clear error of libcoll's PMIx bootstrap. */
static int needs_collrun(int rc, const char* what) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  CHECK(class_of(rc) == MPI_ERR_ARG && strstr(text, "collrun") != NULL, "%s: %d '%s'", what, rc, text);
  if (rank == 0) printf("pmpi_ft: %s: %s\n", what, text);
  return 1;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  coll_mpi_active_fn active_fn = NULL;
  lookup("coll_mpi_active", &active_fn, sizeof active_fn);
  const int active = active_fn && active_fn();
  if (rank == 0) printf("pmpi_ft: np %d, shim %s\n", size, active ? "active" : "inactive");
  CHECK(MPIX_ERR_PROC_FAILED > MPI_ERR_LASTCODE && MPIX_ERR_REVOKED == MPI_ERR_LASTCODE + 3,
        "error classes %d %d", MPIX_ERR_PROC_FAILED, MPIX_ERR_REVOKED);

  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);

  /* No failure known. */
  MPI_Group g = MPI_GROUP_NULL;
  int n = -1, flag = -1;
  CHECK(MPIX_Comm_get_failed(c, &g) == MPI_SUCCESS, "get_failed");
  MPI_Group_size(g, &n);
  CHECK(n == 0, "get_failed: %d failed", n);
  MPI_Group_free(&g);
  CHECK(MPIX_Comm_ack_failed(c, 0, &n) == MPI_SUCCESS && n == 0, "ack_failed: %d", n);
  CHECK(MPIX_Comm_failure_ack(c) == MPI_SUCCESS, "failure_ack");
  CHECK(MPIX_Comm_failure_get_acked(c, &g) == MPI_SUCCESS, "failure_get_acked");
  MPI_Group_size(g, &n);
  CHECK(n == 0, "failure_get_acked: %d", n);
  MPI_Group_free(&g);
  CHECK(MPIX_Comm_is_revoked(c, &flag) == MPI_SUCCESS && flag == 0, "is_revoked: %d", flag);

  /* agree: the AND, or (mpirun) the clear error. */
  flag = rank == 0 ? 0x3 : 0x6;
  int rc = MPIX_Comm_agree(c, &flag);
  if (rc == MPI_SUCCESS)
    CHECK(flag == (size > 1 ? 0x2 : 0x3), "agree: %#x", flag);
  else
    needs_collrun(rc, "MPIX_Comm_agree");

  /* shrink: every member (none failed), or the clear error. */
  MPI_Comm s = MPI_COMM_NULL;
  rc = MPIX_Comm_shrink(c, &s);
  if (rc == MPI_SUCCESS) {
    int ssize = 0, v = 1, sum = 0;
    MPI_Comm_size(s, &ssize);
    CHECK(ssize == size, "shrink: size %d", ssize);
    MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, s);
    CHECK(sum == size, "allreduce on the shrunken communicator: %d", sum);
    MPI_Comm_free(&s);
  } else {
    needs_collrun(rc, "MPIX_Comm_shrink");
  }

  /* A served collective works, then rank 0 revokes. */
  int v = rank, sum = -1;
  CHECK(MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c) == MPI_SUCCESS && sum == size * (size - 1) / 2,
        "allreduce before revoke: %d", sum);
  if (rank == 0) {
    CHECK(MPIX_Comm_revoke(c) == MPI_SUCCESS, "revoke");
    CHECK(MPIX_Comm_is_revoked(c, &flag) == MPI_SUCCESS && flag == 1, "is_revoked at once: %d", flag);
  }
  rc = MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, c);
  CHECK(class_of(rc) == MPIX_ERR_REVOKED, "allreduce after revoke: %d (class %d)", rc, class_of(rc));
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    CHECK(strstr(text, "MPIX_ERR_REVOKED") != NULL && strstr(text, "COLL_ERR_REVOKED") != NULL,
          "error string '%s'", text);
    if (rank == 0) printf("pmpi_ft: allreduce after revoke: %s\n", text);
  }
  flag = 0;
  CHECK(MPIX_Comm_is_revoked(c, &flag) == MPI_SUCCESS && flag == 1, "is_revoked: %d", flag);
  MPI_Comm_free(&c);

  /* Not served (congruent to world, not set up yet: MPI_Comm_idup). */
  MPI_Comm u;
  MPI_Request req;
  MPI_Comm_idup(MPI_COMM_WORLD, &u, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  MPI_Comm_set_errhandler(u, MPI_ERRORS_RETURN);
  rc = MPIX_Comm_revoke(u);
  CHECK(class_of(rc) == MPI_ERR_COMM, "revoke of an unserved communicator: %d", rc);
  rc = MPIX_Comm_get_failed(u, &g);
  CHECK(class_of(rc) == MPI_ERR_COMM, "get_failed of an unserved communicator: %d", rc);
  if (rank == 0 && rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    printf("pmpi_ft: unserved: %s\n", text);
  }
  MPI_Comm_free(&u);

  v = 1;
  sum = 0;
  MPI_Allreduce(&v, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  CHECK(sum == size, "world after: %d", sum);
  int all = 0;
  MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0 && all == 0) printf("pmpi_ft: all checks passed at np %d\n", size);
  MPI_Finalize();
  return all != 0;
}
