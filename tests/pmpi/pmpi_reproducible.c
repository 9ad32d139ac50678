/* COLL_REPRODUCIBLE=order through the PMPI shim: an unmodified MPI program's
 * floating-point sums and products are the same bits whatever algorithm
 * libcoll would have chosen (tests/mp/reproducible_test.c is the native
 * form; this one is built against MPI alone).
 *
 *   pmpi_reproducible COUNT
 *
 * Every rank draws float and double operands from a seed of its own
 * (exponents over a wide range, and in every fourth element a large term
 * that the ranks' terms cancel), so any two orders of summation differ in
 * their last bits somewhere. Under the knob one run checks that
 * MPI_Reduce at every root + MPI_Bcast, MPI_Reduce_scatter_block +
 * MPI_Allgather and MPI_Iallreduce give MPI_Allreduce's bytes; rank 0 prints
 * one hash line per datatype and op, which tests/mp/reproducible.sh compares
 * across runs with other algorithms, slot sizes and transports forced.
 * Exit status 1 on any failed check. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../mp/order_operands.h"

static int g_rank = -1, g_failures = 0;
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "[rank %d] pmpi_reproducible: FAILED: ", g_rank);       \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
      ++g_failures;                                                            \
    }                                                                          \
  } while (0)

int main(int argc, char **argv) {
  const int count = argc > 1 ? atoi(argv[1]) : 1000;
  MPI_Init(&argc, &argv);
  int n;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const char *knob = getenv("COLL_REPRODUCIBLE");
  /* exact: the sums exact-sum's, the rest as order: every form agrees too */
  const int order = knob && (strcmp(knob, "order") == 0 || strcmp(knob, "exact") == 0);
  const int per = (count + n - 1) / n, total = per * n;
  char *in = malloc((size_t)total * 8), *ref = malloc((size_t)total * 8),
       *out = malloc((size_t)total * 8), *block = malloc((size_t)per * 8);
  const MPI_Datatype types[] = {MPI_FLOAT, MPI_DOUBLE};
  const char *const type_names[] = {"float", "double"};
  const MPI_Op ops[] = {MPI_SUM, MPI_PROD};
  const char *const op_names[] = {"sum", "prod"};
  for (int t = 0; t < 2; ++t)
    for (int o = 0; o < 2; ++o) {
      const size_t es = t == 0 ? 4 : 8, bytes = (size_t)total * es;
      g_state = 0x9E3779B97F4A7C15ULL * (uint64_t)(g_rank + 1) + (uint64_t)(t * 2 + o);
      for (int i = 0; i < total; ++i) {
        const double x = operand(g_rank, (size_t)i, o);
        if (t == 0)
          ((float *)in)[i] = (float)x;
        else
          ((double *)in)[i] = x;
      }
      MPI_Allreduce(in, ref, total, types[t], ops[o], MPI_COMM_WORLD);
      if (order) {
        for (int root = 0; root < n; ++root) {
          memset(out, 0x5a, bytes);
          MPI_Reduce(in, out, total, types[t], ops[o], root, MPI_COMM_WORLD);
          MPI_Bcast(out, total, types[t], root, MPI_COMM_WORLD);
          CHECK(memcmp(out, ref, bytes) == 0, "MPI_Reduce at %d + MPI_Bcast (%s %s): other bits "
                "than MPI_Allreduce's", root, type_names[t], op_names[o]);
        }
        MPI_Reduce_scatter_block(in, block, per, types[t], ops[o], MPI_COMM_WORLD);
        MPI_Allgather(block, per, types[t], out, per, types[t], MPI_COMM_WORLD);
        CHECK(memcmp(out, ref, bytes) == 0, "MPI_Reduce_scatter_block + MPI_Allgather (%s %s): "
              "other bits than MPI_Allreduce's", type_names[t], op_names[o]);
        MPI_Request r;
        memset(out, 0x5a, bytes);
        MPI_Iallreduce(in, out, total, types[t], ops[o], MPI_COMM_WORLD, &r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
        CHECK(memcmp(out, ref, bytes) == 0, "MPI_Iallreduce (%s %s): other bits than "
              "MPI_Allreduce's", type_names[t], op_names[o]);
      }
      unsigned long long h = fnv(ref, bytes), h0 = h;
      MPI_Bcast(&h0, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
      CHECK(h == h0, "%s %s: this rank's MPI_Allreduce result differs from rank 0's",
            type_names[t], op_names[o]);
      if (g_rank == 0) printf("hash %s %s %d: %016llx\n", type_names[t], op_names[o], total, h);
    }
  free(in), free(ref), free(out), free(block);
  int failed = g_failures, any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any ? 1 : 0;
}
