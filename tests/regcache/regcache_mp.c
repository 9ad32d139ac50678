/* Registration cache through real collectives, on whatever transport
 * COLL_TRANSPORT selects (run by collrun; see meson.build).
 *
 *  reuse:  1000 allreduces on the same 4 MiB buffer register it once
 *          (REGCACHE_MP_ITERS=n runs n instead: the Soft-RoCE VM is slow).
 *  stale:  a registered buffer is unmapped and a new one mapped at the same
 *          address with other contents: the next collective gives correct
 *          results, and the cache counts an invalidation (it must never use
 *          the old registration, whose pages are gone).
 * Exits non-zero, with a message, on any failure. */
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      fprintf(stderr, "rank %d: FAILED %s: ", rank, #cond);     \
      fprintf(stderr, __VA_ARGS__);                             \
      fprintf(stderr, "\n");                                    \
      exit(1);                                                  \
    }                                                           \
  } while (0)

static int rank, size;

static void call(int rc, const char *what) {
  if (rc != COLL_SUCCESS) {
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_strerror(rc),
            coll_comm_last_error(coll_comm_world()));
    exit(1);
  }
}

static coll_regcache_stats_t stats(void) {
  coll_regcache_stats_t s;
  call(coll_comm_regcache_stats(coll_comm_world(), &s), "stats");
  return s;
}

/* Every rank contributes (rank + 1) * (i % 5 + salt): the sum is exact. */
static void fill(int32_t *x, size_t n, int salt) {
  for (size_t i = 0; i < n; i++) x[i] = (rank + 1) * (int32_t)(i % 5 + salt);
}
static void check_sum(const int32_t *x, size_t n, int salt) {
  const int32_t ranks = size * (size + 1) / 2;
  for (size_t i = 0; i < n; i++)
    CHECK(x[i] == ranks * (int32_t)(i % 5 + salt), "x[%zu] = %d, expected %d (salt %d)", i,
          x[i], ranks * (int32_t)(i % 5 + salt), salt);
}

static void test_reuse(void) {
  const char *env = getenv("REGCACHE_MP_ITERS");
  const int iters = env && atoi(env) > 1 ? atoi(env) : 1000;
  const size_t n = (4u << 20) / sizeof(int32_t);
  int32_t *x = malloc(n * sizeof *x);
  CHECK(x != NULL, "malloc");
  coll_regcache_stats_t before = stats();
  for (int it = 0; it < iters; it++) {
    fill(x, n, it % 3);
    call(coll_allreduce(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world()), "allreduce");
    if (it % 100 == 0 || it == iters - 1) check_sum(x, n, it % 3);
  }
  coll_regcache_stats_t after = stats();
  if (size > 1) {
    CHECK(after.registrations - before.registrations == 1,
          "%llu registrations for %d allreduces of one buffer",
          (unsigned long long)(after.registrations - before.registrations), iters);
    CHECK(after.hits - before.hits >= (uint64_t)iters - 1, "%llu hits",
          (unsigned long long)(after.hits - before.hits));
  }
  if (rank == 0)
    printf("reuse: %d x 4 MiB allreduce: %llu registration(s), %llu hits, %llu misses\n", iters,
           (unsigned long long)(after.registrations - before.registrations),
           (unsigned long long)(after.hits - before.hits),
           (unsigned long long)(after.misses - before.misses));
  free(x);
}

/* Replace the registered buffer at x by new memory at the same address.
 * move_away: the old pages move elsewhere (mremap) and stay in use, so the
 * new mapping surely gets other page frames; otherwise they are unmapped,
 * and on a transport that does not pin pages (shm) the kernel may hand the
 * very same frames back: then the old registration still describes the
 * new memory and no invalidation is needed. Pinning transports (rdma) keep
 * the old frames, so there an invalidation must be counted either way. */
static void test_stale(int move_away) {
  const size_t bytes = 2u << 20, n = bytes / sizeof(int32_t);
  int32_t *x = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(x != MAP_FAILED, "mmap");
  fill(x, n, 1);
  call(coll_allreduce(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world()), "allreduce 1");
  check_sum(x, n, 1);
  coll_regcache_stats_t before = stats();

  void *old = NULL;
  if (move_away) {
    old = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(old != MAP_FAILED, "mmap");
    CHECK(mremap(x, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, old) == old, "mremap");
  } else {
    CHECK(munmap(x, bytes) == 0, "munmap");
  }
  int32_t *y = mmap(x, bytes, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  CHECK(y == x, "new mapping at %p, wanted %p", (void *)y, (void *)x);
  fill(y, n, 3);
  call(coll_allreduce(COLL_IN_PLACE, y, n, COLL_INT32, COLL_SUM, coll_comm_world()), "allreduce 2");
  check_sum(y, n, 3);
  coll_regcache_stats_t after = stats();
  const int pins = strcmp(coll_comm_transport_name(coll_comm_world()), "rdma") == 0;
  if (size > 1 && (move_away || pins))
    CHECK(after.invalidations > before.invalidations,
          "no invalidation counted after the buffer was replaced (%s)",
          move_away ? "old pages moved away" : "old pages unmapped");
  if (rank == 0)
    printf("stale (%s): buffer replaced at the same address: %llu invalidation(s), results correct\n",
           move_away ? "old pages moved away" : "old pages unmapped",
           (unsigned long long)(after.invalidations - before.invalidations));
  munmap(y, bytes);
  if (old) munmap(old, bytes);
}

static void test_explicit_invalidate(void) {
  const size_t n = (2u << 20) / sizeof(int32_t);
  int32_t *x = malloc(n * sizeof *x);
  CHECK(x != NULL, "malloc");
  fill(x, n, 2);
  call(coll_allreduce(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world()), "allreduce");
  check_sum(x, n, 2);
  coll_regcache_stats_t before = stats();
  call(coll_mem_invalidate(x, n * sizeof *x), "coll_mem_invalidate");
  coll_regcache_stats_t after = stats();
  if (size > 1)
    CHECK(after.invalidations > before.invalidations, "coll_mem_invalidate counted nothing");
  fill(x, n, 4);
  call(coll_allreduce(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world()), "allreduce");
  check_sum(x, n, 4);
  free(x);
}

/* The cache is the process's, shared by every communicator: a buffer
 * registered through a dup is a hit on the world, and freeing the dup
 * deregisters what only the dup used, but not what the world used too. */
static void test_communicator_free(void) {
  const size_t n = (2u << 20) / sizeof(int32_t);
  int32_t *shared = malloc(n * sizeof *shared), *own = malloc(n * sizeof *own);
  CHECK(shared && own, "malloc");
  coll_comm_t dup;
  call(coll_comm_dup(coll_comm_world(), &dup), "dup");
  fill(shared, n, 1);
  call(coll_allreduce(COLL_IN_PLACE, shared, n, COLL_INT32, COLL_SUM, coll_comm_world()), "world");
  check_sum(shared, n, 1);
  coll_regcache_stats_t a = stats();
  fill(shared, n, 2);
  call(coll_allreduce(COLL_IN_PLACE, shared, n, COLL_INT32, COLL_SUM, dup), "dup, shared buffer");
  check_sum(shared, n, 2);
  fill(own, n, 3);
  call(coll_allreduce(COLL_IN_PLACE, own, n, COLL_INT32, COLL_SUM, dup), "dup, own buffer");
  check_sum(own, n, 3);
  coll_regcache_stats_t b = stats();
  call(coll_comm_free(&dup), "free");
  coll_regcache_stats_t c = stats();
  if (size > 1) {
    CHECK(b.hits > a.hits, "the world's registration was not a hit on the dup");
    CHECK(b.registrations - a.registrations == 1, "%llu registrations on the dup",
          (unsigned long long)(b.registrations - a.registrations));
    CHECK(c.deregistrations - b.deregistrations == 1,
          "freeing the dup deregistered %llu ranges (its own buffer only: 1)",
          (unsigned long long)(c.deregistrations - b.deregistrations));
  }
  /* The world still finds the shared one. */
  fill(shared, n, 4);
  call(coll_allreduce(COLL_IN_PLACE, shared, n, COLL_INT32, COLL_SUM, coll_comm_world()), "world");
  check_sum(shared, n, 4);
  coll_regcache_stats_t d = stats();
  if (size > 1) CHECK(d.registrations == c.registrations, "shared buffer registered again");
  if (rank == 0)
    printf("communicator free: dup's own buffer deregistered (%llu), the shared one kept\n",
           (unsigned long long)(c.deregistrations - b.deregistrations));
  call(coll_mem_invalidate(shared, n * sizeof *shared), "invalidate");
  free(shared);
  free(own);
}

int main(int argc, char **argv) {
  if (coll_init(&argc, &argv) != COLL_SUCCESS) {
    fprintf(stderr, "coll_init: %s\n", coll_comm_last_error(NULL));
    return 1;
  }
  coll_comm_rank(coll_comm_world(), &rank);
  coll_comm_size(coll_comm_world(), &size);
  if (rank == 0) printf("transport %s, %d ranks\n", coll_comm_transport_name(coll_comm_world()), size);
  test_reuse();
  test_stale(1);
  test_stale(0);
  test_explicit_invalidate();
  test_communicator_free();
  coll_regcache_stats_t s = stats();
  if (rank == 0)
    printf("regcache: hits %llu misses %llu registrations %llu deregistrations %llu evictions %llu "
           "invalidations %llu bytes_pinned %llu\n",
           (unsigned long long)s.hits, (unsigned long long)s.misses,
           (unsigned long long)s.registrations, (unsigned long long)s.deregistrations,
           (unsigned long long)s.evictions, (unsigned long long)s.invalidations,
           (unsigned long long)s.bytes_pinned);
  call(coll_finalize(), "coll_finalize");
  return 0;
}
