/* A job in a small /dev/shm (a container's: Docker's default is 64 MiB),
 * started by small_shm.sh inside a mount namespace of its own: np 8 on
 * this machine's 2 cores is oversubscribed, where libcoll grows its window
 * slots (slot_sizing.hpp) unless /dev/shm is too small for them. Every
 * rank runs an alltoall whose every block fills all of a writer's slots at
 * every peer (the most a window commits), then allreduce and bcast past a
 * slot, and checks each result against its closed form. With slots grown
 * regardless of /dev/shm (512 KiB: 112 MiB committed at np 8) the
 * alltoall failed with COLL_ERR_NO_RESOURCES in 64 MiB.
 *
 *   small_shm_test [count_per_peer]   (int32 elements; default 1 Mi)
 */
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "c_check.h"

static int32_t *xmalloc(size_t elems) {
  int32_t *p = malloc(elems ? elems * sizeof *p : 1);
  CHECK(p != NULL, "malloc(%zu elements)", elems);
  return p;
}

/* Element i of the block that rank `from` sends to rank `to`. */
static int32_t value(int from, int to, size_t i) {
  return (int32_t)((uint32_t)from * 1000003u + (uint32_t)to * 7919u + (uint32_t)i);
}

int main(int argc, char **argv) {
  const size_t count = argc > 1 ? (size_t)strtoull(argv[1], NULL, 0) : (size_t)1 << 20;
  OK(coll_init(&argc, &argv));
  coll_comm_t world = coll_comm_world();
  int rank = 0, n = 0;
  OK(coll_comm_rank(world, &rank));
  OK(coll_comm_size(world, &n));
  g_rank = rank;


  int32_t *send = xmalloc(count * (size_t)n), *recv = xmalloc(count * (size_t)n);
  for (int to = 0; to < n; ++to)
    for (size_t i = 0; i < count; ++i) send[(size_t)to * count + i] = value(rank, to, i);
  OK(coll_alltoall(send, recv, count, COLL_INT32, world));
  for (int from = 0; from < n; ++from)
    for (size_t i = 0; i < count; ++i)
      CHECK(recv[(size_t)from * count + i] == value(from, rank, i),
            "alltoall: element %zu from rank %d is %d", i, from, (int)recv[(size_t)from * count + i]);

  /* allreduce of rank + i: n * i + n (n - 1) / 2 */
  for (size_t i = 0; i < count; ++i) send[i] = (int32_t)(rank + (int)(i % 1000));
  OK(coll_allreduce(send, recv, count, COLL_INT32, COLL_SUM, world));
  for (size_t i = 0; i < count; ++i)
    CHECK(recv[i] == (int32_t)(n * (int)(i % 1000) + n * (n - 1) / 2),
          "allreduce: element %zu is %d", i, (int)recv[i]);

  const int root = n - 1;
  for (size_t i = 0; i < count; ++i) recv[i] = rank == root ? value(root, 0, i) : -1;
  OK(coll_bcast(recv, count, COLL_INT32, root, world));
  for (size_t i = 0; i < count; ++i)
    CHECK(recv[i] == value(root, 0, i), "bcast: element %zu is %d", i, (int)recv[i]);

  free(send);
  free(recv);
  OK(coll_finalize());
  if (rank == 0) printf("small_shm_test: %d ranks, %zu elements a block: ok\n", n, count);
  return 0;
}
