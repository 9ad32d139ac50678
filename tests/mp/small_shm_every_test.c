/* Every collective in a container's small /dev/shm (Docker's default,
 * 64 MiB), started by small_shm.sh inside a mount namespace of its own:
 * np 16 there used to fail an alltoall of 256 KiB per peer with
 * COLL_ERR_NO_RESOURCES, the configured slots (16 windows of 15 writers x
 * 4 x 128 KiB: 120 MiB) not fitting; libcoll now cuts the slots to what
 * /dev/shm has (slot_sizing.hpp). At each block size given (bytes per
 * peer: per rank of the v-, gather, scatter and alltoall collectives, the
 * whole message of allreduce, reduce, bcast and the scans) every
 * collective runs on the world and checks every element of its result
 * against its closed form: alltoall(v), allgather(v), gather(v),
 * scatter(v), allreduce, reduce, bcast, reduce_scatter(_block), scan,
 * exscan, barrier. The v-forms give ranks uneven counts and check that
 * what lies past each block is untouched. Then an alltoall of the largest
 * size on a dup of the world: a second communicator's windows fit too.
 *
 *   small_shm_every_test [bytes_per_peer ...]   (default 4096 262144 1048576)
 */
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

#define CALL(comm, call)                                                       \
  do {                                                                         \
    int rc_ = (call);                                                          \
    CHECK(rc_ == COLL_SUCCESS, "%s -> %s (%s)", #call, coll_strerror(rc_),     \
          coll_comm_last_error(comm));                                         \
  } while (0)

static const int32_t kUntouched = -7;

static int32_t *xmalloc(size_t elems) {
  int32_t *p = malloc(elems ? elems * sizeof *p : 1);
  CHECK(p != NULL, "malloc(%zu elements)", elems);
  return p;
}

static void fill(int32_t *p, size_t elems, int32_t v) {
  for (size_t i = 0; i < elems; ++i) p[i] = v;
}

/* Element i of what rank `from` gives rank `to` (small: sums of 16 fit). */
static int32_t value(int from, int to, size_t i) {
  return (int32_t)(((size_t)from * 131u + (size_t)to * 17u + i) % 1009u);
}

/* The uneven count of the block from rank `from` to rank `to`: c, c - c/8,
 * c - c/4 or c - 3c/8, so every block fits the c elements laid out for it. */
static size_t uneven(int from, int to, size_t c) {
  return c - (size_t)((from + to) % 4) * (c / 8);
}

/* Sum over ranks q in [lo, hi) of value(q, to, i). */
static int32_t sum_of(int lo, int hi, int to, size_t i) {
  int32_t s = 0;
  for (int q = lo; q < hi; ++q) s += value(q, to, i);
  return s;
}

static void check_block(const int32_t *got, size_t elems, size_t room, int from, int to,
                        const char *what, size_t c) {
  for (size_t i = 0; i < elems; ++i)
    CHECK(got[i] == value(from, to, i), "%s (%zu elements a peer): element %zu from rank %d is %d",
          what, c, i, from, (int)got[i]);
  for (size_t i = elems; i < room; ++i)
    CHECK(got[i] == kUntouched, "%s (%zu elements a peer): element %zu past rank %d's block is %d",
          what, c, i, from, (int)got[i]);
}

static void every_collective(coll_comm_t comm, size_t c) {
  const int r = rank_of(comm), n = size_of(comm);
  const size_t all = c * (size_t)n;
  int32_t *send = xmalloc(all), *recv = xmalloc(all);
  size_t *counts = calloc((size_t)n, sizeof *counts), *displs = calloc((size_t)n, sizeof *displs);
  size_t *rcounts = calloc((size_t)n, sizeof *rcounts), *rdispls = calloc((size_t)n, sizeof *rdispls);
  CHECK(counts && displs && rcounts && rdispls, "calloc");

  /* alltoall */
  for (int to = 0; to < n; ++to)
    for (size_t i = 0; i < c; ++i) send[(size_t)to * c + i] = value(r, to, i);
  fill(recv, all, kUntouched);
  CALL(comm, coll_alltoall(send, recv, c, COLL_INT32, comm));
  for (int from = 0; from < n; ++from) check_block(recv + (size_t)from * c, c, c, from, r, "alltoall", c);

  /* alltoallv: block (r -> to) of uneven(r, to) elements at to * c */
  for (int q = 0; q < n; ++q) {
    counts[q] = uneven(r, q, c);
    displs[q] = (size_t)q * c;
    rcounts[q] = uneven(q, r, c);
    rdispls[q] = (size_t)q * c;
  }
  fill(recv, all, kUntouched);
  CALL(comm, coll_alltoallv(send, counts, displs, recv, rcounts, rdispls, COLL_INT32, comm));
  for (int from = 0; from < n; ++from)
    check_block(recv + (size_t)from * c, rcounts[from], c, from, r, "alltoallv", c);

  /* allgather, allgatherv: rank q's block is value(q, 0, .) */
  for (size_t i = 0; i < c; ++i) send[i] = value(r, 0, i);
  fill(recv, all, kUntouched);
  CALL(comm, coll_allgather(send, recv, c, COLL_INT32, comm));
  for (int from = 0; from < n; ++from) check_block(recv + (size_t)from * c, c, c, from, 0, "allgather", c);
  for (int q = 0; q < n; ++q) {
    rcounts[q] = uneven(q, 0, c);
    rdispls[q] = (size_t)q * c;
  }
  fill(recv, all, kUntouched);
  CALL(comm, coll_allgatherv(send, rcounts[r], recv, rcounts, rdispls, COLL_INT32, comm));
  for (int from = 0; from < n; ++from)
    check_block(recv + (size_t)from * c, rcounts[from], c, from, 0, "allgatherv", c);

  /* gather, gatherv to rank 0 */
  fill(recv, all, kUntouched);
  CALL(comm, coll_gather(send, r == 0 ? recv : NULL, c, COLL_INT32, 0, comm));
  if (r == 0)
    for (int from = 0; from < n; ++from) check_block(recv + (size_t)from * c, c, c, from, 0, "gather", c);
  fill(recv, all, kUntouched);
  CALL(comm, coll_gatherv(send, rcounts[r], r == 0 ? recv : NULL, rcounts, rdispls, COLL_INT32, 0, comm));
  if (r == 0)
    for (int from = 0; from < n; ++from)
      check_block(recv + (size_t)from * c, rcounts[from], c, from, 0, "gatherv", c);

  /* scatter, scatterv from the middle rank: block to q is value(root, q, .) */
  const int sroot = n / 2;
  for (int to = 0; to < n; ++to)
    for (size_t i = 0; i < c; ++i) send[(size_t)to * c + i] = value(sroot, to, i);
  fill(recv, c, kUntouched);
  CALL(comm, coll_scatter(r == sroot ? send : NULL, recv, c, COLL_INT32, sroot, comm));
  check_block(recv, c, c, sroot, r, "scatter", c);
  for (int q = 0; q < n; ++q) {
    counts[q] = uneven(sroot, q, c);
    displs[q] = (size_t)q * c;
  }
  fill(recv, c, kUntouched);
  CALL(comm, coll_scatterv(r == sroot ? send : NULL, counts, displs, recv, counts[r], COLL_INT32,
                           sroot, comm));
  check_block(recv, counts[r], c, sroot, r, "scatterv", c);

  /* allreduce, reduce to the last rank, scan, exscan: sums of value(q, 0, i) */
  for (size_t i = 0; i < c; ++i) send[i] = value(r, 0, i);
  fill(recv, c, kUntouched);
  CALL(comm, coll_allreduce(send, recv, c, COLL_INT32, COLL_SUM, comm));
  for (size_t i = 0; i < c; ++i)
    CHECK(recv[i] == sum_of(0, n, 0, i), "allreduce (%zu elements): element %zu is %d", c, i, (int)recv[i]);
  fill(recv, c, kUntouched);
  CALL(comm, coll_reduce(send, r == n - 1 ? recv : NULL, c, COLL_INT32, COLL_SUM, n - 1, comm));
  if (r == n - 1)
    for (size_t i = 0; i < c; ++i)
      CHECK(recv[i] == sum_of(0, n, 0, i), "reduce (%zu elements): element %zu is %d", c, i, (int)recv[i]);
  fill(recv, c, kUntouched);
  CALL(comm, coll_scan(send, recv, c, COLL_INT32, COLL_SUM, comm));
  for (size_t i = 0; i < c; ++i)
    CHECK(recv[i] == sum_of(0, r + 1, 0, i), "scan (%zu elements): element %zu is %d", c, i, (int)recv[i]);
  fill(recv, c, kUntouched);
  CALL(comm, coll_exscan(send, recv, c, COLL_INT32, COLL_SUM, comm));
  if (r > 0)
    for (size_t i = 0; i < c; ++i)
      CHECK(recv[i] == sum_of(0, r, 0, i), "exscan (%zu elements): element %zu is %d", c, i, (int)recv[i]);

  /* bcast from rank 1 */
  const int broot = 1 % n;
  for (size_t i = 0; i < c; ++i) recv[i] = r == broot ? value(broot, 0, i) : kUntouched;
  CALL(comm, coll_bcast(recv, c, COLL_INT32, broot, comm));
  check_block(recv, c, c, broot, 0, "bcast", c);

  /* reduce_scatter_block, reduce_scatter: block j of every rank's send is
   * value(q, j, .); rank j gets the sums */
  for (int to = 0; to < n; ++to)
    for (size_t i = 0; i < c; ++i) send[(size_t)to * c + i] = value(r, to, i);
  fill(recv, c, kUntouched);
  CALL(comm, coll_reduce_scatter_block(send, recv, c, COLL_INT32, COLL_SUM, comm));
  for (size_t i = 0; i < c; ++i)
    CHECK(recv[i] == sum_of(0, n, r, i), "reduce_scatter_block (%zu elements): element %zu is %d",
          c, i, (int)recv[i]);
  /* uneven: block j holds uneven(j, 0, c) elements, packed */
  size_t at = 0;
  for (int to = 0; to < n; ++to) {
    rcounts[to] = uneven(to, 0, c);
    for (size_t i = 0; i < rcounts[to]; ++i) send[at + i] = value(r, to, i);
    at += rcounts[to];
  }
  fill(recv, c, kUntouched);
  CALL(comm, coll_reduce_scatter(send, recv, rcounts, COLL_INT32, COLL_SUM, comm));
  for (size_t i = 0; i < rcounts[r]; ++i)
    CHECK(recv[i] == sum_of(0, n, r, i), "reduce_scatter (%zu elements): element %zu is %d", c, i,
          (int)recv[i]);
  for (size_t i = rcounts[r]; i < c; ++i)
    CHECK(recv[i] == kUntouched, "reduce_scatter (%zu elements): element %zu past the block is %d",
          c, i, (int)recv[i]);

  CALL(comm, coll_barrier(comm));
  free(send);
  free(recv);
  free(counts);
  free(displs);
  free(rcounts);
  free(rdispls);
}

int main(int argc, char **argv) {
  OK(coll_init(&argc, &argv));
  coll_comm_t world = coll_comm_world();
  g_rank = rank_of(world);
  const int n = size_of(world);
  size_t sizes[16] = {4096, 262144, 1048576};
  int nsizes = 3;
  if (argc > 1) {
    nsizes = 0;
    for (int a = 1; a < argc && nsizes < 16; ++a) sizes[nsizes++] = (size_t)strtoull(argv[a], NULL, 0);
  }
  size_t largest = 0;
  for (int s = 0; s < nsizes; ++s) {
    const size_t c = sizes[s] / sizeof(int32_t);
    CHECK(c >= 8, "a block of %zu bytes: at least 32", sizes[s]);
    every_collective(world, c);
    if (c > largest) largest = c;
    if (g_rank == 0) printf("small_shm_every_test: %d ranks, %zu bytes a peer: every collective exact\n", n, sizes[s]);
    fflush(stdout);
  }

  /* A second communicator: its windows are committed on top of the world's. */
  coll_comm_t dup = COLL_COMM_NULL;
  CALL(world, coll_comm_dup(world, &dup));
  int32_t *send = xmalloc(largest * (size_t)n), *recv = xmalloc(largest * (size_t)n);
  for (int to = 0; to < n; ++to)
    for (size_t i = 0; i < largest; ++i) send[(size_t)to * largest + i] = value(g_rank, to, i);
  fill(recv, largest * (size_t)n, kUntouched);
  CALL(dup, coll_alltoall(send, recv, largest, COLL_INT32, dup));
  for (int from = 0; from < n; ++from)
    check_block(recv + (size_t)from * largest, largest, largest, from, g_rank, "alltoall on a dup", largest);
  free(send);
  free(recv);
  CALL(dup, coll_comm_free(&dup));

  OK(coll_finalize());
  if (g_rank == 0) printf("small_shm_every_test: %d ranks: ok\n", n);
  return 0;
}
