/* libcoll: MPI-style collective communication over one-sided writes.
 *
 * Every function returns COLL_SUCCESS (0) or one of the COLL_ERR_* codes;
 * coll_strerror() names a code and coll_comm_last_error() gives the detail
 * of the last failure on a communicator. The library never calls exit() or
 * abort(). A collective that fails with COLL_ERR_TIMEOUT, COLL_ERR_PEER_LOST
 * or COLL_ERR_TRANSPORT leaves its communicator unusable: every later
 * collective on it returns the same code at once ("sticky" errors).
 *
 * The header is C99 and C++. */
#ifndef COLL_COLL_H
#define COLL_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "coll_version.h" /* COLL_VERSION_MAJOR, _MINOR, _PATCH, _STRING */

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. */
enum {
  COLL_SUCCESS = 0,
  COLL_ERR_INVALID_ARG = 1,     /* bad argument, or arguments that differ between ranks */
  COLL_ERR_NOT_INITIALIZED = 2, /* called before coll_init or after coll_finalize */
  COLL_ERR_TIMEOUT = 3,         /* a wait passed COLL_TIMEOUT seconds */
  COLL_ERR_PEER_LOST = 4,       /* a peer process died or closed its connection */
  COLL_ERR_NO_RESOURCES = 5,    /* memory, locked memory, shared memory, ... */
  COLL_ERR_TRANSPORT = 6,       /* the transport reported an error */
  COLL_ERR_INTERNAL = 7,        /* a bug in libcoll: please report it */
  COLL_ERR_REVOKED = 8          /* the communicator was revoked: only the calls below and coll_comm_free work on it */
};

/* In C++ the two enumerations below have int as their underlying type
 * (the same size and calling convention as C's), so that whatever int a C
 * caller passes (a garbage datatype, say) is a value the library may read
 * and reject: C++ leaves reading a value outside a plain enumeration's
 * range undefined (clang's -fsanitize=enum reports it). */
#ifdef __cplusplus
#define COLL_ENUM_INT : int
#else
#define COLL_ENUM_INT
#endif

typedef enum COLL_ENUM_INT {
  COLL_INT8 = 0,
  COLL_INT16,
  COLL_INT32,
  COLL_INT64,
  COLL_UINT8,
  COLL_UINT16,
  COLL_UINT32,
  COLL_UINT64,
  COLL_FLOAT,
  COLL_DOUBLE,
  /* 16-bit floats, each element held in 2 bytes (e.g. a uint16_t or
   * _Float16): IEEE 754 binary16, and bfloat16 (the top half of a binary32
   * float). Reductions compute each element in float and round it to
   * nearest even, so results are the same bits on every rank and CPU. A
   * NaN operand gives the quiet NaN 0x7e00 (FLOAT16) / 0x7fc0 (BFLOAT16),
   * whatever its payload. */
  COLL_FLOAT16,
  COLL_BFLOAT16,
  /* Value-index pairs, for COLL_MAXLOC and COLL_MINLOC only (any other
   * operator on them is COLL_ERR_INVALID_ARG; bcast, gather and the other
   * collectives that only move data take them as any datatype). Each is
   * laid out as the C struct of MPI's pair type, padding included, so an
   * MPI program's buffers pass as they are: coll_float_int_t ... below,
   * whose sizes (on x86-64 and aarch64 Linux) follow. New datatypes are
   * added at the end (before COLL_DATATYPE_COUNT): the values of the
   * existing ones never change. */
  COLL_FLOAT_INT = 12,       /* MPI_FLOAT_INT: 8 bytes */
  COLL_DOUBLE_INT = 13,      /* MPI_DOUBLE_INT: 16 bytes */
  COLL_LONG_INT = 14,        /* MPI_LONG_INT: 16 bytes (long is 8) */
  COLL_2INT = 15,            /* MPI_2INT: 8 bytes */
  COLL_SHORT_INT = 16,       /* MPI_SHORT_INT: 8 bytes */
  COLL_LONG_DOUBLE_INT = 17, /* MPI_LONG_DOUBLE_INT: 32 bytes */
  COLL_DATATYPE_COUNT /* not a datatype: the number of them */
} coll_datatype_t;

/* The elements of the pair datatypes: a value and its index (MPI's
 * MPI_FLOAT_INT ... MPI_LONG_DOUBLE_INT are these structs). */
typedef struct { float value; int index; } coll_float_int_t;
typedef struct { double value; int index; } coll_double_int_t;
typedef struct { long value; int index; } coll_long_int_t;
typedef struct { int value; int index; } coll_2int_t;
typedef struct { short value; int index; } coll_short_int_t;
typedef struct { long double value; int index; } coll_long_double_int_t;

/* Reduction operators. Integer SUM and PROD wrap around on overflow (two's
 * complement), as MPI implementations do in practice. The bitwise operators
 * take integer types only (not FLOAT, DOUBLE, FLOAT16 or BFLOAT16).
 * The logical operators (MPI_LAND, MPI_LOR, MPI_LXOR) take integer types
 * only too, as MPI allows them on C integer and logical types only: an
 * operand is true when it is nonzero, and each result element is 1 (true)
 * or 0 (false) in the operands' type.
 * MAXLOC and MINLOC take the value-index pair types only (COLL_FLOAT_INT
 * ... COLL_LONG_DOUBLE_INT), as MPI's: the pair with the larger (smaller)
 * value wins; of two with equal values the lower index wins (MPI's rule,
 * which makes them commutative). Values that do not compare (a NaN) count
 * as equal: the lower index wins, but the result then depends on the order
 * of the reduction, as for MPI.
 * New operators are added at the end (before COLL_OP_COUNT): the values of
 * the existing ones never change. */
typedef enum COLL_ENUM_INT {
  COLL_SUM = 0,
  COLL_PROD = 1,
  COLL_MIN = 2,
  COLL_MAX = 3,
  COLL_BAND = 4,
  COLL_BOR = 5,
  COLL_BXOR = 6,
  COLL_LAND = 7,
  COLL_LOR = 8,
  COLL_LXOR = 9,
  COLL_MAXLOC = 10,
  COLL_MINLOC = 11,
  COLL_OP_COUNT /* not an operator: the number of them */
} coll_op_t;

/* User-defined operators (MPI_Op_create). fn(in, inout, count, datatype,
 * ctx) computes inout[i] = in[i] op inout[i] for the count elements of
 * datatype at in and inout; `in` is always the operand of the lower ranks
 * (MPI's rule), so the result of a reduction over ranks 0 .. n-1 is
 * x0 op x1 op ... op x(n-1) for an associative op, commutative or not.
 * fn may be called with any datatype the call passes (it is given it),
 * on whole elements, any number of times per call and with any count from
 * 0 to the call's, from the thread that drives the operation (the
 * caller's, or the progress thread with COLL_ASYNC_PROGRESS=1); it must
 * not call libcoll. commute = 0: the op is applied in rank order only
 * (libcoll then runs, for each reduction, an algorithm that keeps the
 * order, whatever COLL_<NAME>_ALGO says: coll_comm_last_algorithm names
 * it); commute != 0 lets every algorithm apply it in any order.
 * coll_op_create needs no coll_init; an op lives until coll_op_free, which
 * sets *op to COLL_OP_NULL. Operations in flight keep using fn and ctx
 * (they took them when they were started): freeing an op they use is
 * allowed, as in MPI. A freed handle, a built-in op given to coll_op_free,
 * or COLL_OP_NULL is COLL_ERR_INVALID_ARG wherever it is passed. */
typedef void coll_user_fn(const void *in, void *inout, size_t count, coll_datatype_t datatype,
                          void *ctx);
int coll_op_create(coll_user_fn *fn, int commute, void *ctx, coll_op_t *op);
int coll_op_free(coll_op_t *op); /* sets *op to COLL_OP_NULL */
/* No operator: what coll_op_free leaves. */
#define COLL_OP_NULL ((coll_op_t)-1)

/* "In place": passed instead of a buffer where MPI allows MPI_IN_PLACE; the
 * collectives below say which argument takes it and what it means. A
 * void pointer, so that it converts to both const void * (sendbuf) and
 * void * (scatter's recvbuf at the root) in C and in C++. */
#define COLL_IN_PLACE ((void *)1)

/* A communicator handle. Handles are validated: a freed one, one from
 * before coll_finalize, or garbage gives COLL_ERR_INVALID_ARG. */
typedef struct coll_comm *coll_comm_t;
#define COLL_COMM_NULL ((coll_comm_t)0)
/* A color for coll_comm_split: this rank joins no new communicator. */
#define COLL_UNDEFINED (-32766)

/* Thread levels, as MPI's.
 *   SINGLE, FUNNELED, SERIALIZED: one thread at a time calls libcoll.
 *   MULTIPLE: any thread may call at any time; calls on different
 *     communicators run concurrently. Two threads inside calls that start
 *     operations on the SAME communicator at once is erroneous (as in MPI):
 *     libcoll detects it, fails the second with COLL_ERR_INVALID_ARG and
 *     fails the communicator on every rank (the threads' calls may have
 *     paired differently on each rank: every call inside it and every later
 *     one ends with COLL_ERR_INVALID_ARG; free it). Calls that paired across
 *     threads without ever overlapping at a rank cannot be seen. Give each
 *     thread its own communicator (coll_comm_dup). A request may be waited
 *     for or tested from any thread, by one thread at a time. */
enum { COLL_THREAD_SINGLE, COLL_THREAD_FUNNELED, COLL_THREAD_SERIALIZED, COLL_THREAD_MULTIPLE };

/* Bootstraps from the environment: a PMIx server (mpirun, srun --mpi=pmix),
 * collrun, or nothing (a communicator of size 1). argc/argv may be NULL.
 * coll_init is coll_init_thread with COLL_THREAD_SINGLE. libcoll provides
 * every level: *provided (may be NULL) is set to required. */
int coll_init(int *argc, char ***argv);
int coll_init_thread(int *argc, char ***argv, int required, int *provided);

/* An allgather the caller provides, for a job that no launcher of
 * libcoll's started (a framework's own rendezvous: torch's Store, a
 * key-value service; as UCC's ucc_oob_coll). allgather copies `bytes`
 * bytes from sendbuf into recvbuf + r * bytes at every rank r of the job,
 * and returns 0, or a COLL_ERR_* status that coll_init_oob then returns
 * (any other nonzero value: COLL_ERR_PEER_LOST). Every rank calls it the
 * same number of times with the same `bytes`, from coll_init_oob and from
 * coll_finalize only, in the calling thread. libcoll cannot bound its
 * time: the rendezvous's own timeout is the only one. */
typedef struct coll_oob {
  int rank; /* this process's rank, 0 .. size - 1 */
  int size; /* the job's ranks */
  int (*allgather)(const void *sendbuf, void *recvbuf, size_t bytes, void *state);
  void *state; /* handed to allgather; must live until coll_finalize returns */
} coll_oob_t;
/* coll_init_thread through the caller's allgather instead of the
 * environment: the world is oob->size ranks, this one oob->rank. */
int coll_init_oob(const coll_oob_t *oob, int required, int *provided);
/* Completes every operation still queued, then tears down every
 * communicator (also those not freed) and makes every handle stale. */
int coll_finalize(void);
int coll_initialized(int *flag);

/* The communicator of all ranks; COLL_COMM_NULL before coll_init. */
coll_comm_t coll_comm_world(void);
int coll_comm_rank(coll_comm_t comm, int *rank);
int coll_comm_size(coll_comm_t comm, int *size);

/* Communicators. Each is a collective over comm (every rank of comm calls
 * it, in the same order as its other collectives on comm). A new
 * communicator has windows of its own, registered here and traded over
 * comm; its messages never mix with another's.
 *   dup:   the same ranks in the same order.
 *   split: the ranks that pass the same color, ordered by (key, rank in
 *          comm); color COLL_UNDEFINED gives *newcomm = COLL_COMM_NULL.
 *   free:  a collective over *comm: completes its queued operations, waits
 *          until no peer writes into its windows, deregisters them, and sets
 *          *comm = COLL_COMM_NULL. The world communicator is not freed (it
 *          goes at coll_finalize). */
int coll_comm_dup(coll_comm_t comm, coll_comm_t *newcomm);
int coll_comm_split(coll_comm_t comm, int color, int key, coll_comm_t *newcomm);
int coll_comm_free(coll_comm_t *comm);
/* A communicator of the n ranks of comm listed in ranks[] (in the new order:
 * ranks[i] becomes rank i), made by those ranks only (MPI_Comm_create_group):
 * the others of comm do not call it. Every member passes the same n, ranks
 * and tag; ranks are distinct ranks of comm, the caller among them, else
 * COLL_ERR_INVALID_ARG before anything is sent. It is queued on comm like
 * a collective of the members: every member starts it in the same order
 * relative to its other operations on comm that involve another member (the
 * collectives of comm, blocking or not, and other creations whose groups
 * share two members with this one), and it starts once the operations
 * queued on comm before it have completed here. tag (>= 0) is checked, not
 * matched: libcoll serialises the creations on one comm, so concurrent
 * creations from several threads whose groups share two members or more
 * must reach those members in the same order. Members given the same ranks
 * with another tag or in another order fail with COLL_ERR_INVALID_ARG, and
 * comm with them (sticky); members given different sets of ranks may wait
 * until COLL_TIMEOUT. */
int coll_comm_create_group(coll_comm_t comm, int n, const int ranks[], int tag,
                           coll_comm_t *newcomm);

/* Collectives. count is in elements of datatype.
 *
 * The general rule: every blocking collective coll_X(args) has a
 * non-blocking coll_iX(args, &request) and a persistent
 * coll_X_init(args, &request).
 *  - Several operations may be outstanding on one communicator and on
 *    several communicators at once; every rank starts the operations of a
 *    communicator in the same order; they may be completed in any order.
 *  - An operation advances whenever libcoll runs (any call that waits or
 *    tests), and with COLL_ASYNC_PROGRESS=1 in a progress thread too.
 *  - The buffers of an outstanding operation belong to it until it is
 *    complete.
 *  - coll_wait / coll_test (flag set) / coll_waitall complete a request and
 *    return the status of its operation; a completed non-persistent request
 *    is freed and set to COLL_REQUEST_NULL. Waiting for COLL_REQUEST_NULL
 *    succeeds at once.
 *  - A persistent request (coll_X_init) is inactive until coll_start; after
 *    its wait it is inactive again, still allocated, and may be started
 *    again; coll_request_free frees it. Its buffers are registered once, at
 *    init: coll_start does no registration and no cache lookup. coll_start
 *    on an active request (started, its completion not yet returned by a
 *    wait or test) is COLL_ERR_INVALID_ARG on every rank that does it, and
 *    starts nothing: the activation under way completes at its wait.
 *  - A request may appear once in coll_waitall's list: one listed twice
 *    fails the call with COLL_ERR_INVALID_ARG before anything is waited
 *    for. */
typedef struct coll_request *coll_request_t;
#define COLL_REQUEST_NULL ((coll_request_t)0)

int coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                   coll_datatype_t datatype, coll_op_t op, coll_comm_t comm);
int coll_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                    coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                    coll_request_t *request);
int coll_allreduce_init(const void *sendbuf, void *recvbuf, size_t count,
                        coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                        coll_request_t *request);
int coll_bcast(void *buf, size_t count, coll_datatype_t datatype, int root,
               coll_comm_t comm);
int coll_ibcast(void *buf, size_t count, coll_datatype_t datatype, int root,
                coll_comm_t comm, coll_request_t *request);
int coll_bcast_init(void *buf, size_t count, coll_datatype_t datatype, int root,
                    coll_comm_t comm, coll_request_t *request);
int coll_barrier(coll_comm_t comm);
int coll_ibarrier(coll_comm_t comm, coll_request_t *request);
int coll_barrier_init(coll_comm_t comm, coll_request_t *request);

/* The rest of MPI's collectives, with MPI's semantics.
 *
 * Counts and displacements are in elements of datatype; every count array
 * and displacement array has one entry per rank of comm. Each function has
 * its coll_iX(..., coll_request_t *request) and coll_X_init(...,
 * coll_request_t *request) forms by the rule above: the same arguments,
 * then the request. The count and displacement arrays are read where the
 * operation runs, not only where it is started: like the buffers, they
 * belong to an outstanding operation until it is complete (MPI's rule), and
 * to a persistent request until it is freed; the same holds for the
 * values in them.
 *
 * Arguments that only the root uses (reduce's and gather(v)'s recvbuf and
 * gatherv's recvcounts and displs; scatter(v)'s sendbuf and scatterv's
 * sendcounts and displs) are ignored elsewhere and may be NULL there.
 * Every rank must pass the same root, datatype and op, and counts that
 * agree (what one rank sends to another is what that one receives); a
 * mismatch that shows in the sizes of the messages is reported as
 * COLL_ERR_INVALID_ARG by a rank that sees it.
 *
 * Reductions are deterministic: the same inputs on the same ranks with the
 * same algorithm give the same bits, run after run. The built-in operators
 * are treated as commutative (all of libcoll's are), so the order in which
 * ranks' operands meet depends on the algorithm: float SUM and PROD may
 * round differently from another algorithm or library (within the usual
 * bounds). A user operator made with commute = 0 (coll_op_create) is
 * applied in rank order. reduce_scatter(_block), scan and exscan give each rank its own
 * result; reduce gives one result, at the root.
 *
 * COLL_IN_PLACE:
 *   reduce               sendbuf at the root: the root's input is recvbuf.
 *   allgather(v)         sendbuf: this rank's block is already in recvbuf
 *                        (at rank * count, or at displs[rank]); sendcount
 *                        is then ignored.
 *   reduce_scatter(_block) sendbuf: the whole input is in recvbuf, and
 *                        this rank's block of the result goes to its start.
 *   gather(v)            sendbuf at the root: its block is already in
 *                        recvbuf (sendcount is then ignored).
 *   scatter(v)           recvbuf at the root: its block stays in sendbuf.
 *   alltoall(v)          sendbuf: the data to send is in recvbuf, laid out
 *                        as the result (alltoallv: recvcounts and rdispls;
 *                        sendcounts and sdispls are then ignored).
 *   scan, exscan         sendbuf: the input is in recvbuf.
 * exscan leaves rank 0's recvbuf untouched (its result is undefined in MPI).
 *
 * reduce_scatter_block: every rank's input is size * recvcount elements;
 * rank i gets the reduction of block i. reduce_scatter: the input is
 * sum(recvcounts) elements, rank i gets block i (recvcounts[i] elements at
 * the sum of the counts before it). */
int coll_reduce(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                coll_op_t op, int root, coll_comm_t comm);
int coll_ireduce(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                 coll_op_t op, int root, coll_comm_t comm, coll_request_t *request);
int coll_reduce_init(const void *sendbuf, void *recvbuf, size_t count,
                     coll_datatype_t datatype, coll_op_t op, int root, coll_comm_t comm,
                     coll_request_t *request);

int coll_allgather(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                   coll_comm_t comm);
int coll_iallgather(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                    coll_comm_t comm, coll_request_t *request);
int coll_allgather_init(const void *sendbuf, void *recvbuf, size_t count,
                        coll_datatype_t datatype, coll_comm_t comm, coll_request_t *request);

int coll_allgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                    const size_t recvcounts[], const size_t displs[], coll_datatype_t datatype,
                    coll_comm_t comm);
int coll_iallgatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                     const size_t recvcounts[], const size_t displs[], coll_datatype_t datatype,
                     coll_comm_t comm, coll_request_t *request);
int coll_allgatherv_init(const void *sendbuf, size_t sendcount, void *recvbuf,
                         const size_t recvcounts[], const size_t displs[],
                         coll_datatype_t datatype, coll_comm_t comm, coll_request_t *request);

int coll_reduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                              coll_datatype_t datatype, coll_op_t op, coll_comm_t comm);
int coll_ireduce_scatter_block(const void *sendbuf, void *recvbuf, size_t recvcount,
                               coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                               coll_request_t *request);
int coll_reduce_scatter_block_init(const void *sendbuf, void *recvbuf, size_t recvcount,
                                   coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                                   coll_request_t *request);

int coll_reduce_scatter(const void *sendbuf, void *recvbuf, const size_t recvcounts[],
                        coll_datatype_t datatype, coll_op_t op, coll_comm_t comm);
int coll_ireduce_scatter(const void *sendbuf, void *recvbuf, const size_t recvcounts[],
                         coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                         coll_request_t *request);
int coll_reduce_scatter_init(const void *sendbuf, void *recvbuf, const size_t recvcounts[],
                             coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                             coll_request_t *request);

int coll_gather(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                int root, coll_comm_t comm);
int coll_igather(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                 int root, coll_comm_t comm, coll_request_t *request);
int coll_gather_init(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                     int root, coll_comm_t comm, coll_request_t *request);

int coll_gatherv(const void *sendbuf, size_t sendcount, void *recvbuf, const size_t recvcounts[],
                 const size_t displs[], coll_datatype_t datatype, int root, coll_comm_t comm);
int coll_igatherv(const void *sendbuf, size_t sendcount, void *recvbuf,
                  const size_t recvcounts[], const size_t displs[], coll_datatype_t datatype,
                  int root, coll_comm_t comm, coll_request_t *request);
int coll_gatherv_init(const void *sendbuf, size_t sendcount, void *recvbuf,
                      const size_t recvcounts[], const size_t displs[], coll_datatype_t datatype,
                      int root, coll_comm_t comm, coll_request_t *request);

int coll_scatter(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                 int root, coll_comm_t comm);
int coll_iscatter(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                  int root, coll_comm_t comm, coll_request_t *request);
int coll_scatter_init(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                      int root, coll_comm_t comm, coll_request_t *request);

int coll_scatterv(const void *sendbuf, const size_t sendcounts[], const size_t displs[],
                  void *recvbuf, size_t recvcount, coll_datatype_t datatype, int root,
                  coll_comm_t comm);
int coll_iscatterv(const void *sendbuf, const size_t sendcounts[], const size_t displs[],
                   void *recvbuf, size_t recvcount, coll_datatype_t datatype, int root,
                   coll_comm_t comm, coll_request_t *request);
int coll_scatterv_init(const void *sendbuf, const size_t sendcounts[], const size_t displs[],
                       void *recvbuf, size_t recvcount, coll_datatype_t datatype, int root,
                       coll_comm_t comm, coll_request_t *request);

int coll_alltoall(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                  coll_comm_t comm);
int coll_ialltoall(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                   coll_comm_t comm, coll_request_t *request);
int coll_alltoall_init(const void *sendbuf, void *recvbuf, size_t count,
                       coll_datatype_t datatype, coll_comm_t comm, coll_request_t *request);

int coll_alltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                   void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                   coll_datatype_t datatype, coll_comm_t comm);
int coll_ialltoallv(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                    void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                    coll_datatype_t datatype, coll_comm_t comm, coll_request_t *request);
int coll_alltoallv_init(const void *sendbuf, const size_t sendcounts[], const size_t sdispls[],
                        void *recvbuf, const size_t recvcounts[], const size_t rdispls[],
                        coll_datatype_t datatype, coll_comm_t comm, coll_request_t *request);

/* scan: rank i gets the reduction of the inputs of ranks 0..i; exscan: of
 * ranks 0..i-1 (rank 0's recvbuf is left as it was). */
int coll_scan(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
              coll_op_t op, coll_comm_t comm);
int coll_iscan(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
               coll_op_t op, coll_comm_t comm, coll_request_t *request);
int coll_scan_init(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                   coll_op_t op, coll_comm_t comm, coll_request_t *request);
int coll_exscan(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                coll_op_t op, coll_comm_t comm);
int coll_iexscan(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                 coll_op_t op, coll_comm_t comm, coll_request_t *request);
int coll_exscan_init(const void *sendbuf, void *recvbuf, size_t count, coll_datatype_t datatype,
                     coll_op_t op, coll_comm_t comm, coll_request_t *request);

int coll_test(coll_request_t *request, int *flag);
int coll_wait(coll_request_t *request);
int coll_waitall(size_t count, coll_request_t requests[]);
int coll_start(coll_request_t request);
/* Frees a request (an active one is completed first) and sets it to
 * COLL_REQUEST_NULL. */
int coll_request_free(coll_request_t *request);

/* Reproducible reductions (COLL_REPRODUCIBLE sets the level every
 * communicator starts at; README.md, "Reproducible reductions").
 * ORDER: floating-point SUM and PROD and user operators give the same bits
 * for a given number of ranks, whatever algorithm, chunk, slot size,
 * transport or tuning is chosen, and the same from allreduce, reduce (+
 * bcast), reduce_scatter(_block) (+ allgather) and their non-blocking and
 * persistent forms (a NaN result stays a NaN, but which NaN - its sign and
 * payload - is not fixed: an add passes on either operand's). EXACT: besides, SUM of COLL_FLOAT, COLL_DOUBLE,
 * COLL_FLOAT16 and COLL_BFLOAT16 in allreduce, reduce and
 * reduce_scatter(_block) gives the same bits at any number of ranks and for
 * any split of the contributions among them: each element is the sum of
 * the contributions put on a grid 94 bits (double; 40 for the others)
 * below the largest one's leading bit, computed exactly and rounded once
 * to nearest even - the correctly rounded sum when every contribution is
 * within 2^42 (double; 2^17 float, 2^30 float16, 2^33 bfloat16) of the
 * largest in magnitude (else each moves by at most half a grid step).
 * Communicators of 2^21 ranks or more run ORDER's algorithms instead. An exact zero is +0 (-0 when every contribution is
 * -0); NaN payloads are not kept. It moves a ring allreduce's bytes (each
 * element's contributions meet raw at one rank) and costs an exact
 * integer sum there (README.md has the measured cost). */
typedef enum COLL_ENUM_INT {
  COLL_REPRODUCIBLE_OFF = 0,
  COLL_REPRODUCIBLE_ORDER = 1,
  COLL_REPRODUCIBLE_EXACT = 2
} coll_reproducible_t;
/* Sets comm's level for the calls made after it. Collective: every rank of
 * comm calls it, in the same order among comm's collectives, with the same
 * level; a rank that passes another level, or one out of range, gets
 * COLL_ERR_INVALID_ARG at every rank and the level is unchanged
 * everywhere. A new communicator (dup, split, create_group) starts at
 * COLL_REPRODUCIBLE's level. */
int coll_comm_set_reproducible(coll_comm_t comm, coll_reproducible_t level);

/* Fault recovery (ULFM's model: MPIX_Comm_revoke, _shrink, _agree,
 * _get_failed, _ack_failed). A rank that dies makes the calls that need it
 * fail with COLL_ERR_PEER_LOST at the ranks that notice (a call may have
 * completed at others). The survivors then carry on:
 *   revoke:      not collective. Every pending and later call on comm fails
 *                with COLL_ERR_REVOKED, here at once and at every other
 *                member once the notice has reached it (within ~10 ms of a
 *                wait there; a call that needs nothing from the others may
 *                still complete before it has). Only is_revoked, shrink,
 *                agree, get_failed, ack_failed and coll_comm_free work on a
 *                revoked communicator.
 *   is_revoked:  *flag = whether comm is revoked (by this rank, or by a
 *                notice from another member).
 *   shrink:      collective over the survivors of comm (revoked or not):
 *                *newcomm holds every member not failed, in comm's order;
 *                every survivor gets the same group, also when two of them
 *                had seen different deaths, and a member that dies during
 *                the shrink is left out too. A member that does not join
 *                within COLL_TIMEOUT is killed by the launcher and counted
 *                failed.
 *   agree:       collective over the survivors: *flag becomes the bitwise
 *                AND of the flags of the members that took part, the same
 *                at every survivor, also when a member dies during the
 *                call. Returns COLL_ERR_PEER_LOST (uniformly, *flag still
 *                agreed) while some member it found failed is not
 *                acknowledged (ack_failed) at some survivor.
 *   get_failed:  the ranks of comm this process knows as failed, increasing,
 *                at most capacity of them in ranks[]; *count = how many it
 *                knows (more than capacity: the list was cut). Once shrink
 *                or agree has returned, it includes every member they found
 *                failed.
 *   ack_failed:  acknowledges the first num_to_ack failures in the order
 *                this process learned them (0: none, a query); *num_acked =
 *                how many are acknowledged now.
 * shrink and agree need a launcher that tells deaths for certain: collrun
 * (with --enable-recovery, so that a death does not end the job); under
 * other launchers they fail with COLL_ERR_INVALID_ARG saying so. Recovery
 * works over shared memory and tcp (a lost peer fails that peer only), not
 * yet over rdma (it fails as a whole at the first lost peer: every
 * communicator of a survivor fails). */
int coll_comm_revoke(coll_comm_t comm);
int coll_comm_is_revoked(coll_comm_t comm, int *flag);
int coll_comm_shrink(coll_comm_t comm, coll_comm_t *newcomm);
int coll_comm_agree(coll_comm_t comm, int *flag);
int coll_comm_get_failed(coll_comm_t comm, int capacity, int ranks[], int *count);
int coll_comm_ack_failed(coll_comm_t comm, int num_to_ack, int *num_acked);

/* The name of a status code ("COLL_ERR_TIMEOUT: ..."); never NULL. */
const char *coll_strerror(int status);
/* Detail of the last failure of a call on comm (or of coll_init, or of a
 * call given a bad handle, when comm is COLL_COMM_NULL): "" when there was
 * none. Valid until the next call on comm. */
const char *coll_comm_last_error(coll_comm_t comm);

/* Introspection, for benchmarks and tests. */
const char *coll_comm_transport_name(coll_comm_t comm); /* "shm", ... */
const char *coll_comm_bootstrap_name(coll_comm_t comm); /* "collrun", "pmix", "singleton" */
/* The algorithm the last collective of this kind ran ("ring", ...). */
const char *coll_comm_last_algorithm(coll_comm_t comm, const char *collective);

size_t coll_datatype_size(coll_datatype_t datatype); /* 0 if unknown */

/* Registration cache. User buffers that a transport must register (RDMA),
 * or that receive zero-copy writes, are registered through one cache per
 * process, shared by every communicator (the stats are the process's):
 * registering the same buffer again is a hit, at the same cost for 4 KiB
 * and 1 GiB. Memory the application frees, unmaps, moves (mremap) or empties
 * (madvise) is detected without privileges by a memory monitor (userfaultfd,
 * Linux 5.11+; `monitor` names the one in use: "userfaultfd", or "pagemap"
 * where only page frame numbers can tell (CAP_SYS_ADMIN), or "none": then
 * nothing is reused) and never used again; a registration is dropped before
 * its pages can serve anything else. COLL_REGCACHE=0 turns the cache off
 * (register and deregister on every call); COLL_REGCACHE_MONITOR=none
 * turns the monitor off; COLL_REGCACHE_VERIFY=1 checks page frames on every
 * hit too, where they are readable. */
typedef struct {
  uint64_t hits, misses, registrations, deregistrations, evictions,
      invalidations, bytes_pinned;
  const char *monitor; /* static string: "userfaultfd", "pagemap", "none", ... */
} coll_regcache_stats_t;

int coll_comm_regcache_stats(coll_comm_t comm, coll_regcache_stats_t *stats);

/* What a communicator holds at this rank. Its window (the memory peers
 * write into) has a header for every peer and slots for every peer, but
 * the slots' memory is committed only where a peer has written into them:
 * the ones its schedules send to this rank through (a ring: one peer;
 * recursive doubling or a tree: about log2 n), so that resident memory
 * grows with those peers, not with n (on rdma the same holds for what is
 * pinned: a writer's slots are registered when it first writes there).
 * A communicator across hosts counts the windows of its per-host
 * sub-communicators too (the hierarchical algorithms' channels). The
 * connection and registration counts are the process's, shared by every
 * communicator. COLL_DEBUG=1 prints these at coll_finalize. */
typedef struct {
  uint64_t window_bytes;          /* the window's address range */
  uint64_t window_resident_bytes; /* of it, backed by memory now (mincore) */
  uint64_t slots_committed_bytes; /* slot memory this rank committed in peers' windows */
  uint32_t slot_peers;            /* peers this rank has written slot data to */
  uint32_t connections;           /* the process's transport connections */
  uint64_t registrations;         /* the process's live registrations: windows, cached
                                     buffers, and on rdma the slot areas registered for
                                     writers and the transport's control block */
  uint64_t network_bytes;         /* the process's bytes written to peers over a network (tcp,
                                     rdma; not shm) since coll_init: what crossed hosts */
} coll_resource_stats_t;

int coll_comm_resource_stats(coll_comm_t comm, coll_resource_stats_t *stats);
/* The application is about to free or reuse [addr, addr + len): drop every
 * registration of it, on every communicator. (Not needed with a monitor.) */
int coll_mem_invalidate(void *addr, size_t len);
/* For a library that runs libcoll inside another runtime (libcoll_mpi under
 * MPI): fn(arg) is called from every blocking wait of libcoll (a blocking
 * collective, coll_wait, coll_waitall) each time a poll found it still
 * waiting, on the waiting thread, with no lock of libcoll held; it may call
 * coll_test. NULL removes it. Process-wide; any time. */
typedef void coll_wait_hook_fn(void *arg);
int coll_set_wait_hook(coll_wait_hook_fn *fn, void *arg);
/* Explicit registration, for applications that want no guessing (as NCCL's
 * ncclCommRegister): [addr, addr + len) is registered now, process-wide,
 * and every collective on memory inside it uses that registration; it is
 * never evicted or invalidated until coll_mem_deregister(addr). Freeing it
 * before that is an error of the application: collectives on memory inside
 * it then fail with COLL_ERR_INVALID_ARG. Errors: COLL_ERR_INVALID_ARG
 * (NULL, 0 bytes, addr registered already), COLL_ERR_NO_RESOURCES (the
 * locked-memory limit: the message names `ulimit -l`). */
int coll_mem_register(void *addr, size_t len);
/* addr as given to coll_mem_register. COLL_ERR_INVALID_ARG for an address
 * not registered, or a range a collective is using (an operation in flight,
 * a persistent request not yet freed). */
int coll_mem_deregister(void *addr);
/* Memory for collective buffers that peers on this host write into
 * directly (as NCCL's user-buffer registration): *ptr gets size bytes,
 * page aligned and zeroed, registered for every communicator. On shared
 * memory it lies in this rank's segment, so a collective whose receive
 * buffer it is takes its peers' data in place - one copy where other
 * memory takes two (the ring bcast and allgather today); on rdma it is
 * pinned once. Any rank may use it or not, whatever the others do.
 * Valid until coll_mem_free(*ptr) or coll_finalize; a child of fork()
 * does not inherit it (MADV_DONTFORK). Errors: COLL_ERR_INVALID_ARG (NULL
 * ptr, 0 bytes), COLL_ERR_NO_RESOURCES (the segment's arena, COLL_SHM_ARENA,
 * or /dev/shm cannot hold it: *ptr is NULL and the message says which;
 * malloc'd memory works as always). Messages: coll_comm_last_error(coll_comm_world()). */
int coll_mem_alloc(size_t size, void **ptr);
/* Frees what coll_mem_alloc gave (NULL: nothing). COLL_ERR_INVALID_ARG for
 * other memory, memory freed already, or memory a collective is using (an
 * operation in flight, a persistent request not yet freed). */
int coll_mem_free(void *ptr);

#ifdef __cplusplus
}
#endif

#endif /* COLL_COLL_H */
