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
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "shim.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

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

// The rest of the collectives. Counts and displacement arrays are passed
// through: MPI_Fint is int in Open MPI (asserted below).
static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER arrays are C int arrays");

#define F_TYPE(x) PMPI_Type_f2c(*(x))
#define F_COMM(x) PMPI_Comm_f2c(*(x))
#define F_OP(x) PMPI_Op_f2c(*(x))
#define F_INTS(x) reinterpret_cast<const int*>(x)
// An I-form: its request converted back when the call succeeded.
#define F_REQUEST_CALL(call)                      \
  MPI_Request r = MPI_REQUEST_NULL;               \
  const int rc = (call);                          \
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(r); \
  set(ierr, rc)

void mpi_reduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
                 MPI_Fint* root, MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Reduce(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype), F_OP(op),
                       int(*root), F_COMM(comm)));
}
void mpi_ireduce_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
                  MPI_Fint* root, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Ireduce(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype),
                             F_OP(op), int(*root), F_COMM(comm), &r));
}
void mpi_scan_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
               MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Scan(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype), F_OP(op),
                     F_COMM(comm)));
}
void mpi_iscan_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
                MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Iscan(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype),
                           F_OP(op), F_COMM(comm), &r));
}
void mpi_exscan_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
                 MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Exscan(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype), F_OP(op),
                       F_COMM(comm)));
}
void mpi_iexscan_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* op,
                  MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Iexscan(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype),
                             F_OP(op), F_COMM(comm), &r));
}
void mpi_reduce_scatter_block_(void* sendbuf, void* recvbuf, MPI_Fint* recvcount,
                               MPI_Fint* datatype, MPI_Fint* op, MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Reduce_scatter_block(f_send(sendbuf), f_buf(recvbuf), int(*recvcount),
                                     F_TYPE(datatype), F_OP(op), F_COMM(comm)));
}
void mpi_ireduce_scatter_block_(void* sendbuf, void* recvbuf, MPI_Fint* recvcount,
                                MPI_Fint* datatype, MPI_Fint* op, MPI_Fint* comm,
                                MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Ireduce_scatter_block(f_send(sendbuf), f_buf(recvbuf), int(*recvcount),
                                           F_TYPE(datatype), F_OP(op), F_COMM(comm), &r));
}
void mpi_reduce_scatter_(void* sendbuf, void* recvbuf, MPI_Fint* recvcounts, MPI_Fint* datatype,
                         MPI_Fint* op, MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Reduce_scatter(f_send(sendbuf), f_buf(recvbuf), F_INTS(recvcounts),
                               F_TYPE(datatype), F_OP(op), F_COMM(comm)));
}
void mpi_ireduce_scatter_(void* sendbuf, void* recvbuf, MPI_Fint* recvcounts, MPI_Fint* datatype,
                          MPI_Fint* op, MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Ireduce_scatter(f_send(sendbuf), f_buf(recvbuf), F_INTS(recvcounts),
                                     F_TYPE(datatype), F_OP(op), F_COMM(comm), &r));
}
void mpi_allgather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                    MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Allgather(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype), f_buf(recvbuf),
                          int(*recvcount), F_TYPE(recvtype), F_COMM(comm)));
}
void mpi_iallgather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                     MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* request,
                     MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Iallgather(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                f_buf(recvbuf), int(*recvcount), F_TYPE(recvtype), F_COMM(comm),
                                &r));
}
void mpi_allgatherv_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                     MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype, MPI_Fint* comm,
                     MPI_Fint* ierr) {
  set(ierr, MPI_Allgatherv(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype), f_buf(recvbuf),
                           F_INTS(recvcounts), F_INTS(displs), F_TYPE(recvtype), F_COMM(comm)));
}
void mpi_iallgatherv_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                      MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype, MPI_Fint* comm,
                      MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Iallgatherv(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                 f_buf(recvbuf), F_INTS(recvcounts), F_INTS(displs),
                                 F_TYPE(recvtype), F_COMM(comm), &r));
}
void mpi_gather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                 MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                 MPI_Fint* ierr) {
  set(ierr, MPI_Gather(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype), f_buf(recvbuf),
                       int(*recvcount), F_TYPE(recvtype), int(*root), F_COMM(comm)));
}
void mpi_igather_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                  MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                  MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Igather(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype), f_buf(recvbuf),
                             int(*recvcount), F_TYPE(recvtype), int(*root), F_COMM(comm), &r));
}
void mpi_gatherv_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                  MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype, MPI_Fint* root,
                  MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Gatherv(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype), f_buf(recvbuf),
                        F_INTS(recvcounts), F_INTS(displs), F_TYPE(recvtype), int(*root),
                        F_COMM(comm)));
}
void mpi_igatherv_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                   MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype, MPI_Fint* root,
                   MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Igatherv(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype), f_buf(recvbuf),
                              F_INTS(recvcounts), F_INTS(displs), F_TYPE(recvtype), int(*root),
                              F_COMM(comm), &r));
}
// scatter(v): MPI_IN_PLACE is the receive buffer's (at the root).
void mpi_scatter_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                  MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                  MPI_Fint* ierr) {
  set(ierr, MPI_Scatter(f_buf(sendbuf), int(*sendcount), F_TYPE(sendtype),
                        const_cast<void*>(f_send(recvbuf)), int(*recvcount), F_TYPE(recvtype),
                        int(*root), F_COMM(comm)));
}
void mpi_iscatter_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                   MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                   MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Iscatter(f_buf(sendbuf), int(*sendcount), F_TYPE(sendtype),
                              const_cast<void*>(f_send(recvbuf)), int(*recvcount),
                              F_TYPE(recvtype), int(*root), F_COMM(comm), &r));
}
void mpi_scatterv_(void* sendbuf, MPI_Fint* sendcounts, MPI_Fint* displs, MPI_Fint* sendtype,
                   void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root,
                   MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Scatterv(f_buf(sendbuf), F_INTS(sendcounts), F_INTS(displs), F_TYPE(sendtype),
                         const_cast<void*>(f_send(recvbuf)), int(*recvcount), F_TYPE(recvtype),
                         int(*root), F_COMM(comm)));
}
void mpi_iscatterv_(void* sendbuf, MPI_Fint* sendcounts, MPI_Fint* displs, MPI_Fint* sendtype,
                    void* recvbuf, MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root,
                    MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Iscatterv(f_buf(sendbuf), F_INTS(sendcounts), F_INTS(displs),
                               F_TYPE(sendtype), const_cast<void*>(f_send(recvbuf)),
                               int(*recvcount), F_TYPE(recvtype), int(*root), F_COMM(comm), &r));
}
void mpi_alltoall_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                   MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Alltoall(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype), f_buf(recvbuf),
                         int(*recvcount), F_TYPE(recvtype), F_COMM(comm)));
}
void mpi_ialltoall_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                    MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* request,
                    MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Ialltoall(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                               f_buf(recvbuf), int(*recvcount), F_TYPE(recvtype), F_COMM(comm),
                               &r));
}
void mpi_alltoallv_(void* sendbuf, MPI_Fint* sendcounts, MPI_Fint* sdispls, MPI_Fint* sendtype,
                    void* recvbuf, MPI_Fint* recvcounts, MPI_Fint* rdispls, MPI_Fint* recvtype,
                    MPI_Fint* comm, MPI_Fint* ierr) {
  set(ierr, MPI_Alltoallv(f_send(sendbuf), F_INTS(sendcounts), F_INTS(sdispls), F_TYPE(sendtype),
                          f_buf(recvbuf), F_INTS(recvcounts), F_INTS(rdispls), F_TYPE(recvtype),
                          F_COMM(comm)));
}
void mpi_ialltoallv_(void* sendbuf, MPI_Fint* sendcounts, MPI_Fint* sdispls, MPI_Fint* sendtype,
                     void* recvbuf, MPI_Fint* recvcounts, MPI_Fint* rdispls, MPI_Fint* recvtype,
                     MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPI_Ialltoallv(f_send(sendbuf), F_INTS(sendcounts), F_INTS(sdispls),
                                F_TYPE(sendtype), f_buf(recvbuf), F_INTS(recvcounts),
                                F_INTS(rdispls), F_TYPE(recvtype), F_COMM(comm), &r));
}

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
// The persistent forms (Open MPI's mpif-ext.h / mpi_ext: MPIX_X_INIT). The
// MPI_Info argument is converted and passed on (the C entry points ignore
// it where they serve the call).
#define F_INFO(x) PMPI_Info_f2c(*(x))
void mpix_allreduce_init_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                          MPI_Fint* op, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request,
                          MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Allreduce_init(f_send(sendbuf), f_buf(recvbuf), int(*count),
                                     F_TYPE(datatype), F_OP(op), F_COMM(comm), F_INFO(info), &r));
}
void mpix_bcast_init_(void* buffer, MPI_Fint* count, MPI_Fint* datatype, MPI_Fint* root,
                      MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Bcast_init(f_buf(buffer), int(*count), F_TYPE(datatype), int(*root),
                                 F_COMM(comm), F_INFO(info), &r));
}
void mpix_barrier_init_(MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Barrier_init(F_COMM(comm), F_INFO(info), &r));
}
void mpix_reduce_init_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                       MPI_Fint* op, MPI_Fint* root, MPI_Fint* comm, MPI_Fint* info,
                       MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Reduce_init(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype),
                                  F_OP(op), int(*root), F_COMM(comm), F_INFO(info), &r));
}
void mpix_scan_init_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                     MPI_Fint* op, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request,
                     MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Scan_init(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype),
                                F_OP(op), F_COMM(comm), F_INFO(info), &r));
}
void mpix_exscan_init_(void* sendbuf, void* recvbuf, MPI_Fint* count, MPI_Fint* datatype,
                       MPI_Fint* op, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request,
                       MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Exscan_init(f_send(sendbuf), f_buf(recvbuf), int(*count), F_TYPE(datatype),
                                  F_OP(op), F_COMM(comm), F_INFO(info), &r));
}
void mpix_reduce_scatter_block_init_(void* sendbuf, void* recvbuf, MPI_Fint* recvcount,
                                     MPI_Fint* datatype, MPI_Fint* op, MPI_Fint* comm,
                                     MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Reduce_scatter_block_init(f_send(sendbuf), f_buf(recvbuf), int(*recvcount),
                                                F_TYPE(datatype), F_OP(op), F_COMM(comm),
                                                F_INFO(info), &r));
}
void mpix_reduce_scatter_init_(void* sendbuf, void* recvbuf, MPI_Fint* recvcounts,
                               MPI_Fint* datatype, MPI_Fint* op, MPI_Fint* comm, MPI_Fint* info,
                               MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Reduce_scatter_init(f_send(sendbuf), f_buf(recvbuf), F_INTS(recvcounts),
                                          F_TYPE(datatype), F_OP(op), F_COMM(comm), F_INFO(info),
                                          &r));
}
void mpix_allgather_init_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                          MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* info,
                          MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Allgather_init(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                     f_buf(recvbuf), int(*recvcount), F_TYPE(recvtype),
                                     F_COMM(comm), F_INFO(info), &r));
}
void mpix_allgatherv_init_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                           MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype,
                           MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Allgatherv_init(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                      f_buf(recvbuf), F_INTS(recvcounts), F_INTS(displs),
                                      F_TYPE(recvtype), F_COMM(comm), F_INFO(info), &r));
}
void mpix_gather_init_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                       MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                       MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Gather_init(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                  f_buf(recvbuf), int(*recvcount), F_TYPE(recvtype), int(*root),
                                  F_COMM(comm), F_INFO(info), &r));
}
void mpix_gatherv_init_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                        MPI_Fint* recvcounts, MPI_Fint* displs, MPI_Fint* recvtype,
                        MPI_Fint* root, MPI_Fint* comm, MPI_Fint* info, MPI_Fint* request,
                        MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Gatherv_init(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                   f_buf(recvbuf), F_INTS(recvcounts), F_INTS(displs),
                                   F_TYPE(recvtype), int(*root), F_COMM(comm), F_INFO(info), &r));
}
void mpix_scatter_init_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                        MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm,
                        MPI_Fint* info, MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Scatter_init(f_buf(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                   const_cast<void*>(f_send(recvbuf)), int(*recvcount),
                                   F_TYPE(recvtype), int(*root), F_COMM(comm), F_INFO(info), &r));
}
void mpix_scatterv_init_(void* sendbuf, MPI_Fint* sendcounts, MPI_Fint* displs,
                         MPI_Fint* sendtype, void* recvbuf, MPI_Fint* recvcount,
                         MPI_Fint* recvtype, MPI_Fint* root, MPI_Fint* comm, MPI_Fint* info,
                         MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Scatterv_init(f_buf(sendbuf), F_INTS(sendcounts), F_INTS(displs),
                                    F_TYPE(sendtype), const_cast<void*>(f_send(recvbuf)),
                                    int(*recvcount),
                                    F_TYPE(recvtype), int(*root), F_COMM(comm), F_INFO(info),
                                    &r));
}
void mpix_alltoall_init_(void* sendbuf, MPI_Fint* sendcount, MPI_Fint* sendtype, void* recvbuf,
                         MPI_Fint* recvcount, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* info,
                         MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Alltoall_init(f_send(sendbuf), int(*sendcount), F_TYPE(sendtype),
                                    f_buf(recvbuf), int(*recvcount), F_TYPE(recvtype),
                                    F_COMM(comm), F_INFO(info), &r));
}
void mpix_alltoallv_init_(void* sendbuf, MPI_Fint* sendcounts, MPI_Fint* sdispls,
                          MPI_Fint* sendtype, void* recvbuf, MPI_Fint* recvcounts,
                          MPI_Fint* rdispls, MPI_Fint* recvtype, MPI_Fint* comm, MPI_Fint* info,
                          MPI_Fint* request, MPI_Fint* ierr) {
  F_REQUEST_CALL(MPIX_Alltoallv_init(f_send(sendbuf), F_INTS(sendcounts), F_INTS(sdispls),
                                     F_TYPE(sendtype), f_buf(recvbuf), F_INTS(recvcounts),
                                     F_INTS(rdispls), F_TYPE(recvtype), F_COMM(comm),
                                     F_INFO(info), &r));
}
#undef F_INFO
#endif  // OMPI_HAVE_MPI_EXT_PCOLLREQ
#undef F_REQUEST_CALL
#undef F_TYPE
#undef F_COMM
#undef F_OP
#undef F_INTS

// Start and free: Open MPI's own call PMPI_Start / PMPI_Request_free, which
// know nothing of the shim's persistent requests.
void mpi_start_(MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = PMPI_Request_f2c(*request);
  const int rc = MPI_Start(&r);
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(r);
  set(ierr, rc);
}

void mpi_startall_(MPI_Fint* count, MPI_Fint* requests, MPI_Fint* ierr) {
  const int n = int(*count);
  std::vector<MPI_Request> r(size_t(n > 0 ? n : 0));
  for (int i = 0; i < n; ++i) r[size_t(i)] = PMPI_Request_f2c(requests[i]);
  const int rc = MPI_Startall(n, r.data());
  if (rc == MPI_SUCCESS)
    for (int i = 0; i < n; ++i) requests[i] = PMPI_Request_c2f(r[size_t(i)]);
  set(ierr, rc);
}

void mpi_request_free_(MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r = PMPI_Request_f2c(*request);
  const int rc = MPI_Request_free(&r);
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

void mpi_comm_create_group_(MPI_Fint* comm, MPI_Fint* group, MPI_Fint* tag, MPI_Fint* newcomm,
                            MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  const int rc = MPI_Comm_create_group(PMPI_Comm_f2c(*comm), PMPI_Group_f2c(*group), int(*tag), &c);
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

// Ops. Open MPI makes a Fortran op itself (its MPI_OP_CREATE calls
// PMPI_Op_create and marks the function as Fortran's, so that the reductions
// the shim passes to MPI call it the Fortran way); the shim then records it
// (user_ops.cpp) and serves reductions with it. COMMUTE is a LOGICAL:
// nonzero is .true. (gfortran's 1; Open MPI's OMPI_LOGICAL_2_INT reads it
// so too).
//
// mpi_f08's MPI_Op_create (mpi_op_create_f08_, and its PMPI name) calls
// pmpi_op_create_, Open MPI's PMPI name of the mpif.h routine, not
// mpi_op_create_ or ompi_op_create_f: so the shim defines pmpi_op_create_
// (and its other manglings) too, the one PMPI name it interposes - recording
// an op changes nothing of what MPI does. Open MPI's routine is then the
// next definition after the shim's, found by dlsym(RTLD_NEXT): calling
// pmpi_op_create_ by name from here would call the shim's own.
using FortranOpCreate = void(shim::FortranUserFunction*, MPI_Fint*, MPI_Fint*, MPI_Fint*);
static FortranOpCreate* open_mpi_op_create() {
  static FortranOpCreate* const real = [] {
    FortranOpCreate* f = nullptr;
    void* p = dlsym(RTLD_NEXT, "pmpi_op_create_");
    std::memcpy(&f, &p, sizeof f);  // an object pointer to a function pointer (dlsym's way)
    return f;
  }();
  return real;
}

void mpi_op_create_(shim::FortranUserFunction* fn, MPI_Fint* commute, MPI_Fint* op,
                    MPI_Fint* ierr) {
  FortranOpCreate* real = open_mpi_op_create();
  if (!real) {  // not reached: the caller loaded Open MPI's Fortran layer
    set(ierr, MPI_ERR_INTERN);
    return;
  }
  MPI_Fint rc = MPI_SUCCESS;
  real(fn, commute, op, &rc);
  if (rc == MPI_SUCCESS && fn) shim::fortran_user_op_created(PMPI_Op_f2c(*op), fn, *commute != 0);
  set(ierr, int(rc));
}

// Freeing goes through the shim's MPI_Op_free, which forgets the op (made
// in C or in Fortran) and calls PMPI_Op_free, as Open MPI's Fortran
// MPI_OP_FREE does.
void mpi_op_free_(MPI_Fint* op, MPI_Fint* ierr) {
  MPI_Op c = PMPI_Op_f2c(*op);
  const int rc = MPI_Op_free(&c);
  if (rc == MPI_SUCCESS) *op = PMPI_Op_c2f(c);
  set(ierr, rc);
}

// MPI_ALLOC_MEM / MPI_FREE_MEM (issue 32 item 4): Open MPI's Fortran
// routines call PMPI_Alloc_mem, so without these a Fortran program's memory
// would never come from coll_mem_alloc (memory.cpp). BASEPTR receives the
// address, an INTEGER(KIND=MPI_ADDRESS_KIND) or a TYPE(C_PTR): both are one
// pointer-sized word (Open MPI's mpi_alloc_mem_cptr_ is the same routine);
// `use mpi_f08` calls ompi_alloc_mem_f / ompi_free_mem_f (aliases below).
// MPI_FREE_MEM's BASE is the memory itself, passed by reference.
static_assert(sizeof(MPI_Aint) == sizeof(void*), "BASEPTR holds an address");

void mpi_alloc_mem_(MPI_Aint* size, MPI_Fint* info, void* baseptr, MPI_Fint* ierr) {
  set(ierr, MPI_Alloc_mem(*size, PMPI_Info_f2c(*info), baseptr));
}

void mpi_alloc_mem_cptr_(MPI_Aint* size, MPI_Fint* info, void* baseptr, MPI_Fint* ierr) {
  mpi_alloc_mem_(size, info, baseptr, ierr);
}

void mpi_free_mem_(void* base, MPI_Fint* ierr) { set(ierr, MPI_Free_mem(base)); }

// MPI's text, with libcoll's message for an error the shim returned
// (state.cpp). string_len: the Fortran length (gfortran passes it after the
// arguments; Open MPI's mpi_f08 wrapper passes it as the fifth argument).
void mpi_error_string_(MPI_Fint* errorcode, char* string, MPI_Fint* resultlen, MPI_Fint* ierr,
                       int string_len) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  const int rc = MPI_Error_string(int(*errorcode), text, &len);
  if (rc == MPI_SUCCESS) {
    len = std::min(std::max(len, 0), std::max(string_len, 0));
    std::memcpy(string, text, size_t(len));
    std::memset(string + len, ' ', size_t(std::max(string_len, 0) - len));  // blank-padded
    *resultlen = MPI_Fint(len);
  }
  set(ierr, rc);
}

}  // extern "C"

COLL_MPI_FORTRAN_ALIASES(op_create, OP_CREATE)
// (mpi_f08's, above; not ompi_op_create_f's alias PMPI_Op_create_f, which
// no Fortran layer calls.)
extern "C" decltype(mpi_op_create_) pmpi_op_create_ __attribute__((alias("mpi_op_create_")));
extern "C" decltype(mpi_op_create_) pmpi_op_create__ __attribute__((alias("mpi_op_create_")));
extern "C" decltype(mpi_op_create_) pmpi_op_create __attribute__((alias("mpi_op_create_")));
extern "C" decltype(mpi_op_create_) PMPI_OP_CREATE __attribute__((alias("mpi_op_create_")));
COLL_MPI_FORTRAN_ALIASES(op_free, OP_FREE)
COLL_MPI_FORTRAN_ALIASES(error_string, ERROR_STRING)
COLL_MPI_FORTRAN_ALIASES(alloc_mem, ALLOC_MEM)
COLL_MPI_FORTRAN_ALIASES(alloc_mem_cptr, ALLOC_MEM_CPTR)
COLL_MPI_FORTRAN_ALIASES(free_mem, FREE_MEM)
COLL_MPI_FORTRAN_ALIASES(init, INIT)
COLL_MPI_FORTRAN_ALIASES(init_thread, INIT_THREAD)
COLL_MPI_FORTRAN_ALIASES(finalize, FINALIZE)
COLL_MPI_FORTRAN_ALIASES(allreduce, ALLREDUCE)
COLL_MPI_FORTRAN_ALIASES(iallreduce, IALLREDUCE)
COLL_MPI_FORTRAN_ALIASES(bcast, BCAST)
COLL_MPI_FORTRAN_ALIASES(ibcast, IBCAST)
COLL_MPI_FORTRAN_ALIASES(barrier, BARRIER)
COLL_MPI_FORTRAN_ALIASES(ibarrier, IBARRIER)
COLL_MPI_FORTRAN_ALIASES(reduce, REDUCE)
COLL_MPI_FORTRAN_ALIASES(ireduce, IREDUCE)
COLL_MPI_FORTRAN_ALIASES(scan, SCAN)
COLL_MPI_FORTRAN_ALIASES(iscan, ISCAN)
COLL_MPI_FORTRAN_ALIASES(exscan, EXSCAN)
COLL_MPI_FORTRAN_ALIASES(iexscan, IEXSCAN)
COLL_MPI_FORTRAN_ALIASES(reduce_scatter_block, REDUCE_SCATTER_BLOCK)
COLL_MPI_FORTRAN_ALIASES(ireduce_scatter_block, IREDUCE_SCATTER_BLOCK)
COLL_MPI_FORTRAN_ALIASES(reduce_scatter, REDUCE_SCATTER)
COLL_MPI_FORTRAN_ALIASES(ireduce_scatter, IREDUCE_SCATTER)
COLL_MPI_FORTRAN_ALIASES(allgather, ALLGATHER)
COLL_MPI_FORTRAN_ALIASES(iallgather, IALLGATHER)
COLL_MPI_FORTRAN_ALIASES(allgatherv, ALLGATHERV)
COLL_MPI_FORTRAN_ALIASES(iallgatherv, IALLGATHERV)
COLL_MPI_FORTRAN_ALIASES(gather, GATHER)
COLL_MPI_FORTRAN_ALIASES(igather, IGATHER)
COLL_MPI_FORTRAN_ALIASES(gatherv, GATHERV)
COLL_MPI_FORTRAN_ALIASES(igatherv, IGATHERV)
COLL_MPI_FORTRAN_ALIASES(scatter, SCATTER)
COLL_MPI_FORTRAN_ALIASES(iscatter, ISCATTER)
COLL_MPI_FORTRAN_ALIASES(scatterv, SCATTERV)
COLL_MPI_FORTRAN_ALIASES(iscatterv, ISCATTERV)
COLL_MPI_FORTRAN_ALIASES(alltoall, ALLTOALL)
COLL_MPI_FORTRAN_ALIASES(ialltoall, IALLTOALL)
COLL_MPI_FORTRAN_ALIASES(alltoallv, ALLTOALLV)
COLL_MPI_FORTRAN_ALIASES(ialltoallv, IALLTOALLV)
COLL_MPI_FORTRAN_ALIASES(comm_dup, COMM_DUP)
COLL_MPI_FORTRAN_ALIASES(comm_split, COMM_SPLIT)
COLL_MPI_FORTRAN_ALIASES(comm_create_group, COMM_CREATE_GROUP)
COLL_MPI_FORTRAN_ALIASES(wait, WAIT)
COLL_MPI_FORTRAN_ALIASES(test, TEST)
COLL_MPI_FORTRAN_ALIASES(waitall, WAITALL)
COLL_MPI_FORTRAN_ALIASES(start, START)
COLL_MPI_FORTRAN_ALIASES(startall, STARTALL)
COLL_MPI_FORTRAN_ALIASES(request_free, REQUEST_FREE)

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
// The extensions' names: mpix_x_init_, mpix_x_init__, mpix_x_init,
// MPIX_X_INIT and ompix_x_init_f (which the mpi_f08 wrappers call).
#define COLL_MPI_FORTRAN_X_ALIASES(lower, upper)                                          \
  extern "C" decltype(mpix_##lower##_) mpix_##lower##__ __attribute__((alias("mpix_" #lower "_"))); \
  extern "C" decltype(mpix_##lower##_) mpix_##lower __attribute__((alias("mpix_" #lower "_")));     \
  extern "C" decltype(mpix_##lower##_) MPIX_##upper __attribute__((alias("mpix_" #lower "_")));     \
  extern "C" decltype(mpix_##lower##_) ompix_##lower##_f __attribute__((alias("mpix_" #lower "_")));
COLL_MPI_FORTRAN_X_ALIASES(allreduce_init, ALLREDUCE_INIT)
COLL_MPI_FORTRAN_X_ALIASES(bcast_init, BCAST_INIT)
COLL_MPI_FORTRAN_X_ALIASES(barrier_init, BARRIER_INIT)
COLL_MPI_FORTRAN_X_ALIASES(reduce_init, REDUCE_INIT)
COLL_MPI_FORTRAN_X_ALIASES(scan_init, SCAN_INIT)
COLL_MPI_FORTRAN_X_ALIASES(exscan_init, EXSCAN_INIT)
COLL_MPI_FORTRAN_X_ALIASES(reduce_scatter_block_init, REDUCE_SCATTER_BLOCK_INIT)
COLL_MPI_FORTRAN_X_ALIASES(reduce_scatter_init, REDUCE_SCATTER_INIT)
COLL_MPI_FORTRAN_X_ALIASES(allgather_init, ALLGATHER_INIT)
COLL_MPI_FORTRAN_X_ALIASES(allgatherv_init, ALLGATHERV_INIT)
COLL_MPI_FORTRAN_X_ALIASES(gather_init, GATHER_INIT)
COLL_MPI_FORTRAN_X_ALIASES(gatherv_init, GATHERV_INIT)
COLL_MPI_FORTRAN_X_ALIASES(scatter_init, SCATTER_INIT)
COLL_MPI_FORTRAN_X_ALIASES(scatterv_init, SCATTERV_INIT)
COLL_MPI_FORTRAN_X_ALIASES(alltoall_init, ALLTOALL_INIT)
COLL_MPI_FORTRAN_X_ALIASES(alltoallv_init, ALLTOALLV_INIT)
#undef COLL_MPI_FORTRAN_X_ALIASES
#endif
