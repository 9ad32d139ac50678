/* Hierarchical collectives across hosts. Every rank runs allreduce, bcast
 * and reduce (several roots, sizes from one element to past one slot) and
 * barrier on the world, a dup, a split in reverse order, a split within
 * each host and a split of the hosts' leaders, and checks every result
 * against its closed form, which algorithm ran (coll_comm_last_algorithm:
 * "hierarchical" exactly where the communicator spans hosts with several
 * ranks on one), and what crossed the network (coll_comm_resource_stats'
 * network_bytes): under the hierarchical algorithms only the hosts'
 * leaders send anything across hosts.
 *
 *   hierarchy_test PER_HOST [flat | rdma]
 *
 * PER_HOST: ranks per host, consecutive (collrun's block placement; the
 * tests pretend hosts with COLL_HOST_ID, tests/mp/fake_hosts.sh, or run on
 * network-namespace hosts). flat: the job runs with COLL_HIERARCHY=0, so
 * nothing is hierarchical and ranks other than leaders cross too. rdma:
 * every pair uses the network (the rdma transport, within a host too), so
 * only the results and the algorithm are checked, not who crossed. Rank 0
 * prints the bytes that crossed, per collective, for the note's table. */
#define _POSIX_C_SOURCE 200809L
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

static int g_flat = 0;
static int g_everyone_on_network = 0;

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  CHECK(p != NULL, "malloc(%zu)", bytes);
  return p;
}

static uint64_t network_bytes(coll_comm_t c) {
  coll_resource_stats_t s;
  OK(coll_comm_resource_stats(c, &s));
  return s.network_bytes;
}

static void expect_algorithm(coll_comm_t comm, const char *collective, int hierarchical) {
  const char *used = coll_comm_last_algorithm(comm, collective);
  if (hierarchical)
    CHECK(strcmp(used, "hierarchical") == 0, "%s ran %s, not hierarchical", collective, used);
  else
    CHECK(strcmp(used, "hierarchical") != 0, "%s ran hierarchical on a flat communicator",
          collective);
}

/* Counts: one element, odd, one past a line message, a slot and a half
 * (128 KiB slots of int64: 16384 elements). */
static const size_t kCounts[] = {1, 7, 40, 24577};

/* Every collective on comm, checked. hierarchical: whether it should have
 * run the hierarchical algorithms. */
static void run_all(coll_comm_t comm, int hierarchical) {
  int n, r;
  OK(coll_comm_size(comm, &n));
  OK(coll_comm_rank(comm, &r));
  for (size_t c = 0; c < sizeof kCounts / sizeof kCounts[0]; ++c) {
    const size_t count = kCounts[c];
    int64_t *x = xmalloc(count * sizeof *x), *y = xmalloc(count * sizeof *y);
    for (size_t i = 0; i < count; ++i) x[i] = (int64_t)(r + 1) * (int64_t)(i + 1);
    OK(coll_allreduce(x, y, count, COLL_INT64, COLL_SUM, comm));
    for (size_t i = 0; i < count; ++i)
      CHECK(y[i] == (int64_t)(i + 1) * n * (n + 1) / 2, "allreduce count %zu [%zu] = %lld",
            count, i, (long long)y[i]);
    expect_algorithm(comm, "allreduce", hierarchical);
    /* In place, MAX: element i is (n - 1) + i. */
    for (size_t i = 0; i < count; ++i) x[i] = (int64_t)r + (int64_t)i;
    OK(coll_allreduce(COLL_IN_PLACE, x, count, COLL_INT64, COLL_MAX, comm));
    for (size_t i = 0; i < count; ++i)
      CHECK(x[i] == (int64_t)(n - 1) + (int64_t)i, "allreduce max count %zu [%zu]", count, i);
    /* Roots: the first rank, a non-leader of the first host, the last
     * rank, and the middle one. */
    const int roots[4] = {0, 1 % n, n - 1, n / 2};
    for (int k = 0; k < 4; ++k) {
      const int root = roots[k];
      for (size_t i = 0; i < count; ++i) x[i] = r == root ? (int64_t)(root * 1000003 + (int)i) : -1;
      OK(coll_bcast(x, count, COLL_INT64, root, comm));
      for (size_t i = 0; i < count; ++i)
        CHECK(x[i] == (int64_t)(root * 1000003 + (int)i), "bcast root %d count %zu [%zu]", root,
              count, i);
      expect_algorithm(comm, "bcast", hierarchical);
      for (size_t i = 0; i < count; ++i) x[i] = (int64_t)(r + 1) * (int64_t)(i + 1);
      memset(y, 0xff, count * sizeof *y);
      /* The root's recvbuf only; NULL elsewhere, as MPI allows. */
      OK(coll_reduce(x, r == root ? y : NULL, count, COLL_INT64, COLL_SUM, root, comm));
      if (r == root)
        for (size_t i = 0; i < count; ++i)
          CHECK(y[i] == (int64_t)(i + 1) * n * (n + 1) / 2, "reduce root %d count %zu [%zu]",
                root, count, i);
      expect_algorithm(comm, "reduce", hierarchical);
    }
    free(x);
    free(y);
    OK(coll_barrier(comm));
    expect_algorithm(comm, "barrier", hierarchical);
  }
  /* Zero elements: nothing moves, on every path. */
  OK(coll_allreduce(COLL_IN_PLACE, NULL, 0, COLL_INT64, COLL_SUM, comm));
  OK(coll_bcast(NULL, 0, COLL_INT64, n - 1, comm));
}

/* The bytes each collective sends across hosts, summed over the ranks of
 * comm, for 20 calls of 8 B and of 64 KiB (a barrier: 20 calls). Checks
 * that only leaders crossed when hierarchical. */
static void count_crossings(coll_comm_t comm, int leader, const char *label) {
  enum { kCalls = 20, kMaxCount = 8192 };
  int r;
  OK(coll_comm_rank(comm, &r));
  int64_t *x = xmalloc(kMaxCount * sizeof *x);
  for (size_t i = 0; i < kMaxCount; ++i) x[i] = 1;
  const char *names[4] = {"allreduce", "bcast", "reduce", "barrier"};
  for (int size = 0; size < 2; ++size) {
    const size_t count = size == 0 ? 1 : kMaxCount;
    uint64_t sums[4];
    for (int c = 0; c < 4; ++c) {
      OK(coll_barrier(comm));
      const uint64_t before = network_bytes(comm);
      for (int k = 0; k < kCalls; ++k) {
        if (c == 0) OK(coll_allreduce(COLL_IN_PLACE, x, count, COLL_INT64, COLL_MAX, comm));
        if (c == 1) OK(coll_bcast(x, count, COLL_INT64, 0, comm));
        if (c == 2) OK(coll_reduce(x, r == 0 ? x : NULL, count, COLL_INT64, COLL_MAX, 0, comm));
        if (c == 3) OK(coll_barrier(comm));
      }
      const uint64_t sent = network_bytes(comm) - before;
      if (!g_flat && !g_everyone_on_network && !leader)
        CHECK(sent == 0, "%s %s: a non-leader sent %llu bytes across hosts", label, names[c],
              (unsigned long long)sent);
      sums[c] = sent;
      OK(coll_allreduce(COLL_IN_PLACE, &sums[c], 1, COLL_UINT64, COLL_SUM, comm));
    }
    if (r == 0)
      printf("hierarchy_test %s %s: bytes across hosts, %d calls of %zu B, all ranks: "
             "allreduce %llu, bcast %llu, reduce %llu, barrier %llu\n",
             g_flat ? "flat" : "hierarchical", label, kCalls, count * sizeof *x,
             (unsigned long long)sums[0], (unsigned long long)sums[1],
             (unsigned long long)sums[2], (unsigned long long)sums[3]);
  }
  free(x);
}

int main(int argc, char **argv) {
  OK(coll_init(&argc, &argv));
  CHECK(argc >= 2, "usage: hierarchy_test PER_HOST [flat | rdma]");
  const int per_host = atoi(argv[1]);
  g_flat = argc > 2 && strcmp(argv[2], "flat") == 0;
  g_everyone_on_network = argc > 2 && strcmp(argv[2], "rdma") == 0;
  coll_comm_t world = coll_comm_world();
  int n;
  OK(coll_comm_rank(world, &g_rank));
  OK(coll_comm_size(world, &n));
  CHECK(per_host >= 1, "PER_HOST %d", per_host);
  const int hosts = (n + per_host - 1) / per_host;
  const int host = g_rank / per_host, leader = g_rank % per_host == 0;
  const int spans = !g_flat && hosts > 1 && hosts < n;
  /* The registrations are the windows (the world's, and where it spans
   * hosts its host's sub-communicator's and, at a leader, the leaders')
   * and the user buffers the registration cache holds (on rdma the
   * sub-communicators' splits pinned their exchange buffers), and on rdma
   * the transport's own: its control block, and in a window the slots of
   * each writer that wrote there (at most n - 1 a window). */
  coll_resource_stats_t at_start;
  coll_regcache_stats_t cache;
  OK(coll_comm_resource_stats(world, &at_start));
  OK(coll_comm_regcache_stats(world, &cache));
  const uint64_t windows = 1 + (spans ? 1 + (uint64_t)leader : 0);
  const int64_t own = (int64_t)at_start.registrations - (int64_t)windows -
                      (int64_t)(cache.registrations - cache.deregistrations);
  const int rdma = strstr(coll_comm_transport_name(world), "rdma") != NULL;
  CHECK(rdma ? own >= 1 && own <= 1 + (int64_t)windows * (n - 1) : own == 0,
        "%llu registrations: %llu windows and %llu cached buffers, and %s, expected",
        (unsigned long long)at_start.registrations, (unsigned long long)windows,
        (unsigned long long)(cache.registrations - cache.deregistrations),
        rdma ? "the rdma control block and slot areas" : "nothing else");

  run_all(world, spans);
  count_crossings(world, leader, "world (hosts' ranks consecutive)");
  /* Hosts interleaved, as collrun --map-by node places ranks: a flat ring
   * or recursive doubling crosses between hosts at almost every step. The
   * leaders stay the world's (the first rank of each host comes first). */
  coll_comm_t interleaved;
  OK(coll_comm_split(world, 0, (g_rank % per_host) * hosts + host, &interleaved));
  run_all(interleaved, spans);
  count_crossings(interleaved, leader, "interleaved (hosts' ranks round-robin)");
  OK(coll_comm_free(&interleaved));

  coll_comm_t dup, reversed, node, leaders;
  OK(coll_comm_dup(world, &dup));
  run_all(dup, spans);
  /* Reverse order: hosts are numbered by their lowest rank in it, and the
   * leaders are the last ranks of each host in the world's order. */
  OK(coll_comm_split(world, 0, n - g_rank, &reversed));
  run_all(reversed, spans);
  /* Within one host: flat. */
  OK(coll_comm_split(world, host, g_rank, &node));
  run_all(node, 0);
  /* One rank per host: flat (the leaders are everyone). */
  OK(coll_comm_split(world, leader ? 0 : COLL_UNDEFINED, g_rank, &leaders));
  if (leader) {
    run_all(leaders, 0);
    OK(coll_comm_free(&leaders));
  }
  OK(coll_comm_free(&node));
  OK(coll_comm_free(&reversed));
  OK(coll_comm_free(&dup));
  if (g_rank == 0) printf("hierarchy_test: all checks passed at np %d, %d hosts\n", n, hosts);
  OK(coll_finalize());
  return 0;
}
