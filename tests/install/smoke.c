/* The program scripts/package-test.sh builds against an installed libcoll
 * (with pkg-config, and with CMake's find_package) and runs under the
 * installed collrun: an allreduce and a broadcast of known values.
 *
 *   smoke RANKS    exits 0 when the job has RANKS ranks (collrun's
 *                  bootstrap, not a job of one) and every result is right.
 * Rank 0 prints "libcoll VERSION: allreduce and bcast correct on N ranks"
 * (the version from coll.h) for the script to check. C99. */
#include <coll/coll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT 1000

static int check(int rc, const char *what, coll_comm_t comm) {
  if (rc != COLL_SUCCESS) {
    fprintf(stderr, "smoke: %s: %s: %s\n", what, coll_strerror(rc), coll_comm_last_error(comm));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  int expected_size = argc > 1 ? atoi(argv[1]) : 1;
  if (check(coll_init(&argc, &argv), "coll_init", NULL)) return 1;
  coll_comm_t world = coll_comm_world();
  int rank = -1, size = -1, failures = 0;
  if (check(coll_comm_rank(world, &rank), "coll_comm_rank", world) ||
      check(coll_comm_size(world, &size), "coll_comm_size", world))
    return 1;
  if (size != expected_size) {
    fprintf(stderr, "smoke: rank %d: %d ranks (bootstrap %s), expected %d\n", rank, size,
            coll_comm_bootstrap_name(world), expected_size);
    return 1;
  }

  /* Rank r contributes (r + 1) * (i + 1) at i: the sum is
   * (i + 1) * size * (size + 1) / 2. */
  static int64_t in[COUNT], out[COUNT];
  for (int i = 0; i < COUNT; ++i) in[i] = (int64_t)(rank + 1) * (i + 1);
  if (check(coll_allreduce(in, out, COUNT, COLL_INT64, COLL_SUM, world), "coll_allreduce", world))
    return 1;
  for (int i = 0; i < COUNT; ++i) {
    int64_t want = (int64_t)(i + 1) * size * (size + 1) / 2;
    if (out[i] != want) {
      if (failures++ < 5)
        fprintf(stderr, "smoke: rank %d: allreduce[%d] = %lld, expected %lld\n", rank, i,
                (long long)out[i], (long long)want);
    }
  }

  /* The last rank broadcasts 0.5 * i. */
  static double values[COUNT];
  const int root = size - 1;
  for (int i = 0; i < COUNT; ++i) values[i] = rank == root ? 0.5 * i : -1.0;
  if (check(coll_bcast(values, COUNT, COLL_DOUBLE, root, world), "coll_bcast", world)) return 1;
  for (int i = 0; i < COUNT; ++i) {
    if (values[i] != 0.5 * i) {
      if (failures++ < 10)
        fprintf(stderr, "smoke: rank %d: bcast[%d] = %g, expected %g\n", rank, i, values[i],
                0.5 * i);
    }
  }

  if (check(coll_barrier(world), "coll_barrier", world)) return 1;
  if (rank == 0 && failures == 0)
    printf("libcoll %d.%d: allreduce and bcast correct on %d ranks (bootstrap %s, transport %s)\n",
           COLL_VERSION_MAJOR, COLL_VERSION_MINOR, size, coll_comm_bootstrap_name(world),
           coll_comm_transport_name(world));
  if (check(coll_finalize(), "coll_finalize", NULL)) return 1;
  return failures == 0 ? 0 : 1;
}
