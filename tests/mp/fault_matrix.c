/* Rank program of the fault matrix (tests/mp/fault_matrix.sh; issue 15):
 *   fault_matrix COLLECTIVE VICTIM ITERATION kill|stop|finalize [COUNT]
 * Every rank loops on COLLECTIVE (COUNT ints, default 1000); at iteration
 * ITERATION the rank VICTIM raises SIGKILL or SIGSTOP in the middle of the
 * job, or calls coll_finalize and exits 0 while the others go on. The
 * others must fail, never hang nor finish as if nothing happened: each
 * prints "fault-matrix rank R: status=S iteration=I after=MS ms: MESSAGE"
 * (MS: how long the failed call took) and exits 3 (4 if its loop ended
 * without an error).
 *   fault_matrix idle
 * Barriers 50 ms apart for 3 s, outside libcoll almost all the time (for
 * SIGUSR1's "no wait inside libcoll" line, tests/mp/fault_inject.sh). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime in a -std=c11 build */
#include <coll/coll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int run(const char *name, int *send, int *recv, size_t n, int root, coll_comm_t w) {
  if (!strcmp(name, "allreduce")) return coll_allreduce(send, recv, n, COLL_INT32, COLL_SUM, w);
  if (!strcmp(name, "bcast")) return coll_bcast(send, n, COLL_INT32, root, w);
  if (!strcmp(name, "barrier")) return coll_barrier(w);
  if (!strcmp(name, "reduce")) return coll_reduce(send, recv, n, COLL_INT32, COLL_SUM, root, w);
  if (!strcmp(name, "allgather")) return coll_allgather(send, recv, n, COLL_INT32, w);
  if (!strcmp(name, "gather")) return coll_gather(send, recv, n, COLL_INT32, root, w);
  if (!strcmp(name, "scatter")) return coll_scatter(send, recv, n, COLL_INT32, root, w);
  if (!strcmp(name, "alltoall")) return coll_alltoall(send, recv, n, COLL_INT32, w);
  if (!strcmp(name, "reduce_scatter_block"))
    return coll_reduce_scatter_block(send, recv, n, COLL_INT32, COLL_SUM, w);
  if (!strcmp(name, "scan")) return coll_scan(send, recv, n, COLL_INT32, COLL_SUM, w);
  fprintf(stderr, "fault-matrix: unknown collective %s\n", name);
  exit(64);
}

int main(int argc, char **argv) {
  if (argc == 2 && !strcmp(argv[1], "idle")) {
    if (coll_init(&argc, &argv) != COLL_SUCCESS) return 1;
    const struct timespec nap = {0, 50 * 1000 * 1000};
    for (int i = 0; i < 60; ++i) {
      if (coll_barrier(coll_comm_world()) != COLL_SUCCESS) return 3;
      nanosleep(&nap, NULL);
    }
    return coll_finalize() == COLL_SUCCESS ? 0 : 3;
  }
  if (argc < 5) {
    fprintf(stderr, "usage: %s COLLECTIVE VICTIM ITERATION kill|stop|finalize [COUNT]\n",
            argv[0]);
    return 64;
  }
  const char *name = argv[1];
  const int victim = atoi(argv[2]), at = atoi(argv[3]);
  const int stop = !strcmp(argv[4], "stop"), finalize = !strcmp(argv[4], "finalize");
  const size_t n = argc > 5 ? (size_t)atol(argv[5]) : 1000;
  if (coll_init(&argc, &argv) != COLL_SUCCESS) {
    fprintf(stderr, "fault-matrix: coll_init: %s\n", coll_comm_last_error(COLL_COMM_NULL));
    return 1;
  }
  int rank = 0, size = 0;
  coll_comm_rank(coll_comm_world(), &rank);
  coll_comm_size(coll_comm_world(), &size);
  /* Per rank: n ints to send, n * size to receive (allgather, gather, alltoall). */
  int *send = calloc(n * (size_t)size, sizeof *send), *recv = calloc(n * (size_t)size, sizeof *recv);
  if (!send || !recv) return 1;
  for (int i = 0; i < 100000; ++i) {
    if (rank == victim && i == at) {
      if (!finalize) raise(stop ? SIGSTOP : SIGKILL);
      const int status = coll_finalize();
      printf("fault-matrix rank %d: finalized at iteration %d: status=%d\n", rank, i, status);
      return 0;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const int status = run(name, send, recv, n, i % size, coll_comm_world());
    if (status != COLL_SUCCESS) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      const long ms = (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
      printf("fault-matrix rank %d: status=%d iteration=%d after=%ld ms: %s\n", rank, status, i,
             ms, coll_comm_last_error(coll_comm_world()));
      fflush(stdout);
      return 3;
    }
  }
  printf("fault-matrix rank %d: finished without noticing\n", rank);
  return 4;
}
