/* Many ranks on one host (np 64 and 128 in CI, oversubscribed: a check of
 * correctness, memory and init time, never of speed). Every rank runs
 * allreduce, bcast (three roots), reduce, allgather and barrier at sizes
 * from one element to past one slot, on the world and on a split, checks
 * every result against its closed form, then reads its resources
 * (coll_comm_resource_stats) and asserts the window memory bounds that
 * the on-demand slots promise (docs/architecture.md, "Window layout"):
 * memory, unlike time, is stable enough to assert on a shared machine.
 * Rank 0 prints one line of the numbers the note's table quotes.
 *
 *   scale_test [max_resident_per_rank [max_resident_total]]   (bytes)
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime in C99 */
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "c_check.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  CHECK(p != NULL, "malloc(%zu)", bytes);
  return p;
}

/* Counts: one element, a line message, one past a line message, one slot
 * and a half (128 KiB slots of int64: 16384 elements). */
static const size_t kCounts[] = {1, 5, 40, 1000, 24577};

static void run_collectives(coll_comm_t comm) {
  int n, r;
  OK(coll_comm_size(comm, &n));
  OK(coll_comm_rank(comm, &r));
  for (size_t c = 0; c < sizeof kCounts / sizeof kCounts[0]; ++c) {
    const size_t count = kCounts[c];
    int64_t *x = xmalloc(count * sizeof *x);
    /* allreduce: element i is the sum over ranks of (rank + 1)(i + 1). */
    for (size_t i = 0; i < count; ++i) x[i] = (int64_t)(r + 1) * (int64_t)(i + 1);
    OK(coll_allreduce(COLL_IN_PLACE, x, count, COLL_INT64, COLL_SUM, comm));
    for (size_t i = 0; i < count; ++i)
      CHECK(x[i] == (int64_t)(i + 1) * n * (n + 1) / 2, "allreduce count %zu: [%zu] = %lld",
            count, i, (long long)x[i]);
    /* bcast from the first, the middle and the last rank. */
    const int roots[3] = {0, n / 2, n - 1};
    for (int k = 0; k < 3; ++k) {
      for (size_t i = 0; i < count; ++i)
        x[i] = r == roots[k] ? (int64_t)(roots[k] * 1000003 + (int)i) : -1;
      OK(coll_bcast(x, count, COLL_INT64, roots[k], comm));
      for (size_t i = 0; i < count; ++i)
        CHECK(x[i] == (int64_t)(roots[k] * 1000003 + (int)i), "bcast root %d count %zu: [%zu]",
              roots[k], count, i);
    }
    /* reduce (max) to the last rank: element i is (n - 1) + i. */
    int64_t *y = xmalloc(count * sizeof *y);
    for (size_t i = 0; i < count; ++i) x[i] = (int64_t)r + (int64_t)i;
    OK(coll_reduce(x, y, count, COLL_INT64, COLL_MAX, n - 1, comm));
    if (r == n - 1)
      for (size_t i = 0; i < count; ++i)
        CHECK(y[i] == (int64_t)(n - 1) + (int64_t)i, "reduce count %zu: [%zu]", count, i);
    free(y);
    free(x);
    OK(coll_barrier(comm));
  }
  /* allgather of 3 elements a rank: block q is q, q + 1, q + 2. */
  int64_t mine[3] = {r, r + 1, r + 2};
  int64_t *all = xmalloc((size_t)n * 3 * sizeof *all);
  OK(coll_allgather(mine, all, 3, COLL_INT64, comm));
  for (int q = 0; q < n; ++q)
    for (int j = 0; j < 3; ++j) CHECK(all[q * 3 + j] == q + j, "allgather block %d", q);
  free(all);
}

int main(int argc, char **argv) {
  const uint64_t max_per_rank = argc > 1 ? strtoull(argv[1], NULL, 0) : 0;
  const uint64_t max_total = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
  const double t0 = now_s();
  OK(coll_init(&argc, &argv));
  double init_s = now_s() - t0;
  coll_comm_t world = coll_comm_world();
  int n;
  OK(coll_comm_rank(world, &g_rank));
  OK(coll_comm_size(world, &n));
  OK(coll_barrier(world));
  const double init_and_barrier_s = now_s() - t0;

  const double t1 = now_s();
  run_collectives(world);
  coll_comm_t half;
  OK(coll_comm_split(world, g_rank % 2, -g_rank, &half));
  run_collectives(half);
  OK(coll_comm_free(&half));
  double run_s = now_s() - t1;

  /* Every write into our window is in once every rank is past this. */
  OK(coll_barrier(world));
  coll_resource_stats_t s;
  OK(coll_comm_resource_stats(world, &s));
  CHECK(s.window_resident_bytes <= s.window_bytes, "%llu resident of %llu",
        (unsigned long long)s.window_resident_bytes, (unsigned long long)s.window_bytes);
  CHECK(s.connections <= (uint32_t)n, "%u connections at np %d", s.connections, n);
  uint64_t mx[3] = {s.window_resident_bytes, s.slot_peers, s.slots_committed_bytes};
  uint64_t sum = s.window_resident_bytes;
  OK(coll_allreduce(COLL_IN_PLACE, mx, 3, COLL_UINT64, COLL_MAX, world));
  OK(coll_allreduce(COLL_IN_PLACE, &sum, 1, COLL_UINT64, COLL_SUM, world));
  double times[2] = {init_s, run_s};
  OK(coll_allreduce(COLL_IN_PLACE, times, 2, COLL_DOUBLE, COLL_MAX, world));
  if (g_rank == 0) {
    struct statvfs v;
    const double shm_used =
        statvfs("/dev/shm", &v) == 0 ? (double)(v.f_blocks - v.f_bfree) * (double)v.f_frsize : -1;
    printf("scale np %d: coll_init %.3f s (max over ranks), + barrier %.3f s (rank 0); "
           "collectives %.3f s; world window %.2f MiB a rank, resident max %.3f MiB, total "
           "%.1f MiB; slots committed at <= %llu peers (%.3f MiB max); %u connections, %llu "
           "registrations (rank 0); /dev/shm in use %.1f MiB\n",
           n, times[0], init_and_barrier_s, times[1], (double)s.window_bytes / 1048576.0,
           (double)mx[0] / 1048576.0, (double)sum / 1048576.0, (unsigned long long)mx[1],
           (double)mx[2] / 1048576.0, s.connections, (unsigned long long)s.registrations,
           shm_used / 1048576.0);
    fflush(stdout);
  }
  CHECK(!max_per_rank || s.window_resident_bytes <= max_per_rank,
        "window resident %llu bytes > %llu", (unsigned long long)s.window_resident_bytes,
        (unsigned long long)max_per_rank);
  CHECK(!max_total || sum <= max_total, "window resident in all %llu bytes > %llu",
        (unsigned long long)sum, (unsigned long long)max_total);
  OK(coll_finalize());
  return 0;
}
