/* coll_comm_create_group: communicators made by their members only (C
 * API). Every rank runs it; results are checked against closed forms.
 * Meant for np 3 and 5 (any np >= 3 works).
 *
 *   create_group_test [cycles]   cycles: create/free cycles of the leak
 *                                check (default 100) */
#include <coll/coll.h>
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

/* The communicator of the parent ranks ranks[0..m) made by create_group:
 * its size and this rank's place in it, allreduce (sum of (rank+1)(i+1):
 * (i+1) m (m+1) / 2), bcast from every root (root's value), allgather of
 * the parent ranks (the list itself: the order is the list's). */
static void check_group(coll_comm_t c, int parent_rank, const int *ranks, int m) {
  int pos = -1;
  for (int i = 0; i < m; ++i)
    if (ranks[i] == parent_rank) pos = i;
  CHECK(size_of(c) == m && rank_of(c) == pos, "size %d rank %d, expected %d and %d", size_of(c),
        rank_of(c), m, pos);
  enum { kCount = 37 };
  int64_t x[kCount];
  for (int i = 0; i < kCount; ++i) x[i] = (int64_t)(pos + 1) * (i + 1);
  OK(coll_allreduce(COLL_IN_PLACE, x, kCount, COLL_INT64, COLL_SUM, c));
  for (int i = 0; i < kCount; ++i)
    CHECK(x[i] == (int64_t)(i + 1) * m * (m + 1) / 2, "allreduce[%d] = %lld (m %d)", i,
          (long long)x[i], m);
  for (int root = 0; root < m; ++root) {
    int32_t y[5];
    for (int i = 0; i < 5; ++i) y[i] = pos == root ? 100 * root + i : -1;
    OK(coll_bcast(y, 5, COLL_INT32, root, c));
    for (int i = 0; i < 5; ++i)
      CHECK(y[i] == 100 * root + i, "bcast root %d [%d] = %d", root, i, y[i]);
  }
  int32_t all[64];
  const int32_t mine = parent_rank;
  OK(coll_allgather(&mine, all, 1, COLL_INT32, c));
  for (int i = 0; i < m; ++i)
    CHECK(all[i] == ranks[i], "allgather[%d] = %d, expected parent rank %d", i, all[i], ranks[i]);
}

/* Creates, checks and frees the group of ranks (this rank a member). */
static void round_trip(coll_comm_t parent, const int *ranks, int m, int tag) {
  coll_comm_t c = COLL_COMM_NULL;
  OK(coll_comm_create_group(parent, m, ranks, tag, &c));
  check_group(c, rank_of(parent), ranks, m);
  OK(coll_comm_free(&c));
  CHECK(c == COLL_COMM_NULL, "free nulls the handle");
}

/* Fails with COLL_ERR_INVALID_ARG and a message that says `why`. */
static void rejected(coll_comm_t parent, int m, const int *ranks, int tag, const char *why) {
  coll_comm_t c = (coll_comm_t)(uintptr_t)1;
  const int rc = coll_comm_create_group(parent, m, ranks, tag, &c);
  CHECK(rc == COLL_ERR_INVALID_ARG, "%s: %s", why, coll_strerror(rc));
  CHECK(c == COLL_COMM_NULL, "%s: *newcomm not COLL_COMM_NULL", why);
  const char *msg = coll_comm_last_error(parent);
  CHECK(strstr(msg, why) != NULL, "message \"%s\" does not say \"%s\"", msg, why);
}

static int open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return -1;
  while (readdir(d)) ++n;
  closedir(d);
  return n;
}

static uint64_t registrations(coll_comm_t c) {
  coll_resource_stats_t s;
  OK(coll_comm_resource_stats(c, &s));
  return s.registrations;
}

/* Two threads of one rank create two groups on one parent at once. */
struct Creation {
  coll_comm_t parent;
  const int *ranks;
  int m, tag;
};
static void *create_in_thread(void *arg) {
  const struct Creation *w = arg;
  round_trip(w->parent, w->ranks, w->m, w->tag);
  return NULL;
}

int main(int argc, char **argv) {
  const int cycles = argc > 1 ? atoi(argv[1]) : 100;
  int provided = -1;
  OK(coll_init_thread(&argc, &argv, COLL_THREAD_MULTIPLE, &provided));
  coll_comm_t world = coll_comm_world();
  const int n = size_of(world), me = rank_of(world);
  g_rank = me;
  CHECK(n >= 3, "run at np 3 or more (np %d)", n);

  /* A subset in a new order ({4, 1, 2} at np 5; {2, 1} at np 3) and its
   * complement at the same time, with another tag (at np 3 the
   * complement is rank 0 alone). A non-blocking allreduce on the parent is
   * pending at the creation on every rank: the creation runs after it. */
  {
    int a[8], b[8], na = 0, nb = 0;
    a[na++] = n - 1;
    a[na++] = 1;
    if (n - 1 != 2) a[na++] = 2;
    for (int r = 0; r < n; ++r) {
      int in_a = 0;
      for (int i = 0; i < na; ++i) in_a |= a[i] == r;
      if (!in_a) b[nb++] = r;
    }
    const int mine_a = me == n - 1 || me == 1 || me == 2;
    int64_t pending = me + 1;
    coll_request_t req;
    OK(coll_iallreduce(COLL_IN_PLACE, &pending, 1, COLL_INT64, COLL_SUM, world, &req));
    coll_comm_t c;
    if (mine_a)
      OK(coll_comm_create_group(world, na, a, 11, &c));
    else
      OK(coll_comm_create_group(world, nb, b, 12, &c));
    OK(coll_wait(&req));
    CHECK(pending == (int64_t)n * (n + 1) / 2, "pending iallreduce = %lld", (long long)pending);
    if (mine_a)
      check_group(c, me, a, na);
    else
      check_group(c, me, b, nb);
    OK(coll_comm_free(&c));
  }

  /* A group of one; the whole parent reversed. */
  round_trip(world, &me, 1, 0);
  {
    int rev[64];
    for (int i = 0; i < n; ++i) rev[i] = n - 1 - i;
    round_trip(world, rev, n, 3);
  }

  /* A group made from a group: the parent is itself a create_group
   * communicator (ranks {0, .., n-2} in reverse, then its first two). */
  if (me < n - 1) {
    int first[64];
    for (int i = 0; i < n - 1; ++i) first[i] = n - 2 - i;
    coll_comm_t sub;
    OK(coll_comm_create_group(world, n - 1, first, 5, &sub));
    const int pair[2] = {1, 0};
    if (rank_of(sub) < 2) round_trip(sub, pair, 2, 5);
    OK(coll_comm_free(&sub));
  }

  /* Two threads on every rank but 0 ... : groups {0,1} and {1,2} share
   * rank 1 alone, whose two threads create them at once (the creations
   * on one parent take turns there; no pair of ranks is in both, so the
   * order does not matter). Ranks 0 and 2 make their one group. */
  {
    static const int g01[2] = {0, 1}, g12[2] = {1, 2};
    struct Creation x = {world, g01, 2, 21}, y = {world, g12, 2, 22};
    if (me == 1) {
      pthread_t t;
      CHECK(pthread_create(&t, NULL, create_in_thread, &y) == 0, "pthread_create");
      create_in_thread(&x);
      CHECK(pthread_join(t, NULL) == 0, "pthread_join");
    } else if (me == 0) {
      create_in_thread(&x);
    } else if (me == 2) {
      create_in_thread(&y);
    }
  }

  /* Bad arguments: refused on the caller before anything is sent (every
   * rank passes them, so none waits for another); the parent stays
   * usable. */
  {
    const int other = (me + 1) % n;
    const int dup[3] = {me, other, me};
    const int range[2] = {me, n};
    const int negative[2] = {-1, me};
    const int without[1] = {other};
    coll_comm_t c;
    rejected(world, 3, dup, 0, "appears twice");
    rejected(world, 2, range, 0, "not a rank of the parent");
    rejected(world, 2, negative, 0, "not a rank of the parent");
    rejected(world, 1, without, 0, "is not in ranks");
    rejected(world, 0, &me, 0, "n 0");
    rejected(world, -2, &me, 0, "n -2");
    rejected(world, n + 1, &me, 0, "the group has 1 to");
    rejected(world, 1, NULL, 0, "NULL ranks");
    rejected(world, 1, &me, -1, "tag -1");
    CHECK(coll_comm_create_group(world, 1, &me, 0, NULL) == COLL_ERR_INVALID_ARG, "NULL newcomm");
    CHECK(coll_comm_create_group(COLL_COMM_NULL, 1, &me, 0, &c) == COLL_ERR_INVALID_ARG,
          "COLL_COMM_NULL parent");
    int64_t one = 1;
    OK(coll_allreduce(COLL_IN_PLACE, &one, 1, COLL_INT64, COLL_SUM, world));
    CHECK(one == n, "allreduce after the rejections: %lld", (long long)one);
  }

  /* Members that disagree, on dups of world: each its own tag, or rank 0
   * with the list reversed. An error on every member, not a hang (the
   * exchange runs in parent order whatever the list's order); the parent
   * fails with it (sticky: after crossed creations its pairs may be out of
   * step). */
  for (int variant = 0; variant < 2; ++variant) {
    coll_comm_t d, c = COLL_COMM_NULL;
    OK(coll_comm_dup(world, &d));
    int list[64];
    for (int i = 0; i < n; ++i) list[i] = variant && me == 0 ? n - 1 - i : i;
    const int rc = coll_comm_create_group(d, n, list, variant ? 1 : me, &c);
    CHECK(rc == COLL_ERR_INVALID_ARG && c == COLL_COMM_NULL, "mismatch %d: %s", variant,
          coll_strerror(rc));
    const char *msg = coll_comm_last_error(d);
    CHECK(strstr(msg, variant ? "another rank list" : "the same tag") != NULL,
          "mismatch %d: message \"%s\"", variant, msg);
    CHECK(coll_barrier(d) == COLL_ERR_INVALID_ARG, "mismatch %d: the parent is not failed",
          variant);
    /* A failed communicator is freed without its closing handshake: the
     * members meet on world first, so that none still writes into it
     * (its last credits) when another deregisters its window. */
    OK(coll_barrier(world));
    OK(coll_comm_free(&d));
  }

  /* Create and free `cycles` times (the pairs {r, r+1 mod n} and the
   * single groups of who is left, alternating with the whole group):
   * no window, registration or fd leaks. */
  {
    const uint64_t regs = registrations(world);
    const int fds = open_fds();
    for (int k = 0; k < cycles; ++k) {
      if (k % 2) {
        int all[64];
        for (int i = 0; i < n; ++i) all[i] = (i + k) % n;
        round_trip(world, all, n, k);
      } else if (me < n - n % 2) {
        const int pair[2] = {me - me % 2, me - me % 2 + 1};
        round_trip(world, pair, 2, k);
      } else {
        round_trip(world, &me, 1, k);
      }
    }
    const uint64_t regs_after = registrations(world);
    const int fds_after = open_fds();
    CHECK(regs_after == regs, "%d create/free cycles: registrations (windows) %llu -> %llu", cycles,
          (unsigned long long)regs, (unsigned long long)regs_after);
    CHECK(fds_after == fds, "%d create/free cycles: open fds %d -> %d", cycles, fds, fds_after);
  }

  OK(coll_finalize());
  if (me == 0) printf("create_group_test: all checks passed at np %d\n", n);
  return 0;
}
