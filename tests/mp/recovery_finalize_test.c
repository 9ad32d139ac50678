/* Survivors that finish at different times (issue 33; run 10 times by
 * tests/mp/meson.build under collrun -np 4 --enable-recovery): rank 2 dies,
 * every survivor's world allreduce fails with COLL_ERR_PEER_LOST; rank 3
 * then finalizes at once while ranks 0 and 1 run a small and a large
 * allreduce (2 MiB: many slots) on their split {0,1}, finalize right
 * after it and only then check it. collrun's finalize barrier must wait
 * for the living rather than fail because rank 2 can never send it: a
 * failed barrier let the first of {0,1} to finish tear down its windows
 * while the other still completed the call ("rank 1 has left", or a
 * credit into a deregistered window: 2 of 12 runs before the fix). Exits
 * 0 when every check holds, 3 otherwise. */
#define _POSIX_C_SOURCE 200809L
#include <coll/coll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
  if (coll_init(&argc, &argv) != COLL_SUCCESS) return 1;
  int rank = -1, size = 0;
  coll_comm_rank(coll_comm_world(), &rank);
  coll_comm_size(coll_comm_world(), &size);
  if (size != 4) {
    fprintf(stderr, "recovery_finalize: run at np 4\n");
    return 64;
  }
  coll_comm_t half = COLL_COMM_NULL;
  if (coll_comm_split(coll_comm_world(), rank / 2, 0, &half) != COLL_SUCCESS) return 3;
  static int s[4096], r[4096];
  if (coll_allreduce(s, r, 4096, COLL_INT32, COLL_SUM, coll_comm_world()) != COLL_SUCCESS) return 3;
  coll_barrier(coll_comm_world());
  if (rank == 2) {
    const struct timespec nap = {0, 20 * 1000 * 1000};
    nanosleep(&nap, NULL);
    raise(SIGKILL);
  }
  int status = coll_allreduce(s, r, 4096, COLL_INT32, COLL_SUM, coll_comm_world());
  printf("rank %d: the world allreduce after the death: %d %s\n", rank, status,
         coll_comm_last_error(coll_comm_world()));
  int failed = status != COLL_ERR_PEER_LOST;
  /* Ranks 0 and 1 finalize right after their last call and check its
   * result only then: the first to finish must not tear down its windows
   * while the other still completes the call. */
  const size_t n = (size_t)1 << 18;
  long long *a = NULL, *b = NULL;
  if (rank < 2) {
    a = calloc(n, sizeof *a);
    b = calloc(n, sizeof *b);
    if (!a || !b) return 1;
    for (size_t i = 0; i < n; ++i) a[i] = (long long)(rank + 1) * (long long)(i + 1);
    for (int k = 0; k < 2; ++k) {
      status = coll_allreduce(a, b, k ? n : 1, COLL_INT64, COLL_SUM, half);
      printf("rank %d: the split's allreduce %d: %d %s\n", rank, k, status,
             coll_comm_last_error(half));
      failed = failed || status != COLL_SUCCESS;
    }
  }
  fflush(stdout);
  if (coll_finalize() != COLL_SUCCESS) failed = 1;
  if (rank < 2 && !failed)
    for (size_t i = 0; i < n; ++i)
      if (b[i] != 3 * (long long)(i + 1)) {
        printf("rank %d: [%zu] = %lld\n", rank, i, b[i]);
        failed = 1;
        break;
      }
  free(a);
  free(b);
  return failed ? 3 : 0;
}
