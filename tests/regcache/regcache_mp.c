/* Registration cache through real collectives, on whatever transport
 * COLL_TRANSPORT selects (run by collrun; see meson.build).
 *
 *  reuse:  1000 allreduces on the same 4 MiB buffer register it once
 *          (REGCACHE_MP_ITERS=n runs n instead: the Soft-RoCE VM is slow).
 *  stale:  a registered buffer is unmapped and a new one mapped at the same
 *          address with other contents: the next collective gives correct
 *          results, and the cache counts an invalidation (it must never use
 *          the old registration, whose pages are gone); with the
 *          userfaultfd monitor an invalidation is counted on every
 *          transport.
 *  malloc/free/malloc, realloc that moves, madvise(DONTNEED): the ways
 *          glibc and applications give memory back, each followed by new
 *          contents at the same addresses: results exact, and with the
 *          monitor an invalidation counted wherever the pages really went
 *          (main fixes glibc's mmap threshold at 1 MiB, so that free()
 *          unmaps and realloc() mremaps; AddressSanitizer's allocator keeps
 *          freed memory mapped, and there only the results are checked).
 *  fork:   a child that writes into its copy of a registered buffer and
 *          exits changes nothing in the parent: results exact, still a hit.
 *  explicit: coll_mem_register / coll_mem_deregister and their errors,
 *          with a persistent request holding the range.
 *  persistent stale: a persistent request whose buffer was unmapped (and
 *          other memory mapped there) after its init is refused by
 *          coll_start on every rank (userfaultfd monitor only).
 * Counters are checked where something is registered (more than one rank:
 * the meson tests turn zero-copy on); the monitor-specific checks where
 * stats().monitor is "userfaultfd". REGCACHE_MP_EXPECT_MONITOR=name fails
 * the run unless that is the monitor in use (the unprivileged runs expect
 * userfaultfd).
 * Exits non-zero, with a message, on any failure. */
#include <coll/coll.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* AddressSanitizer's allocator keeps freed memory in quarantine (mapped):
 * free() and realloc() then unmap nothing, and no invalidation is due. */
#if defined(__SANITIZE_ADDRESS__)
#define ASAN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_ALLOCATOR 1
#endif
#endif
#ifndef ASAN_ALLOCATOR
#define ASAN_ALLOCATOR 0
#endif
/* glibc's malloc, whose large chunks are mmapped and unmapped at free. */
static int glibc_malloc(void) {
#ifdef __GLIBC__
  return 1;
#else
  return 0;
#endif
}

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
/* stats().monitor starts with "userfaultfd" (with COLL_REGCACHE_VERIFY=1
 * as root it is "userfaultfd+pagemap"): unmaps are reported. */
static int uffd;
/* stats().monitor is not "none": some way of telling freed memory from live
 * memory (userfaultfd, pagemap) is there, and registrations are reused.
 * With "none" every collective registers and deregisters its buffers. */
static int reuses;

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

static int iterations(int dflt) {
  const char *env = getenv("REGCACHE_MP_ITERS");
  return env && atoi(env) > 1 ? atoi(env) : dflt;
}

/* Whether the page holding p is mapped (mincore fails with ENOMEM where
 * nothing is). */
static int mapped(const void *p) {
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  unsigned char v;
  return mincore((void *)((uintptr_t)p / page * page), 1, &v) == 0 || errno != ENOMEM;
}

static void allreduce(int32_t *x, size_t n, const char *what) {
  call(coll_allreduce(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world()), what);
}

#define DIFF(b, a, field) ((unsigned long long)((a).field - (b).field))

static void test_reuse(void) {
  const int iters = iterations(1000);
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
  if (size > 1 && reuses) {
    CHECK(after.registrations - before.registrations == 1,
          "%llu registrations for %d allreduces of one buffer",
          (unsigned long long)(after.registrations - before.registrations), iters);
    CHECK(after.hits - before.hits >= (uint64_t)iters - 1, "%llu hits",
          (unsigned long long)(after.hits - before.hits));
  } else if (size > 1) {
    /* No monitor: nothing is reused, every allreduce registers. */
    CHECK(after.registrations - before.registrations >= (uint64_t)iters,
          "%llu registrations for %d allreduces without a monitor (nothing may be reused)",
          DIFF(before, after, registrations), iters);
    CHECK(after.hits == before.hits, "%llu hits without a monitor", DIFF(before, after, hits));
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

  /* Old pages unmapped: mmap(MAP_FIXED) over x does it in one call (the
   * monitor gets the UNMAP event munmap gives), with no hole at x that
   * another thread's mmap could take (ASan's allocator maps small pieces
   * from its own threads). Moved away: mremap leaves a hole for an instant
   * (MREMAP_DONTUNMAP, which would not, is refused here); if another
   * mapping took it, the new memory lies elsewhere, and the checks below
   * still hold (the monitor reported the move, the new buffer registers). */
  void *old = NULL;
  int32_t *y = x;
  if (move_away) {
    old = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(old != MAP_FAILED, "mmap");
    CHECK(mremap(x, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, old) == old, "mremap");
    y = mmap(x, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
             -1, 0);
    if (y == MAP_FAILED || y != x) {
      if (y != MAP_FAILED) munmap(y, bytes);
      fprintf(stderr, "rank %d: the old address was taken by another mapping: new memory elsewhere\n",
              rank);
      y = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      CHECK(y != MAP_FAILED, "mmap");
    }
  } else {
    y = mmap(x, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(y == x, "new mapping at %p, wanted %p: %s", (void *)y, (void *)x, strerror(errno));
  }
  fill(y, n, 3);
  call(coll_allreduce(COLL_IN_PLACE, y, n, COLL_INT32, COLL_SUM, coll_comm_world()), "allreduce 2");
  check_sum(y, n, 3);
  coll_regcache_stats_t after = stats();
  const int pins = strcmp(coll_comm_transport_name(coll_comm_world()), "rdma") == 0;
  /* The monitor reports the munmap itself, whatever became of the frames. */
  if (size > 1 && reuses && (move_away || pins || uffd))
    CHECK(after.invalidations > before.invalidations,
          "no invalidation counted after the buffer was replaced (%s)",
          move_away ? "old pages moved away" : "old pages unmapped");
  if (size > 1 && uffd)
    CHECK(after.registrations > before.registrations,
          "the replaced buffer was not registered again (%s)",
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
  if (size > 1 && reuses)
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
  if (size > 1 && reuses) {
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
  if (size > 1 && reuses)
    CHECK(d.registrations == c.registrations, "shared buffer registered again");
  if (rank == 0)
    printf("communicator free: dup's own buffer deregistered (%llu), the shared one kept\n",
           (unsigned long long)(c.deregistrations - b.deregistrations));
  call(coll_mem_invalidate(shared, n * sizeof *shared), "invalidate");
  free(shared);
  free(own);
}

/* malloc / free / malloc of a large buffer: glibc serves it with mmap and
 * free() unmaps it (an internal munmap no symbol interposer sees), and the
 * next malloc of the same size usually gets the same address back, with
 * fresh zero pages. The monitor must report the unmap. (main fixes glibc's
 * mmap threshold, so that this holds for every buffer of 1 MiB and more.) */
static void test_malloc_free_malloc(void) {
  const size_t bytes = 8u << 20, n = bytes / sizeof(int32_t);
  int32_t *x = malloc(bytes);
  CHECK(x != NULL, "malloc");
  fill(x, n, 1);
  allreduce(x, n, "allreduce, first buffer");
  check_sum(x, n, 1);
  coll_regcache_stats_t before = stats();
  /* volatile: the address outlives the buffer (a number, never dereferenced) */
  volatile uintptr_t old = (uintptr_t)x;
  free(x);
  const int unmapped = !mapped((void *)old);
  coll_regcache_stats_t freed = stats();
  int32_t *y = malloc(bytes);
  CHECK(y != NULL, "malloc");
  const int same = (uintptr_t)y == old;
  fill(y, n, 2);
  allreduce(y, n, "allreduce, second buffer");
  check_sum(y, n, 2);
  coll_regcache_stats_t after = stats();
  /* glibc's free() of an mmapped chunk always unmaps it: if it did not,
   * this test would test nothing. */
  if (!ASAN_ALLOCATOR && glibc_malloc())
    CHECK(unmapped, "free() of an 8 MiB malloc buffer left %p mapped", (void *)old);
  if (size > 1 && uffd && unmapped) {
    CHECK(freed.invalidations > before.invalidations,
          "free() unmapped the registered buffer and no invalidation was counted");
    CHECK(after.registrations > freed.registrations,
          "the new buffer at %p was not registered (the old registration reused?)", (void *)y);
  }
  if (rank == 0)
    printf("malloc/free/malloc 8 MiB: free %s, address %s, %llu invalidation(s) at the free, "
           "results correct\n",
           unmapped ? "unmapped it" : "kept it mapped (allocator)",
           same ? "repeated" : "not repeated", DIFF(before, freed, invalidations));
  if (rank == 0 && !uffd)
    printf("malloc/free/malloc 8 MiB: %llu invalidation(s) in all (monitor %s)\n",
           DIFF(before, after, invalidations), stats().monitor);
  free(y);
}

/* realloc that moves a registered buffer: glibc moves an mmapped chunk
 * with mremap(MREMAP_MAYMOVE) (the monitor sees a REMAP), or allocates,
 * copies and frees. Either way the old range must not be used again. */
static void test_realloc_moves(void) {
  const size_t bytes = 2u << 20, n = bytes / sizeof(int32_t);
  const size_t big = iterations(1000) >= 1000 ? 64u << 20 : 16u << 20;
  const size_t nbig = big / sizeof(int32_t);
  int32_t *x = malloc(bytes);
  CHECK(x != NULL, "malloc");
  fill(x, n, 1);
  allreduce(x, n, "allreduce, 2 MiB");
  check_sum(x, n, 1);
  coll_regcache_stats_t before = stats();
  /* volatile: the address outlives the buffer (a number, never dereferenced) */
  volatile uintptr_t old = (uintptr_t)x;
  int32_t *y = realloc(x, big);
  CHECK(y != NULL, "realloc to %zu bytes", big);
  const int moved = (uintptr_t)y != old;
  const int old_gone = moved && !mapped((void *)old);
  coll_regcache_stats_t moved_stats = stats();
  check_sum(y, n, 1); /* realloc kept the contents */
  fill(y, nbig, 3);
  allreduce(y, nbig, "allreduce, grown buffer");
  check_sum(y, nbig, 3);
  coll_regcache_stats_t after = stats();
  if (!ASAN_ALLOCATOR && glibc_malloc())
    CHECK(old_gone, "realloc of a 2 MiB buffer to %zu bytes %s", big,
          moved ? "left the old pages mapped" : "did not move it");
  if (size > 1 && uffd && old_gone)
    CHECK(moved_stats.invalidations > before.invalidations,
          "realloc moved the registered buffer away and no invalidation was counted");
  if (size > 1 && uffd)
    CHECK(after.registrations > moved_stats.registrations, "the grown buffer was not registered");
  if (rank == 0)
    printf("realloc 2 MiB -> %zu MiB: %s, %llu invalidation(s) at the realloc, %llu in all, "
           "results correct\n",
           big >> 20,
           old_gone ? "moved, old pages gone" : moved ? "moved, old pages still mapped" : "grown in place",
           DIFF(before, moved_stats, invalidations), DIFF(before, after, invalidations));
  free(y);
}

/* madvise(MADV_DONTNEED) on part of a registered buffer: the pages there
 * are replaced by zero pages at the next touch (the monitor sees a REMOVE);
 * the range must be registered again. */
static void test_madvise_dontneed(void) {
  const size_t bytes = 2u << 20, n = bytes / sizeof(int32_t);
  int32_t *x = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(x != MAP_FAILED, "mmap");
  fill(x, n, 1);
  allreduce(x, n, "allreduce 1");
  check_sum(x, n, 1);
  coll_regcache_stats_t before = stats();
  /* 512 KiB in the middle. */
  CHECK(madvise((char *)x + (768u << 10), 512u << 10, MADV_DONTNEED) == 0, "madvise: %s",
        strerror(errno));
  coll_regcache_stats_t removed = stats();
  CHECK(x[(768u << 10) / sizeof(int32_t)] == 0, "MADV_DONTNEED left the old contents");
  fill(x, n, 4);
  allreduce(x, n, "allreduce 2");
  check_sum(x, n, 4);
  coll_regcache_stats_t after = stats();
  if (size > 1 && uffd) {
    CHECK(removed.invalidations > before.invalidations,
          "madvise(MADV_DONTNEED) of registered pages counted no invalidation");
    CHECK(after.registrations > removed.registrations,
          "the buffer was not registered again after madvise(MADV_DONTNEED)");
  }
  if (rank == 0)
    printf("madvise(DONTNEED) of 512 KiB in a registered 2 MiB buffer: %llu invalidation(s) at "
           "the madvise, %llu in all, results correct\n",
           DIFF(before, removed, invalidations), DIFF(before, after, invalidations));
  munmap(x, bytes);
}

/* fork(): the child gets copies of the registered pages (copy-on-write);
 * it writes into them and exits without calling libcoll. The parent's
 * buffer and its registration are unchanged: still a hit (with the
 * monitor alone: with COLL_REGCACHE_VERIFY=1 the page frames are checked
 * too, and a copy-on-write may have given the parent other frames, which
 * is then a re-registration, not an error). */
static void test_fork(void) {
  const size_t bytes = 2u << 20, n = bytes / sizeof(int32_t);
  int32_t *x = malloc(bytes);
  CHECK(x != NULL, "malloc");
  fill(x, n, 2);
  allreduce(x, n, "allreduce before fork");
  check_sum(x, n, 2);
  coll_regcache_stats_t before = stats();
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0, "fork: %s", strerror(errno));
  if (pid == 0) {
    /* The child: no libcoll, no exit handlers. Its copy holds the sums. */
    const int32_t ranks = size * (size + 1) / 2;
    for (size_t i = 0; i < n; i++)
      if (x[i] != ranks * (int32_t)(i % 5 + 2)) _exit(2);
    memset(x, 0x5a, bytes);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "the child %s %d (2: its copy of the buffer was not the parent's)",
        WIFEXITED(status) ? "exited with" : "was killed by signal",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  check_sum(x, n, 2); /* the child's writes stayed in the child */
  /* Every rank's child is gone before a peer writes into a buffer. */
  call(coll_barrier(coll_comm_world()), "barrier");
  fill(x, n, 3);
  allreduce(x, n, "allreduce after fork");
  check_sum(x, n, 3);
  fill(x, n, 4);
  allreduce(x, n, "allreduce after fork, again");
  check_sum(x, n, 4);
  coll_regcache_stats_t after = stats();
  if (size > 1 && strcmp(after.monitor, "userfaultfd") == 0) {
    CHECK(after.registrations == before.registrations,
          "%llu new registration(s) of the buffer after fork", DIFF(before, after, registrations));
    CHECK(after.hits - before.hits >= 2, "%llu hits after fork", DIFF(before, after, hits));
    CHECK(after.invalidations == before.invalidations,
          "%llu invalidation(s) after fork (the child's exit is not the parent's unmap)",
          DIFF(before, after, invalidations));
  }
  if (rank == 0)
    printf("fork: the child wrote its copy and exited; parent: %llu registration(s), %llu hit(s), "
           "results correct\n",
           DIFF(before, after, registrations), DIFF(before, after, hits));
  free(x);
}

static void expect_status(int rc, int want, const char *what) {
  CHECK(rc == want, "%s: %s, expected %s", what, coll_strerror(rc), coll_strerror(want));
}

/* Explicit registration (coll_mem_register), its errors, and a persistent
 * request holding the range. */
static void test_explicit_register(void) {
  const size_t bytes = 4u << 20, n = bytes / sizeof(int32_t);
  const int iters = iterations(1000) >= 100 ? 100 : iterations(1000);
  int32_t *x = malloc(bytes);
  CHECK(x != NULL, "malloc");
  int local = 0;
  coll_regcache_stats_t s0 = stats();
  call(coll_mem_register(x, bytes), "coll_mem_register");
  coll_regcache_stats_t s1 = stats();
  CHECK(s1.registrations - s0.registrations == 1, "coll_mem_register made %llu registrations",
        DIFF(s0, s1, registrations));
  for (int it = 0; it < iters; it++) {
    fill(x, n, it % 3);
    allreduce(x, n, "allreduce on registered memory");
    if (it % 25 == 0 || it == iters - 1) check_sum(x, n, it % 3);
  }
  coll_regcache_stats_t s2 = stats();
  if (size > 1) {
    CHECK(s2.registrations == s1.registrations,
          "%llu registrations beyond the explicit one in %d allreduces",
          DIFF(s1, s2, registrations), iters);
    CHECK(s2.misses == s1.misses, "%llu misses on explicitly registered memory",
          DIFF(s1, s2, misses));
    CHECK(s2.hits - s1.hits >= (uint64_t)iters, "%llu hits for %d allreduces", DIFF(s1, s2, hits),
          iters);
  }

  expect_status(coll_mem_register(x, bytes), COLL_ERR_INVALID_ARG,
                "coll_mem_register of an address registered already");
  expect_status(coll_mem_register(NULL, bytes), COLL_ERR_INVALID_ARG, "coll_mem_register(NULL)");
  expect_status(coll_mem_register(&local, 0), COLL_ERR_INVALID_ARG,
                "coll_mem_register of 0 bytes");
  expect_status(coll_mem_deregister(&local), COLL_ERR_INVALID_ARG,
                "coll_mem_deregister of an address never registered");
  expect_status(coll_mem_deregister(x + 1), COLL_ERR_INVALID_ARG,
                "coll_mem_deregister of an address inside a registered range");
  expect_status(coll_mem_deregister(NULL), COLL_ERR_INVALID_ARG, "coll_mem_deregister(NULL)");

  /* A persistent init is collective: its argument agreement registers the
   * communicator's exchange scratch on first use (rdma). A persistent
   * barrier first, so that what is counted below is the user's buffer. */
  coll_request_t warm = COLL_REQUEST_NULL;
  call(coll_barrier_init(coll_comm_world(), &warm), "coll_barrier_init");
  call(coll_request_free(&warm), "coll_request_free");
  const coll_regcache_stats_t s2b = stats();
  /* A persistent request on the registered buffer holds it until freed. */
  coll_request_t req = COLL_REQUEST_NULL;
  call(coll_allreduce_init(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world(), &req),
       "coll_allreduce_init");
  for (int it = 0; it < 2; it++) {
    fill(x, n, 5 + it);
    call(coll_start(req), "coll_start");
    call(coll_wait(&req), "coll_wait");
    CHECK(req != COLL_REQUEST_NULL, "coll_wait freed a persistent request");
    check_sum(x, n, 5 + it);
  }
  coll_regcache_stats_t s3 = stats();
  /* One rank registers nothing for a collective (no peer writes into it):
   * the request then holds no range. */
  if (size > 1) {
    expect_status(coll_mem_deregister(x), COLL_ERR_INVALID_ARG,
                  "coll_mem_deregister while a persistent request uses the range");
    CHECK(s3.registrations == s2b.registrations, "the persistent request registered again");
  }
  call(coll_request_free(&req), "coll_request_free");
  CHECK(req == COLL_REQUEST_NULL, "coll_request_free left the handle");
  call(coll_mem_deregister(x), "coll_mem_deregister");
  coll_regcache_stats_t s4 = stats();
  CHECK(s4.deregistrations - s3.deregistrations == 1,
        "coll_mem_deregister made %llu deregistrations", DIFF(s3, s4, deregistrations));
  expect_status(coll_mem_deregister(x), COLL_ERR_INVALID_ARG,
                "coll_mem_deregister of an address deregistered already");
  /* The memory is ordinary memory again. */
  fill(x, n, 7);
  allreduce(x, n, "allreduce after coll_mem_deregister");
  check_sum(x, n, 7);
  coll_regcache_stats_t s5 = stats();
  if (size > 1)
    CHECK(s5.misses > s4.misses, "a hit on memory deregistered with coll_mem_deregister");
  if (rank == 0)
    printf("explicit registration: 4 MiB, %d allreduces: %llu registration(s) beyond it, %llu "
           "hits; errors as documented\n",
           iters, DIFF(s1, s2, registrations), DIFF(s1, s2, hits));
  free(x);
}

/* A persistent request whose buffer is replaced after its init by new
 * memory at the same address: its registration describes pages
 * that are gone. coll_start refuses it, before anything is sent, on every
 * rank (each replaces its buffer), and the request can still be freed. */
static void test_persistent_stale(void) {
  if (!uffd || size == 1) {
    if (rank == 0)
      printf("persistent stale buffer: skipped (%s)\n",
             size == 1 ? "one rank: a request registers nothing"
                       : "needs the userfaultfd monitor");
    return;
  }
  const size_t bytes = 2u << 20, n = bytes / sizeof(int32_t);
  int32_t *x = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(x != MAP_FAILED, "mmap");
  coll_request_t req = COLL_REQUEST_NULL;
  call(coll_allreduce_init(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world(), &req),
       "coll_allreduce_init");
  fill(x, n, 1);
  call(coll_start(req), "coll_start");
  call(coll_wait(&req), "coll_wait");
  check_sum(x, n, 1);
  /* In one call (no hole another thread could map into): the old pages are
   * unmapped, new ones mapped at x. */
  int32_t *y = mmap(x, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  CHECK(y == x, "new mapping at %p, wanted %p: %s", (void *)y, (void *)x, strerror(errno));
  fill(y, n, 2);
  const int rc = coll_start(req);
  CHECK(rc == COLL_ERR_INVALID_ARG,
        "coll_start of a request whose buffer was unmapped and replaced: %s (expected %s)",
        coll_strerror(rc), coll_strerror(COLL_ERR_INVALID_ARG));
  if (rank == 0) printf("persistent stale buffer: coll_start: %s\n", coll_comm_last_error(coll_comm_world()));
  call(coll_request_free(&req), "coll_request_free after the refused start");
  CHECK(req == COLL_REQUEST_NULL, "coll_request_free left the handle");
  /* The communicator is fine, and so is the new buffer. */
  CHECK(y[0] == (rank + 1) * 2, "the refused start touched the buffer");
  allreduce(y, n, "allreduce on the new buffer");
  check_sum(y, n, 2);
  if (rank == 0)
    printf("persistent stale buffer: coll_start refused it on every rank, request freed, "
           "communicator usable\n");
  munmap(y, bytes);
}

int main(int argc, char **argv) {
  /* Buffers of 1 MiB and more are mmapped by glibc, and unmapped by free()
   * and moved by realloc() (mremap): the default threshold is dynamic, it
   * grows to the size of the last mmapped chunk freed, and later buffers
   * would come from the heap (free() then unmaps nothing, and whether a
   * realloc leaves pages behind depends on the history of the heap). */
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (coll_init(&argc, &argv) != COLL_SUCCESS) {
    fprintf(stderr, "coll_init: %s\n", coll_comm_last_error(NULL));
    return 1;
  }
  coll_comm_rank(coll_comm_world(), &rank);
  coll_comm_size(coll_comm_world(), &size);
  const char *monitor = stats().monitor;
  CHECK(monitor != NULL, "stats().monitor is NULL");
  uffd = strncmp(monitor, "userfaultfd", strlen("userfaultfd")) == 0;
  reuses = strcmp(monitor, "none") != 0;
  if (rank == 0)
    printf("transport %s, %d ranks, monitor %s\n", coll_comm_transport_name(coll_comm_world()),
           size, monitor);
  const char *expect = getenv("REGCACHE_MP_EXPECT_MONITOR");
  CHECK(!expect || !*expect || strcmp(monitor, expect) == 0,
        "the registration cache's monitor is \"%s\", REGCACHE_MP_EXPECT_MONITOR wants \"%s\" "
        "(COLL_DEBUG=1 says why)",
        monitor, expect);
  test_reuse();
  test_stale(1);
  test_stale(0);
  test_explicit_invalidate();
  test_communicator_free();
  test_malloc_free_malloc();
  test_realloc_moves();
  test_madvise_dontneed();
  test_fork();
  test_explicit_register();
  test_persistent_stale();
  coll_regcache_stats_t s = stats();
  if (rank == 0)
    printf("regcache (monitor %s): hits %llu misses %llu registrations %llu deregistrations %llu "
           "evictions %llu invalidations %llu bytes_pinned %llu\n",
           s.monitor, (unsigned long long)s.hits, (unsigned long long)s.misses,
           (unsigned long long)s.registrations, (unsigned long long)s.deregistrations,
           (unsigned long long)s.evictions, (unsigned long long)s.invalidations,
           (unsigned long long)s.bytes_pinned);
  call(coll_finalize(), "coll_finalize");
  return 0;
}
