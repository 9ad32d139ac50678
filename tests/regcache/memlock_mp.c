/* Collectives on buffers larger than the locked-memory limit (run by
 * collrun; the RDMA suite runs it as a user under `ulimit -l 8192`):
 * allreduce and bcast of 4 KiB, 1 MiB, 16 MiB and 48 MiB, each twice,
 * exact. On RDMA a call whose buffers exceed what the limit lets it pin
 * moves through the windows, its sources bounced through a registered
 * buffer; nothing fails. Prints the registration counters. */
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static int rank, size;

static void call(int rc, const char *what) {
  if (rc != COLL_SUCCESS) {
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_strerror(rc),
            coll_comm_last_error(coll_comm_world()));
    exit(1);
  }
}

int main(int argc, char **argv) {
  if (coll_init(&argc, &argv) != COLL_SUCCESS) {
    fprintf(stderr, "coll_init: %s\n", coll_comm_last_error(NULL));
    return 1;
  }
  coll_comm_rank(coll_comm_world(), &rank);
  coll_comm_size(coll_comm_world(), &size);
  struct rlimit lim;
  getrlimit(RLIMIT_MEMLOCK, &lim);
  if (rank == 0)
    printf("transport %s, %d ranks, RLIMIT_MEMLOCK %lld\n",
           coll_comm_transport_name(coll_comm_world()), size,
           lim.rlim_cur == RLIM_INFINITY ? -1LL : (long long)lim.rlim_cur);
  const size_t sizes[] = {4096, 1u << 20, 16u << 20, 48u << 20};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    const size_t n = sizes[s] / sizeof(int32_t);
    int32_t *x = malloc(sizes[s]);
    if (!x) return 1;
    for (int rep = 0; rep < 2; rep++) {
      for (size_t i = 0; i < n; i++) x[i] = (rank + 1) * (int32_t)(i % 7 + rep);
      call(coll_allreduce(COLL_IN_PLACE, x, n, COLL_INT32, COLL_SUM, coll_comm_world()),
           "allreduce");
      const int32_t ranks = size * (size + 1) / 2;
      for (size_t i = 0; i < n; i++)
        if (x[i] != ranks * (int32_t)(i % 7 + rep)) {
          fprintf(stderr, "rank %d: allreduce of %zu bytes: x[%zu] = %d, expected %d\n", rank,
                  sizes[s], i, x[i], ranks * (int32_t)(i % 7 + rep));
          return 1;
        }
      const int root = (int)((s + (size_t)rep) % (size_t)size);
      for (size_t i = 0; i < n; i++) x[i] = rank == root ? (int32_t)(i * 3 + s) : -1;
      call(coll_bcast(x, n, COLL_INT32, root, coll_comm_world()), "bcast");
      for (size_t i = 0; i < n; i++)
        if (x[i] != (int32_t)(i * 3 + s)) {
          fprintf(stderr, "rank %d: bcast of %zu bytes from %d: x[%zu] = %d\n", rank, sizes[s],
                  root, i, x[i]);
          return 1;
        }
    }
    free(x);
  }
  coll_regcache_stats_t st;
  call(coll_comm_regcache_stats(coll_comm_world(), &st), "stats");
  if (rank == 0)
    printf("memlock: allreduce and bcast of 4 KiB .. 48 MiB exact; cache (%s): %llu "
           "registrations, %llu hits, %llu evictions, %llu bytes pinned now\n",
           st.monitor, (unsigned long long)st.registrations, (unsigned long long)st.hits,
           (unsigned long long)st.evictions, (unsigned long long)st.bytes_pinned);
  call(coll_finalize(), "coll_finalize");
  return 0;
}
