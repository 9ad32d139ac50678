// ULFM's recovery functions (coll_mpi_ft.h) on the communicators the shim
// serves: each calls the coll_comm_* function of the mapped libcoll
// communicator; failures go through the communicator's error handler, as
// for the collectives (COLL_ERR_PEER_LOST: MPIX_ERR_PROC_FAILED,
// COLL_ERR_REVOKED: MPIX_ERR_REVOKED).
//
// Open MPI 4.1 has no ULFM: on a communicator the shim does not serve there
// is nothing to forward to (MPI_ERR_COMM). Nor can it make an MPI
// communicator that leaves a dead process out (its own creators talk to
// every member of the parent), so MPIX_Comm_shrink gives an MPI
// communicator only where no member failed: a PMPI_Comm_dup then holds the
// survivors, who are every member, and the shrunken libcoll communicator
// serves it. Where members failed the survivors free the libcoll
// communicator and get MPI_ERR_UNSUPPORTED_OPERATION, all alike (shrink
// gives every survivor the same group). Under mpirun shrink and agree fail
// before that (COLL_ERR_INVALID_ARG: libcoll's PMIx bootstrap has no
// survivors' rounds), which makes the MPI side of a shrink moot there.
//
// Communicators of one process share one libcoll communicator in the shim
// (comms.cpp): revoking it would revoke every one of them, so recovery is
// not served on them.
#include <cstdio>
#include <string>
#include <vector>

#include "shim.hpp"

namespace shim {
namespace {

// comm's ShimComm for fn, or nullptr after reporting MPI_ERR_COMM (*rc).
ShimComm* served_comm(MPI_Comm comm, const char* fn, int* rc) {
  Reason why = Reason::kComm;
  ShimComm* s = g_active.load() ? lookup(comm, false, &why) : nullptr;
  std::string reason;
  if (!g_active.load()) {
    reason = "the shim serves no communicator in this job (disabled, or libcoll did not come up)";
  } else if (!s) {
    reason = std::string("not served by libcoll_mpi (") + reason_name(why) +
             "); Open MPI 4.1 has no ULFM to forward it to";
  } else if (s->size == 1 && comm != MPI_COMM_WORLD) {
    reason = "a communicator of one process shares its libcoll communicator with the others of "
             "one process in libcoll_mpi: recovery is not served on it";
    s = nullptr;
  }
  if (s) return s;
  forget_error();
  *rc = raise_class(comm, handler_of(comm), fn, MPI_ERR_COMM, reason);
  return nullptr;
}

int coll_error(MPI_Comm comm, const ShimComm* s, const char* fn, int status) {
  return raise_error(comm, handler_of(comm), fn, status, coll_comm_last_error(s->lc));
}

// The ranks of comm that this process knows as failed, increasing.
int known_failed(MPI_Comm comm, ShimComm* s, const char* fn, std::vector<int>* ranks) {
  ranks->assign(size_t(s->size), -1);
  int count = 0;
  const int status = coll_comm_get_failed(s->lc, s->size, ranks->data(), &count);
  if (status != COLL_SUCCESS) return coll_error(comm, s, fn, status);
  ranks->resize(size_t(count));
  return MPI_SUCCESS;
}

int group_of(MPI_Comm comm, const std::vector<int>& ranks, MPI_Group* group) {
  MPI_Group all;
  int rc = PMPI_Comm_group(comm, &all);
  if (rc != MPI_SUCCESS) return rc;
  rc = PMPI_Group_incl(all, int(ranks.size()), ranks.data(), group);
  PMPI_Group_free(&all);
  return rc;
}

}  // namespace
}  // namespace shim

using shim::ShimComm;

extern "C" {

int MPIX_Comm_revoke(MPI_Comm comm) {
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, "MPIX_Comm_revoke", &rc);
  if (!s) return rc;
  const int status = coll_comm_revoke(s->lc);
  return status == COLL_SUCCESS ? MPI_SUCCESS : shim::coll_error(comm, s, "MPIX_Comm_revoke", status);
}

int MPIX_Comm_is_revoked(MPI_Comm comm, int* flag) {
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, "MPIX_Comm_is_revoked", &rc);
  if (!s) return rc;
  const int status = coll_comm_is_revoked(s->lc, flag);
  return status == COLL_SUCCESS ? MPI_SUCCESS
                                : shim::coll_error(comm, s, "MPIX_Comm_is_revoked", status);
}

int MPIX_Comm_agree(MPI_Comm comm, int* flag) {
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, "MPIX_Comm_agree", &rc);
  if (!s) return rc;
  const int status = coll_comm_agree(s->lc, flag);
  return status == COLL_SUCCESS ? MPI_SUCCESS : shim::coll_error(comm, s, "MPIX_Comm_agree", status);
}

int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm* newcomm) {
  const char* fn = "MPIX_Comm_shrink";
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, fn, &rc);
  if (!s) return rc;
  if (!newcomm)
    return shim::raise_class(comm, shim::handler_of(comm), fn, MPI_ERR_ARG, "newcomm is NULL");
  coll_comm_t lc = COLL_COMM_NULL;
  const int status = coll_comm_shrink(s->lc, &lc);
  if (status != COLL_SUCCESS) return shim::coll_error(comm, s, fn, status);
  int size = 0;
  coll_comm_size(lc, &size);
  if (size != s->size) {
    coll_comm_free(&lc);  // every survivor is here, with the same group
    return shim::raise_class(
        comm, shim::handler_of(comm), fn, MPI_ERR_UNSUPPORTED_OPERATION,
        std::to_string(size) + " of " + std::to_string(s->size) +
            " processes survived; Open MPI 4.1 cannot make an MPI communicator that leaves the "
            "failed ones out (it has no ULFM)");
  }
  // No member failed: MPI's own dup (not the shim's: the copy callback
  // makes nothing outside it) and the shrunken libcoll communicator.
  rc = PMPI_Comm_dup(comm, newcomm);
  if (rc != MPI_SUCCESS) {
    coll_comm_free(&lc);
    return rc;
  }
  shim::adopt(*newcomm, lc);
  return MPI_SUCCESS;
}

int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group* failedgrp) {
  const char* fn = "MPIX_Comm_get_failed";
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, fn, &rc);
  if (!s) return rc;
  std::vector<int> ranks;
  if ((rc = shim::known_failed(comm, s, fn, &ranks)) != MPI_SUCCESS) return rc;
  return shim::group_of(comm, ranks, failedgrp);
}

int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int* num_acked) {
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, "MPIX_Comm_ack_failed", &rc);
  if (!s) return rc;
  const int status = coll_comm_ack_failed(s->lc, num_to_ack, num_acked);
  return status == COLL_SUCCESS ? MPI_SUCCESS
                                : shim::coll_error(comm, s, "MPIX_Comm_ack_failed", status);
}

// The older interface: acknowledges every failure known now and remembers
// which, for MPIX_Comm_failure_get_acked.
int MPIX_Comm_failure_ack(MPI_Comm comm) {
  const char* fn = "MPIX_Comm_failure_ack";
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, fn, &rc);
  if (!s) return rc;
  std::vector<int> ranks;
  if ((rc = shim::known_failed(comm, s, fn, &ranks)) != MPI_SUCCESS) return rc;
  int acked = 0;
  const int status = coll_comm_ack_failed(s->lc, int(ranks.size()), &acked);
  if (status != COLL_SUCCESS) return shim::coll_error(comm, s, fn, status);
  s->acked = std::move(ranks);
  return MPI_SUCCESS;
}

int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group* failedgrp) {
  int rc = MPI_SUCCESS;
  ShimComm* s = shim::served_comm(comm, "MPIX_Comm_failure_get_acked", &rc);
  if (!s) return rc;
  return shim::group_of(comm, s->acked, failedgrp);
}

}  // extern "C"
