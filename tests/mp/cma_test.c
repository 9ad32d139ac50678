/* Zero-copy on shm is a CMA write (process_vm_writev) into the receiver's
 * buffer, which Yama (ptrace_scope 1: only into descendants) and container
 * seccomp profiles refuse. The shm transport probes it at setup and, where
 * any rank is refused, the whole job stays off zero-copy.
 *
 *   cma_test refused | allowed
 *
 * refused: every rank makes itself non-dumpable before coll_init, so that a
 * peer without CAP_SYS_PTRACE (run it as a user: tests/regcache/as_user.sh)
 * is refused as under Yama. allowed: nothing done. Both run ring bcast and
 * ring allreduce of 8 Ki int64 (64 KiB, over COLL_ZCOPY_THRESHOLD=16K: zero-copy
 * where CMA works) and check every result; refused must register no user buffer,
 * allowed must (the zero-copy path pins the receivers' buffers in the
 * registration cache). */
#define _GNU_SOURCE
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "c_check.h"

enum { kCount = 8192, kCalls = 5 };

int main(int argc, char **argv) {
  CHECK(argc == 2 && (strcmp(argv[1], "refused") == 0 || strcmp(argv[1], "allowed") == 0),
        "usage: cma_test refused | allowed");
  const int refused = strcmp(argv[1], "refused") == 0;
  if (refused) CHECK(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0, "prctl(PR_SET_DUMPABLE, 0)");
  /* Zero-copy by default only where CMA pays on this machine (the shm
   * transport times it at setup): asked for here, so that allowed always
   * takes the CMA path; refused must stay off it even when asked. */
  setenv("COLL_ZCOPY_THRESHOLD", "16K", 1);
  setenv("COLL_BCAST_ALGO", "ring", 1);
  setenv("COLL_ALLREDUCE_ALGO", "ring", 1);
  OK(coll_init(&argc, &argv));
  coll_comm_t world = coll_comm_world();
  int n;
  OK(coll_comm_rank(world, &g_rank));
  OK(coll_comm_size(world, &n));
  int64_t *x = malloc(kCount * sizeof *x);
  CHECK(x != NULL, "malloc");
  for (int call = 0; call < kCalls; ++call) {
    const int root = call % n;
    for (int i = 0; i < kCount; ++i) x[i] = g_rank == root ? (int64_t)i * 3 + call : -1;
    OK(coll_bcast(x, kCount, COLL_INT64, root, world));
    for (int i = 0; i < kCount; ++i)
      CHECK(x[i] == (int64_t)i * 3 + call, "bcast from %d: x[%d] = %lld", root, i,
            (long long)x[i]);
    for (int i = 0; i < kCount; ++i) x[i] = g_rank + i;
    OK(coll_allreduce(COLL_IN_PLACE, x, kCount, COLL_INT64, COLL_SUM, world));
    for (int i = 0; i < kCount; ++i)
      CHECK(x[i] == (int64_t)n * (n - 1) / 2 + (int64_t)n * i, "allreduce: x[%d] = %lld", i,
            (long long)x[i]);
  }
  coll_regcache_stats_t s;
  OK(coll_comm_regcache_stats(world, &s));
  if (n > 1 && refused)
    CHECK(s.registrations == 0, "%llu user buffers registered: zero-copy ran where CMA is refused",
          (unsigned long long)s.registrations);
  if (n > 1 && !refused)
    CHECK(s.registrations > 0, "no user buffer registered: 64 KiB rings did not go zero-copy");
  if (g_rank == 0)
    printf("cma_test %s: np %d exact, %llu user buffers registered\n", argv[1], n,
           (unsigned long long)s.registrations);
  free(x);
  OK(coll_finalize());
  return 0;
}
