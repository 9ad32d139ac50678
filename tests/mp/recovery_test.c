/* Fault recovery, as an application does it (issue 33; run by
 * tests/mp/recovery.sh under collrun --enable-recovery):
 *   recovery_test COLLECTIVE VICTIMS AT [LATE]
 * Every rank loops on COLLECTIVE over the world (1000 ints, root i mod n,
 * every result that returns COLL_SUCCESS checked against its closed form).
 * The ranks in VICTIMS (comma-separated) raise SIGKILL at the start of
 * iteration AT (AT = -1: they do not; COLL_FAULT_INJECT kills them, also
 * inside a call; AT = -2: they raise SIGSTOP at iteration 3 instead: silent
 * peers). A survivor's loop ends at its first error, which must be
 * COLL_ERR_PEER_LOST, COLL_ERR_TIMEOUT (silent peers) or COLL_ERR_REVOKED
 * (another survivor revoked first); then it
 *   - revokes the world, sees it revoked and a collective on it refused
 *     with COLL_ERR_REVOKED;
 *   - (rank LATE, if given, raises SIGKILL here: a death during the shrink)
 *   - shrinks it: the new communicator has every rank but the dead, in the
 *     old order (an allgather of old ranks says so);
 *   - finds the dead in coll_comm_get_failed (exactly VICTIMS and LATE);
 *   - agrees before acknowledging (COLL_ERR_PEER_LOST, the flag agreed:
 *     the AND of every survivor's flag), acknowledges, agrees again
 *     (COLL_SUCCESS, the same flag);
 *   - runs allreduce, bcast and allgather on the new communicator and an
 *     allreduce on a split of it, all exact;
 *   - frees them and finalizes.
 * Prints "recovery rank R: recovered, N ranks; the failed call took T ms"
 * (T: from the call's start to its error, the detection where the victim
 * died before it) and exits 0; any check that fails prints why and exits 3.
 *
 * AT = -3: no one dies; the ranks in VICTIMS leave cleanly (leave_cleanly
 * below: coll_finalize, exit 0) while the others still run, and a rank
 * that finalized is not a failed one: once the leavers' processes are
 * gone, coll_comm_get_failed lists none of them, on the world or on a dup
 * (before the fix it listed every one: their transport said "gone"). */
#define _POSIX_C_SOURCE 200809L
#include <coll/coll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define N 1000

static int g_rank = -1;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      printf("recovery rank %d: FAILED: ", g_rank);        \
      printf(__VA_ARGS__);                                 \
      printf("\n");                                        \
      fflush(stdout);                                      \
      exit(3);                                             \
    }                                                      \
  } while (0)

static int run(const char *name, int *send, int *recv, int root, int size, coll_comm_t w) {
  if (!strcmp(name, "allreduce")) return coll_allreduce(send, recv, N, COLL_INT32, COLL_SUM, w);
  if (!strcmp(name, "bcast")) return coll_bcast(send, N, COLL_INT32, root, w);
  if (!strcmp(name, "barrier")) return coll_barrier(w);
  if (!strcmp(name, "reduce")) return coll_reduce(send, recv, N, COLL_INT32, COLL_SUM, root, w);
  if (!strcmp(name, "allgather")) return coll_allgather(send, recv, N, COLL_INT32, w);
  if (!strcmp(name, "alltoall")) return coll_alltoall(send, recv, N / size, COLL_INT32, w);
  fprintf(stderr, "recovery: unknown collective %s\n", name);
  exit(64);
}

/* The result of iteration i, checked where it has a closed form (send[j] =
 * rank + j at every rank; bcast: the root's). */
static void check(const char *name, const int *send, const int *recv, int i, int size) {
  const int root = i % size;
  for (int j = 0; j < N; ++j) {
    if (!strcmp(name, "allreduce") || (!strcmp(name, "reduce") && g_rank == root)) {
      const int want = size * (size - 1) / 2 + size * j;
      CHECK(recv[j] == want, "%s iteration %d: [%d] = %d, want %d", name, i, j, recv[j], want);
    } else if (!strcmp(name, "bcast")) {
      CHECK(send[j] == root + j, "bcast iteration %d: [%d] = %d, want %d", i, j, send[j], root + j);
    } else if (!strcmp(name, "allgather")) {
      for (int r = 0; r < size; ++r)
        CHECK(recv[r * N + j] == r + j, "allgather iteration %d: block %d [%d] = %d", i, r, j,
              recv[r * N + j]);
    }
  }
}

static int listed(const int *list, int n, int r) {
  for (int i = 0; i < n; ++i)
    if (list[i] == r) return 1;
  return 0;
}

/* Whether process pid has exited (gone, or a zombie its launcher has not
 * reaped yet). */
static int exited(int pid) {
  char path[64], state = 0;
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 1;
  const int got = fscanf(f, "%*d %*s %c", &state);
  fclose(f);
  return got == 1 && (state == 'Z' || state == 'X');
}

/* AT = -3. Every pair first exchanges something (an alltoall: over tcp
 * every pair then has its stream, which carries the `left` notice of a
 * rank that finalizes; where there is none the notice is dropped, and the
 * leaver cannot be told from a dead rank). Then a bcast on a dup that the
 * others refuse (a root past the end) fails everywhere, and the dup with it:
 * so a leaver's coll_finalize skips the launcher's barrier, and its process
 * ends while the others still run. A leaver finalizes and exits 0. The others wait until every
 * leaver's process is gone (its segment closed, its streams reset: what the
 * transport reports as a lost peer), then ask coll_comm_get_failed on the
 * world and on the dup, twenty times over 200 ms (tcp's checks dial in the
 * background): none may be listed. They free the dup and meet on a
 * split of their own before they finalize, so that no one of them leaves
 * before every other has asked. */
static int leave_cleanly(const int *victims, int nvictims, int size, int *send, int *recv) {
  coll_comm_t world = coll_comm_world();
  CHECK(size <= 64, "at most 64 ranks");
  int pid = (int)getpid(), pids[64];
  CHECK(coll_allgather(&pid, pids, 1, COLL_INT32, world) == COLL_SUCCESS, "allgather: %s",
        coll_comm_last_error(world));
  for (int j = 0; j < size; ++j) send[j] = g_rank * 100 + j;
  CHECK(coll_alltoall(send, recv, 1, COLL_INT32, world) == COLL_SUCCESS, "alltoall: %s",
        coll_comm_last_error(world));
  for (int j = 0; j < size; ++j)
    CHECK(recv[j] == j * 100 + g_rank, "alltoall [%d] = %d", j, recv[j]);
  const int leaving = listed(victims, nvictims, g_rank);
  coll_comm_t stay = COLL_COMM_NULL, dup = COLL_COMM_NULL;
  CHECK(coll_comm_split(world, leaving ? COLL_UNDEFINED : 0, 0, &stay) == COLL_SUCCESS,
        "split: %s", coll_comm_last_error(world));
  CHECK(coll_comm_dup(world, &dup) == COLL_SUCCESS, "dup: %s", coll_comm_last_error(world));
  /* The others refuse a bcast on the dup (a root past the end) that the
   * leavers accept, from the first of the others (so they wait for it): it
   * fails everywhere with COLL_ERR_INVALID_ARG, and the dup with it. */
  int first_staying = 0;
  while (listed(victims, nvictims, first_staying)) ++first_staying;
  CHECK(first_staying < size, "someone must stay");
  const int root = leaving ? first_staying : size + 5;
  const int refused = coll_bcast(send, 1, COLL_INT32, root, dup);
  CHECK(refused == COLL_ERR_INVALID_ARG, "a bcast to root %d on the dup: %d (%s), want "
        "COLL_ERR_INVALID_ARG", root, refused, coll_comm_last_error(dup));
  if (leaving) {
    CHECK(coll_finalize() == COLL_SUCCESS, "finalize: %s", coll_comm_last_error(COLL_COMM_NULL));
    printf("recovery rank %d: finalized and left\n", g_rank);
    fflush(stdout);
    exit(0);
  }
  for (int k = 0; k < nvictims; ++k) {
    int waited = 0;
    for (; waited < 10000 && !exited(pids[victims[k]]); waited += 10) {
      const struct timespec nap = {0, 10 * 1000 * 1000};
      nanosleep(&nap, NULL);
    }
    CHECK(exited(pids[victims[k]]), "rank %d (pid %d) still runs after 10 s", victims[k],
          pids[victims[k]]);
  }
  for (int k = 0; k < 20; ++k) {
    coll_comm_t comms[2] = {world, dup};
    for (int c = 0; c < 2; ++c) {
      int failed[64], nfailed = -1;
      CHECK(coll_comm_get_failed(comms[c], 64, failed, &nfailed) == COLL_SUCCESS,
            "get_failed: %s", coll_comm_last_error(comms[c]));
      CHECK(nfailed == 0, "get_failed on the %s lists %d ranks, the first %d, which finalized",
            c ? "dup" : "world", nfailed, failed[0]);
    }
    const struct timespec nap = {0, 10 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
  /* The failed dup goes (a rank with a failed communicator would skip
   * the launcher's barrier at coll_finalize, and could tear down its
   * windows while another of those who stay still completes the barrier
   * below with it). */
  CHECK(coll_comm_free(&dup) == COLL_SUCCESS, "free the dup: %s",
        coll_comm_last_error(COLL_COMM_NULL));
  CHECK(coll_barrier(stay) == COLL_SUCCESS, "barrier of those who stay: %s",
        coll_comm_last_error(stay));
  printf("recovery rank %d: recovered, %d ranks; the leavers are not failed\n", g_rank,
         size - nvictims);
  fflush(stdout);
  free(send);
  free(recv);
  return coll_finalize() == COLL_SUCCESS ? 0 : 3;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s COLLECTIVE VICTIMS AT [LATE]\n", argv[0]);
    return 64;
  }
  const char *name = argv[1];
  int victims[64], nvictims = 0;
  for (char *p = argv[2]; *p && nvictims < 64;) {
    victims[nvictims++] = (int)strtol(p, &p, 10);
    if (*p == ',') ++p;
  }
  const int at = atoi(argv[3]);
  const int late = argc > 4 ? atoi(argv[4]) : -1;
  if (coll_init(&argc, &argv) != COLL_SUCCESS) {
    fprintf(stderr, "recovery: coll_init: %s\n", coll_comm_last_error(COLL_COMM_NULL));
    return 1;
  }
  coll_comm_t world = coll_comm_world();
  int size = 0;
  coll_comm_rank(world, &g_rank);
  coll_comm_size(world, &size);
  int *send = calloc((size_t)N * (size_t)size, sizeof *send);
  int *recv = calloc((size_t)N * (size_t)size, sizeof *recv);
  if (!send || !recv) return 1;
  if (at == -3) return leave_cleanly(victims, nvictims, size, send, recv);

  /* 1. The loop, until the failure. */
  int status = COLL_SUCCESS, i = 0;
  double failed_ms = 0; /* how long the call that failed took: the detection */
  for (; i < 400; ++i) {
    if (listed(victims, nvictims, g_rank) && (i == at || (at == -2 && i == 3)))
      raise(at == -2 ? SIGSTOP : SIGKILL);
    for (int j = 0; j < N; ++j) send[j] = g_rank + j;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    status = run(name, send, recv, i % size, size, world);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    failed_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (status != COLL_SUCCESS) break;
    check(name, send, recv, i, size);
  }
  /* A victim whose loop failed before its iteration dies now: over tcp
   * the last bytes a victim handed its kernel may die with it (in its
   * socket buffer), so another victim may fail the iteration before. */
  if (listed(victims, nvictims, g_rank) && at >= 0 && i < at) raise(SIGKILL);
  CHECK(status != COLL_SUCCESS, "the loop ended without noticing a failure");
  CHECK(status == COLL_ERR_PEER_LOST || status == COLL_ERR_REVOKED ||
            (at == -2 && status == COLL_ERR_TIMEOUT),
        "iteration %d failed with %d (%s)", i, status, coll_comm_last_error(world));

  /* 2. Revoke. */
  CHECK(coll_comm_revoke(world) == COLL_SUCCESS, "revoke: %s", coll_comm_last_error(world));
  int flag = 0;
  CHECK(coll_comm_is_revoked(world, &flag) == COLL_SUCCESS && flag == 1, "not revoked");
  CHECK(coll_barrier(world) == COLL_ERR_REVOKED, "a barrier on the revoked world did not say so");

  /* 3. Shrink (rank LATE dies first). */
  if (g_rank == late) raise(SIGKILL);
  coll_comm_t s = COLL_COMM_NULL;
  status = coll_comm_shrink(world, &s);
  CHECK(status == COLL_SUCCESS, "shrink: %d (%s)", status, coll_comm_last_error(world));
  int dead[64], ndead = 0;
  for (int r = 0; r < size; ++r)
    if (listed(victims, nvictims, r) || r == late) dead[ndead++] = r;
  int ssize = 0, srank = -1;
  coll_comm_size(s, &ssize);
  coll_comm_rank(s, &srank);
  CHECK(ssize == size - ndead, "the shrunk communicator has %d ranks, want %d", ssize, size - ndead);

  /* 4. The failed, as this rank knows them now. */
  int failed[64], nfailed = -1;
  CHECK(coll_comm_get_failed(world, 64, failed, &nfailed) == COLL_SUCCESS, "get_failed: %s",
        coll_comm_last_error(world));
  CHECK(nfailed == ndead, "get_failed: %d ranks, want %d", nfailed, ndead);
  for (int k = 0; k < nfailed; ++k)
    CHECK(failed[k] == dead[k], "get_failed[%d] = %d, want %d", k, failed[k], dead[k]);

  /* 5. Agree: before the acknowledgement PEER_LOST everywhere, the flag
   * agreed; after it, SUCCESS. */
  const int mine = ~(1 << (g_rank % 30));
  int want = ~0;
  for (int r = 0; r < size; ++r)
    if (!listed(dead, ndead, r)) want &= ~(1 << (r % 30));
  flag = mine;
  status = coll_comm_agree(world, &flag);
  CHECK(status == COLL_ERR_PEER_LOST, "agree before ack_failed: %d (%s)", status,
        coll_comm_last_error(world));
  CHECK(flag == want, "agree before ack_failed: flag %#x, want %#x", flag, want);
  int acked = -1;
  CHECK(coll_comm_ack_failed(world, 0, &acked) == COLL_SUCCESS && acked == 0, "ack query: %d",
        acked);
  CHECK(coll_comm_ack_failed(world, 64, &acked) == COLL_SUCCESS && acked == ndead,
        "ack_failed: %d acknowledged, want %d", acked, ndead);
  flag = mine;
  status = coll_comm_agree(world, &flag);
  CHECK(status == COLL_SUCCESS, "agree: %d (%s)", status, coll_comm_last_error(world));
  CHECK(flag == want, "agree: flag %#x, want %#x", flag, want);

  /* 6. Work on the survivors: old ranks in the old order, exact sums. */
  int old = g_rank, olds[64];
  CHECK(coll_allgather(&old, olds, 1, COLL_INT32, s) == COLL_SUCCESS, "allgather: %s",
        coll_comm_last_error(s));
  for (int k = 0, r = 0; r < size; ++r)
    if (!listed(dead, ndead, r)) {
      CHECK(olds[k] == r, "survivor %d is old rank %d, want %d", k, olds[k], r);
      ++k;
    }
  for (int j = 0; j < N; ++j) send[j] = old + j;
  CHECK(coll_allreduce(send, recv, N, COLL_INT32, COLL_SUM, s) == COLL_SUCCESS, "allreduce: %s",
        coll_comm_last_error(s));
  int sum = 0;
  for (int k = 0; k < ssize; ++k) sum += olds[k];
  for (int j = 0; j < N; ++j)
    CHECK(recv[j] == sum + ssize * j, "allreduce [%d] = %d, want %d", j, recv[j], sum + ssize * j);
  for (int j = 0; j < N; ++j) send[j] = srank == ssize - 1 ? 7 * j : -1;
  CHECK(coll_bcast(send, N, COLL_INT32, ssize - 1, s) == COLL_SUCCESS, "bcast: %s",
        coll_comm_last_error(s));
  for (int j = 0; j < N; ++j) CHECK(send[j] == 7 * j, "bcast [%d] = %d", j, send[j]);
  coll_comm_t half = COLL_COMM_NULL;
  CHECK(coll_comm_split(s, srank % 2, 0, &half) == COLL_SUCCESS, "split: %s",
        coll_comm_last_error(s));
  int hsum = 0, hwant = 0;
  for (int k = srank % 2; k < ssize; k += 2) hwant += olds[k];
  CHECK(coll_allreduce(&old, &hsum, 1, COLL_INT32, COLL_SUM, half) == COLL_SUCCESS,
        "allreduce on the split: %s", coll_comm_last_error(half));
  CHECK(hsum == hwant, "allreduce on the split: %d, want %d", hsum, hwant);

  CHECK(coll_comm_free(&half) == COLL_SUCCESS, "free split");
  CHECK(coll_comm_free(&s) == COLL_SUCCESS, "free shrunk: %s", coll_comm_last_error(COLL_COMM_NULL));
  printf("recovery rank %d: recovered, %d ranks; the failed call took %.3f ms\n", g_rank, ssize,
         failed_ms);
  fflush(stdout);
  free(send);
  free(recv);
  return coll_finalize() == COLL_SUCCESS ? 0 : 3;
}
