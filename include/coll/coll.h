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

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_VERSION_MAJOR 0
#define COLL_VERSION_MINOR 1

/* Status codes. */
enum {
  COLL_SUCCESS = 0,
  COLL_ERR_INVALID_ARG = 1,     /* bad argument, or arguments that differ between ranks */
  COLL_ERR_NOT_INITIALIZED = 2, /* called before coll_init or after coll_finalize */
  COLL_ERR_TIMEOUT = 3,         /* a wait passed COLL_TIMEOUT seconds */
  COLL_ERR_PEER_LOST = 4,       /* a peer process died or closed its connection */
  COLL_ERR_NO_RESOURCES = 5,    /* memory, locked memory, shared memory, ... */
  COLL_ERR_TRANSPORT = 6,       /* the transport reported an error */
  COLL_ERR_INTERNAL = 7         /* a bug in libcoll: please report it */
};

typedef enum {
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
  COLL_DATATYPE_COUNT /* not a datatype: the number of them */
} coll_datatype_t;

/* Reduction operators. Integer SUM and PROD wrap around on overflow (two's
 * complement), as MPI implementations do in practice. The bitwise operators
 * take integer types only. */
typedef enum {
  COLL_SUM = 0,
  COLL_PROD,
  COLL_MIN,
  COLL_MAX,
  COLL_BAND,
  COLL_BOR,
  COLL_BXOR,
  COLL_OP_COUNT /* not an operator: the number of them */
} coll_op_t;

/* Pass as sendbuf of coll_allreduce to reduce recvbuf in place. */
#define COLL_IN_PLACE ((const void *)1)

typedef struct coll_comm *coll_comm_t;

/* Bootstraps from the environment: a PMIx server (mpirun, srun --mpi=pmix),
 * collrun, or nothing (a communicator of size 1). argc/argv may be NULL. */
int coll_init(int *argc, char ***argv);
int coll_finalize(void);
int coll_initialized(int *flag);

/* The communicator of all ranks; NULL before coll_init. */
coll_comm_t coll_comm_world(void);
int coll_comm_rank(coll_comm_t comm, int *rank);
int coll_comm_size(coll_comm_t comm, int *size);

/* count is in elements of datatype. */
int coll_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                   coll_datatype_t datatype, coll_op_t op, coll_comm_t comm);
int coll_bcast(void *buf, size_t count, coll_datatype_t datatype, int root,
               coll_comm_t comm);
int coll_barrier(coll_comm_t comm);

/* The name of a status code ("COLL_ERR_TIMEOUT: ..."); never NULL. */
const char *coll_strerror(int status);
/* Detail of the last failure of a call on comm (or of coll_init when comm is
 * NULL): "" when there was none. Valid until the next call on comm. */
const char *coll_comm_last_error(coll_comm_t comm);

/* Introspection, for benchmarks and tests. */
const char *coll_comm_transport_name(coll_comm_t comm); /* "shm", ... */
const char *coll_comm_bootstrap_name(coll_comm_t comm); /* "collrun", "pmix", "singleton" */
/* The algorithm the last collective of this kind ran ("ring", ...). */
const char *coll_comm_last_algorithm(coll_comm_t comm, const char *collective);

size_t coll_datatype_size(coll_datatype_t datatype); /* 0 if unknown */

/* Registration cache. User buffers that a transport must register (RDMA),
 * or that receive zero-copy writes, are registered through a per-
 * communicator cache: registering the same buffer again is a hit. Memory the
 * application frees is detected (its pages changed) and never reused;
 * coll_mem_invalidate() tells the cache explicitly. COLL_REGCACHE=0 turns
 * the cache off (register and deregister on every call). */
typedef struct {
  uint64_t hits, misses, registrations, deregistrations, evictions,
      invalidations, bytes_pinned;
} coll_regcache_stats_t;

int coll_comm_regcache_stats(coll_comm_t comm, coll_regcache_stats_t *stats);
/* The application is about to free or reuse [addr, addr + len): drop every
 * registration of it, on every communicator. */
int coll_mem_invalidate(void *addr, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* COLL_COLL_H */
