// Fortran entry points.
//
// Open MPI's Fortran bindings (mpif.h, `use mpi`, `use mpi_f08`) call the
// PMPI_ functions directly, so a PMPI library must define the Fortran
// symbols itself. Open MPI 4.1 with gfortran: every routine exists as
// mpi_x_ (what gfortran calls), mpi_x__, mpi_x and MPI_X, all aliases of
// ompi_x_f, which the `use mpi_f08` wrappers (mpi_x_f08_) call in turn - so
// defining ompi_x_f too covers mpi_f08 programs. The arguments are all by
// reference, handles are MPI_Fint (MPI_Comm_f2c, MPI_Type_f2c, MPI_Op_f2c,
// MPI_Request_f2c/c2f), and the Fortran MPI_IN_PLACE / MPI_BOTTOM are the
// addresses of Open MPI's common blocks mpi_fortran_in_place_ and
// mpi_fortran_bottom_ (OMPI_F2C_IN_PLACE / OMPI_F2C_BOTTOM in Open MPI).
//
// Each entry point converts and calls the shim's C function, so Fortran
// callers get exactly the C behaviour. The waits defined here are the
// common ones; any other Fortran wait still completes served requests
// (Open MPI's progress engine drives them, state.cpp).
#include <vector>

#include "shim.hpp"

extern "C" {
// Open MPI's Fortran sentinels (libmpi.so; weak: the shim also loads where
// they do not exist, then no Fortran buffer is taken for them).
extern MPI_Fint mpi_fortran_in_place_ __attribute__((weak));
extern MPI_Fint mpi_fortran_bottom_ __attribute__((weak));
}

namespace {

void* f_buf(void* b) { return &mpi_fortran_bottom_ && b == &mpi_fortran_bottom_ ? MPI_BOTTOM : b; }
const void* f_send(void* b) {
  return &mpi_fortran_in_place_ && b == &mpi_fortran_in_place_ ? MPI_IN_PLACE : f_buf(b);
}
void set(MPI_Fint* ierr, int rc) {
  if (ierr) *ierr = MPI_Fint(rc);
}
constexpr size_t kStatusInts = sizeof(MPI_Status) / sizeof(MPI_Fint);
void status_out(const MPI_Status& s, MPI_Fint* f) {
  if (f != MPI_F_STATUS_IGNORE) PMPI_Status_c2f(&s, f);
}
MPI_Status* status_in(MPI_Status* s, MPI_Fint* f) { return f == MPI_F_STATUS_IGNORE ? MPI_STATUS_IGNORE : s; }

}  // namespace

#define COLL_MPI_FORTRAN_ALIASES(lower, upper)                                          \
  extern "C" decltype(mpi_##lower##_) mpi_##lower##__ __attribute__((alias("mpi_" #lower "_"))); \
  extern "C" decltype(mpi_##lower##_) mpi_##lower __attribute__((alias("mpi_" #lower "_")));     \
  extern "C" decltype(mpi_##lower##_) MPI_##upper __attribute__((alias("mpi_" #lower "_")));     \
  extern "C" decltype(mpi_##lower##_) ompi_##lower##_f __attribute__((alias("mpi_" #lower "_")));

extern "C" {

void mpi_init_(MPI_Fint* ierr) { set(ierr, MPI_Init(nullptr, nullptr)); }

void mpi_init_thread_(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
  int level = MPI_THREAD_SINGLE;
  set(ierr, MPI_Init_thread(nullptr, nullptr, int(*required), &level));
  *provided = MPI_Fint(level);
}

void mpi_finalize_(MPI_Fint* ierr) { set(ierr, MPI_Finalize()); }

void mpi_allreduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
                    MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Allreduce(f_send(sendbuf), f_buf(recvbuf), int(*count), PMPI_Type_f2c(*datatype),
                          PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm)));
}

void mpi_iallreduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                     MPI_Fint* op, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Iallreduce(f_send(sendbuf), f_buf(recvbuf), int(*count), PMPI_Type_f2c(*datatype),
                                PMPI_Op_f2c(*op), PMPI_Comm_f2c(*comm), &r);
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(r);
  set(ierr, rc);
}

void mpi_bcast_(void* buffer, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* root, MPI_Fint* comm,
                MPI_Fint* ierr) {
  set(ierr, MPI_Bcast(f_buf(buffer), int(*count), PMPI_Type_f2c(*datatype), int(*root),
                      PMPI_Comm_f2c(*comm)));
}

void mpi_ibcast_(void* buffer, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* root, MPI_Fint* comm,
                 MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Ibcast(f_buf(buffer), int(*count), PMPI_Type_f2c(*datatype), int(*root),
                            PMPI_Comm_f2c(*comm), &r);
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(r);
  set(ierr, rc);
}

void mpi_barrier_(MPI_Fint* comm, MPI_Fint* ierr) { set(ierr, MPI_Barrier(PMPI_Comm_f2c(*comm))); }

void mpi_ibarrier_(MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Ibarrier(PMPI_Comm_f2c(*comm), &r);
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(r);
  set(ierr, rc);
}

void mpi_comm_dup_(MPI_Fint* comm, MPI_Fint* newcomm, MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = MPI_Comm_dup(PMPI_Comm_f2c(*comm), &c);
  if (rc == MPI_SUCCESS) *newcomm = PMPI_Comm_c2f(c);
  set(ierr, rc);
}

void mpi_comm_split_(MPI_Fint* comm, MPI_Fint* color, MPI_Fint* key, MPI_Fint* newcomm,
                     MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = MPI_Comm_split(PMPI_Comm_f2c(*comm), int(*color), int(*key), &c);
  if (rc == MPI_SUCCESS) *newcomm = PMPI_Comm_c2f(c);
  set(ierr, rc);
}

void mpi_wait_(MPI_Fint* request, MPI_Fint* status, MPI_Fint* ierr) {
  MPI_Request r = PMPI_Request_f2c(*request);
  MPI_Status s;
  const int rc = MPI_Wait(&r, status_in(&s, status));
  if (rc == MPI_SUCCESS) {
    *request = PMPI_Request_c2f(r);
    status_out(s, status);
  }
  set(ierr, rc);
}

void mpi_test_(MPI_Fint* request, MPI_Fint* flag, MPI_Fint* status, MPI_Fint* ierr) {
  MPI_Request r = PMPI_Request_f2c(*request);
  MPI_Status s;
  int f = 0;
  const int rc = MPI_Test(&r, &f, status_in(&s, status));
  if (rc == MPI_SUCCESS) {
    *request = PMPI_Request_c2f(r);
    *flag = MPI_Fint(f ? 1 : 0);  // gfortran's .true.
    if (f) status_out(s, status);
  }
  set(ierr, rc);
}

void mpi_waitall_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* statuses, MPI_Fint* ierr) {
  const int n = int(*count);
  std::vector<MPI_Request> r(size_t(n > 0 ? n : 0));
  for (int i = 0; i < n; ++i) r[size_t(i)] = PMPI_Request_f2c(requests[i]);
  const bool ignore = statuses == MPI_F_STATUSES_IGNORE;
  std::vector<MPI_Status> s(ignore ? 0 : r.size());
  const int rc = MPI_Waitall(n, r.data(), ignore ? MPI_STATUSES_IGNORE : s.data());
  if (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) {
    for (int i = 0; i < n; ++i) {
      requests[i] = PMPI_Request_c2f(r[size_t(i)]);
      if (!ignore) PMPI_Status_c2f(&s[size_t(i)], statuses + size_t(i) * kStatusInts);
    }
  }
  set(ierr, rc);
}

}  // extern "C"

COLL_MPI_FORTRAN_ALIASES(init, INIT)
COLL_MPI_FORTRAN_ALIASES(init_thread, INIT_THREAD)
COLL_MPI_FORTRAN_ALIASES(finalize, FINALIZE)
COLL_MPI_FORTRAN_ALIASES(allreduce, ALLREDUCE)
COLL_MPI_FORTRAN_ALIASES(iallreduce, IALLREDUCE)
COLL_MPI_FORTRAN_ALIASES(bcast, BCAST)
COLL_MPI_FORTRAN_ALIASES(ibcast, IBCAST)
COLL_MPI_FORTRAN_ALIASES(barrier, BARRIER)
COLL_MPI_FORTRAN_ALIASES(ibarrier, IBARRIER)
COLL_MPI_FORTRAN_ALIASES(comm_dup, COMM_DUP)
COLL_MPI_FORTRAN_ALIASES(comm_split, COMM_SPLIT)
COLL_MPI_FORTRAN_ALIASES(wait, WAIT)
COLL_MPI_FORTRAN_ALIASES(test, TEST)
COLL_MPI_FORTRAN_ALIASES(waitall, WAITALL)
