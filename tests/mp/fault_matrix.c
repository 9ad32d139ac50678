/* Rank program of the fault matrix (tests/mp/fault_matrix.sh; issue 15):
 *   fault_matrix COLLECTIVE VICTIM ITERATION kill|stop [COUNT]
 * Every rank loops on COLLECTIVE (COUNT ints, default 1000); at iteration
 * ITERATION the rank VICTIM raises SIGKILL or SIGSTOP in the middle of the
 * job. The others must fail, never hang nor finish as if nothing happened:
 * each prints "fault-matrix rank R: status=S iteration=I: MESSAGE" and
 * exits 3 (4 if its loop ended without an error). */
#include <coll/coll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  if (argc < 5) {
    fprintf(stderr, "usage: %s COLLECTIVE VICTIM ITERATION kill|stop [COUNT]\n", argv[0]);
    return 64;
  }
  const char *name = argv[1];
  const int victim = atoi(argv[2]), at = atoi(argv[3]);
  const int stop = !strcmp(argv[4], "stop");
  const size_t n = argc > 5 ? (size_t)atol(argv[5]) : 1000;
  if (coll_init(&argc, &argv) != COLL_SUCCESS) return 1;
  int rank = 0, size = 0;
  coll_comm_rank(coll_comm_world(), &rank);
  coll_comm_size(coll_comm_world(), &size);
  /* Per rank: n ints to send, n * size to receive (allgather, gather, alltoall). */
  int *send = calloc(n * (size_t)size, sizeof *send), *recv = calloc(n * (size_t)size, sizeof *recv);
  if (!send || !recv) return 1;
  for (int i = 0; i < 100000; ++i) {
    if (rank == victim && i == at) raise(stop ? SIGSTOP : SIGKILL);
    const int status = run(name, send, recv, n, i % size, coll_comm_world());
    if (status != COLL_SUCCESS) {
      printf("fault-matrix rank %d: status=%d iteration=%d: %s\n", rank, status, i,
             coll_comm_last_error(coll_comm_world()));
      fflush(stdout);
      return 3;
    }
  }
  printf("fault-matrix rank %d: finished without noticing\n", rank);
  return 4;
}
