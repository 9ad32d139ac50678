/* Communicators, non-blocking and persistent collectives, through the C API
 * alone (C99, <coll/coll.h>). Every rank runs it; every result is checked
 * against its closed form. Run at any rank count (collrun, mpirun, srun).
 *
 *   comm_test [cycles]   cycles: communicators created and freed in the
 *                        leak check (default 1000) */
#include <coll/coll.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_check.h"

/* Fails with the given status, whatever the message. */
#define FAILS(status, call)                                                  \
  do {                                                                       \
    int rc_ = (call);                                                        \
    CHECK(rc_ == (status), "%s -> %s, expected %s", #call,                   \
          coll_strerror(rc_), coll_strerror(status));                        \
  } while (0)

/* allreduce of (rank + 1) * (i + 1) over comm, count elements: every
 * element i is (i + 1) * n (n + 1) / 2. */
static void check_allreduce(coll_comm_t comm, size_t count) {
  const int n = size_of(comm), r = rank_of(comm);
  int64_t *x = malloc((count ? count : 1) * sizeof *x);
  for (size_t i = 0; i < count; ++i) x[i] = (int64_t)(r + 1) * (int64_t)(i + 1);
  OK(coll_allreduce(COLL_IN_PLACE, x, count, COLL_INT64, COLL_SUM, comm));
  for (size_t i = 0; i < count; ++i)
    CHECK(x[i] == (int64_t)(i + 1) * n * (n + 1) / 2, "allreduce[%zu] = %lld (n %d)", i,
          (long long)x[i], n);
  free(x);
}

static void check_bcast(coll_comm_t comm, int root, size_t count) {
  const int r = rank_of(comm);
  int32_t *x = malloc((count ? count : 1) * sizeof *x);
  for (size_t i = 0; i < count; ++i) x[i] = r == root ? (int32_t)(i * 7 + root) : -1;
  OK(coll_bcast(x, count, COLL_INT32, root, comm));
  for (size_t i = 0; i < count; ++i)
    CHECK(x[i] == (int32_t)(i * 7 + root), "bcast[%zu] = %d (root %d)", i, x[i], root);
  free(x);
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  fclose(f);
  return kib;
}

int main(int argc, char **argv) {
  int cycles = argc > 1 ? atoi(argv[1]) : 1000;
  int provided = -1;
  OK(coll_init_thread(&argc, &argv, COLL_THREAD_SERIALIZED, &provided));
  CHECK(provided == COLL_THREAD_SERIALIZED, "provided %d", provided);
  coll_comm_t world = coll_comm_world();
  const int n = size_of(world), me = rank_of(world);
  g_rank = me;

  /* dup: same ranks, same order, its own windows. */
  coll_comm_t dup;
  OK(coll_comm_dup(world, &dup));
  CHECK(rank_of(dup) == me && size_of(dup) == n, "dup rank %d size %d", rank_of(dup),
        size_of(dup));
  check_allreduce(dup, 1000);
  check_bcast(dup, n - 1, 70000); /* more than one 128 KiB slot */

  /* split by parity, keys reversed: new rank order is reverse world order. */
  coll_comm_t half;
  OK(coll_comm_split(world, me % 2, -me, &half));
  const int half_n = (n + 1 - me % 2) / 2;
  CHECK(size_of(half) == half_n, "half size %d, expected %d", size_of(half), half_n);
  CHECK(rank_of(half) == half_n - 1 - me / 2, "half rank %d", rank_of(half));
  check_allreduce(half, 17);
  check_bcast(half, 0, 5);

  /* COLL_UNDEFINED: rank 0 joins nothing; the others form one communicator
   * ordered by world rank (equal keys: parent order). */
  coll_comm_t rest;
  OK(coll_comm_split(world, me == 0 ? COLL_UNDEFINED : 7, 0, &rest));
  if (me == 0) {
    CHECK(rest == COLL_COMM_NULL, "UNDEFINED gave a communicator");
  } else {
    CHECK(size_of(rest) == n - 1 && rank_of(rest) == me - 1, "rest rank %d size %d",
          rank_of(rest), size_of(rest));
    check_allreduce(rest, 3);
  }

  /* Three non-blocking collectives on three communicators, completed in
   * the reverse order of their start; then several outstanding on one. */
  {
    int64_t a[64], b[64];
    int32_t c[33];
    coll_request_t req[3];
    for (int i = 0; i < 64; ++i) a[i] = me + i, b[i] = 2 * me;
    for (int i = 0; i < 33; ++i) c[i] = me == 0 ? 1000 + i : 0;
    OK(coll_iallreduce(COLL_IN_PLACE, a, 64, COLL_INT64, COLL_SUM, world, &req[0]));
    OK(coll_iallreduce(COLL_IN_PLACE, b, 64, COLL_INT64, COLL_MAX, dup, &req[1]));
    OK(coll_ibcast(c, 33, COLL_INT32, rank_of(half) == 0 ? 0 : 0, half, &req[2]));
    OK(coll_wait(&req[2]));
    CHECK(req[2] == COLL_REQUEST_NULL, "a completed request is set to COLL_REQUEST_NULL");
    OK(coll_wait(&req[1]));
    OK(coll_wait(&req[0]));
    OK(coll_wait(&req[0])); /* COLL_REQUEST_NULL: at once */
    for (int i = 0; i < 64; ++i) {
      CHECK(a[i] == (int64_t)n * (n - 1) / 2 + (int64_t)n * i, "iallreduce[%d] = %lld", i,
            (long long)a[i]);
      CHECK(b[i] == 2 * (n - 1), "iallreduce max[%d] = %lld", i, (long long)b[i]);
    }
    /* half's rank 0 is the highest world rank of this parity. */
    const int half_root = me % 2 == 0 ? ((n - 1) / 2) * 2 : ((n - 2) / 2) * 2 + 1;
    for (int i = 0; i < 33; ++i)
      CHECK(c[i] == (half_root == 0 ? 1000 + i : 0), "ibcast[%d] = %d", i, c[i]);

    enum { kOut = 5 };
    int64_t v[kOut][9];
    coll_request_t many[kOut + 1];
    for (int k = 0; k < kOut; ++k) {
      for (int i = 0; i < 9; ++i) v[k][i] = (me + 1) * (k + 1);
      OK(coll_iallreduce(COLL_IN_PLACE, v[k], 9, COLL_INT64, COLL_SUM, world, &many[k]));
    }
    OK(coll_ibarrier(world, &many[kOut]));
    /* test loop on the last one, then waitall on all */
    int flag = 0;
    for (long spins = 0; !flag; ++spins) OK(coll_test(&many[kOut - 1], &flag));
    CHECK(many[kOut - 1] == COLL_REQUEST_NULL, "tested-complete request not nulled");
    OK(coll_waitall(kOut + 1, many));
    for (int k = 0; k < kOut; ++k) {
      CHECK(many[k] == COLL_REQUEST_NULL, "waitall left request %d", k);
      for (int i = 0; i < 9; ++i)
        CHECK(v[k][i] == (int64_t)(k + 1) * n * (n + 1) / 2, "outstanding %d [%d] = %lld", k, i,
              (long long)v[k][i]);
    }
  }

  /* Persistent allreduce, bcast and barrier, started repeatedly: no cache
   * lookup and no registration at coll_start. */
  {
    enum { kStarts = 1000 };
    double x[300];
    uint8_t y[777];
    coll_request_t ar, bc, ba;
    OK(coll_allreduce_init(COLL_IN_PLACE, x, 300, COLL_DOUBLE, COLL_SUM, dup, &ar));
    OK(coll_bcast_init(y, 777, COLL_UINT8, n / 2, world, &bc));
    OK(coll_barrier_init(world, &ba));
    OK(coll_wait(&ar)); /* inactive: at once, and it stays allocated */
    CHECK(ar != COLL_REQUEST_NULL, "waiting for an inactive persistent request freed it");
    coll_regcache_stats_t before, after;
    OK(coll_comm_regcache_stats(world, &before));
    for (int s = 0; s < kStarts; ++s) {
      for (int i = 0; i < 300; ++i) x[i] = (double)(me + s);
      for (int i = 0; i < 777; ++i) y[i] = me == n / 2 ? (uint8_t)(s + i) : 0;
      OK(coll_start(ar));
      OK(coll_start(bc));
      OK(coll_start(ba));
      coll_request_t all[3] = {ba, bc, ar};
      OK(coll_waitall(3, all));
      CHECK(all[0] == ba && all[2] == ar, "persistent requests stay allocated");
      for (int i = 0; i < 300; ++i)
        CHECK(x[i] == (double)n * (n - 1) / 2 + (double)n * s, "start %d x[%d] = %g", s, i, x[i]);
      for (int i = 0; i < 777; ++i)
        CHECK(y[i] == (uint8_t)(s + i), "start %d y[%d] = %u", s, i, y[i]);
    }
    OK(coll_comm_regcache_stats(world, &after));
    CHECK(after.registrations == before.registrations && after.hits == before.hits &&
              after.misses == before.misses,
          "coll_start touched the cache: registrations %llu -> %llu, hits %llu -> %llu",
          (unsigned long long)before.registrations, (unsigned long long)after.registrations,
          (unsigned long long)before.hits, (unsigned long long)after.hits);
    /* Starting an active request: rank 0 starts the barrier, which cannot
     * complete before the others start it, and they do so only after a
     * bcast (on another communicator) that rank 0 sends after its test. */
    if (n > 1) {
      int go = 0;
      if (me == 0) {
        OK(coll_start(ba));
        FAILS(COLL_ERR_INVALID_ARG, coll_start(ba));
        go = 1;
        OK(coll_bcast(&go, 1, COLL_INT32, 0, dup));
      } else {
        OK(coll_bcast(&go, 1, COLL_INT32, 0, dup));
        OK(coll_start(ba));
      }
      OK(coll_wait(&ba));
      CHECK(go == 1, "bcast of go");
    }
    OK(coll_request_free(&ar));
    OK(coll_request_free(&bc));
    OK(coll_request_free(&ba));
    CHECK(ar == COLL_REQUEST_NULL, "request_free nulls the handle");
  }

  /* Bad input: a clear status, never a crash. */
  {
    coll_request_t r = COLL_REQUEST_NULL, stale;
    int32_t z = 1;
    FAILS(COLL_ERR_INVALID_ARG, coll_comm_split(world, 0, 0, NULL));
    FAILS(COLL_ERR_INVALID_ARG, coll_comm_dup(world, NULL));
    FAILS(COLL_ERR_INVALID_ARG, coll_comm_split(world, -5, 0, &rest));
    coll_comm_t null_comm = COLL_COMM_NULL, w = world;
    FAILS(COLL_ERR_INVALID_ARG, coll_comm_free(&null_comm));
    FAILS(COLL_ERR_INVALID_ARG, coll_comm_free(&w));
    FAILS(COLL_ERR_INVALID_ARG, coll_comm_free(NULL));
    FAILS(COLL_ERR_INVALID_ARG, coll_start(r));
    OK(coll_iallreduce(COLL_IN_PLACE, &z, 1, COLL_INT32, COLL_SUM, world, &r));
    FAILS(COLL_ERR_INVALID_ARG, coll_start(r)); /* not persistent */
    stale = r;
    OK(coll_wait(&r));
    CHECK(z == n, "iallreduce of ones: %d", z);
    FAILS(COLL_ERR_INVALID_ARG, coll_wait(&stale)); /* freed */
    FAILS(COLL_ERR_INVALID_ARG, coll_request_free(&stale));
    FAILS(COLL_ERR_INVALID_ARG, coll_iallreduce(&z, &z, 1, COLL_INT32, COLL_SUM, world, NULL));
    FAILS(COLL_ERR_INVALID_ARG, coll_test(&r, NULL));
    coll_comm_t gone;
    OK(coll_comm_dup(world, &gone));
    coll_comm_t gone_copy = gone;
    OK(coll_comm_free(&gone));
    CHECK(gone == COLL_COMM_NULL, "free nulls the handle");
    FAILS(COLL_ERR_INVALID_ARG, coll_barrier(gone_copy));
    FAILS(COLL_ERR_INVALID_ARG, coll_comm_free(&gone_copy));
    CHECK(coll_comm_transport_name(gone_copy)[0] == '\0', "stale handle has a transport name");
    FAILS(COLL_ERR_INVALID_ARG, coll_barrier((coll_comm_t)(uintptr_t)0x12345678));
    /* A persistent request that outlives its communicator. */
    coll_comm_t shortlived;
    coll_request_t orphan;
    OK(coll_comm_dup(world, &shortlived));
    OK(coll_allreduce_init(COLL_IN_PLACE, &z, 1, COLL_INT32, COLL_SUM, shortlived, &orphan));
    OK(coll_comm_free(&shortlived));
    FAILS(COLL_ERR_INVALID_ARG, coll_start(orphan));
    OK(coll_request_free(&orphan));
  }

  /* 40 communicators alive at once (every rank count: some splits), each
   * used, then all freed. */
  {
    enum { kMany = 40 };
    coll_comm_t c[kMany];
    for (int k = 0; k < kMany; ++k) {
      if (k % 2)
        OK(coll_comm_dup(k ? c[k - 1] : world, &c[k]));
      else
        OK(coll_comm_split(world, (me + k) % 3, k, &c[k]));
      check_allreduce(c[k], (size_t)k + 1);
    }
    for (int k = kMany - 1; k >= 0; --k) OK(coll_comm_free(&c[k]));
  }

  /* Create and free `cycles` times: nothing leaks (fds, memory; shared
   * memory is checked by the test driver in /dev/shm). */
  {
    check_allreduce(world, 1);  /* warm the code paths before measuring */
    coll_comm_t c;
    OK(coll_comm_dup(world, &c));
    check_allreduce(c, 100);
    OK(coll_comm_free(&c));
    const int fds = open_fds();
    const long rss = rss_kib();
    for (int k = 0; k < cycles; ++k) {
      OK(coll_comm_split(world, k % 2 ? 0 : me % 2, me, &c));
      check_allreduce(c, 100);
      OK(coll_comm_free(&c));
    }
    const int fds_after = open_fds();
    const long rss_after = rss_kib();
    CHECK(fds_after == fds, "%d create/free cycles: open fds %d -> %d", cycles, fds, fds_after);
    /* Allocator noise is a few hundred KiB; a leaked window (>= 128 KiB a
     * rank) per cycle would be hundreds of MiB. */
    CHECK(rss_after - rss < 16 * 1024, "%d create/free cycles: VmRSS %ld -> %ld KiB", cycles, rss,
          rss_after);
    if (me == 0)
      printf("comm_test: %d create/free cycles at np %d: fds %d -> %d, VmRSS %ld -> %ld KiB\n",
             cycles, n, fds, fds_after, rss, rss_after);
  }

  OK(coll_comm_free(&dup));
  OK(coll_comm_free(&half));
  if (rest != COLL_COMM_NULL) OK(coll_comm_free(&rest));
  OK(coll_finalize());
  FAILS(COLL_ERR_NOT_INITIALIZED, coll_barrier(world)); /* stale after finalize */
  CHECK(coll_comm_transport_name(world)[0] == '\0', "world after finalize");
  if (me == 0) printf("comm_test: all checks passed at np %d\n", n);
  return 0;
}
