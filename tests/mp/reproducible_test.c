/* COLL_REPRODUCIBLE=order (issue 36): floating-point sums and products are
 * the same bits whatever the call and whatever libcoll would have chosen.
 *
 *   reproducible_test COUNT
 *
 * Every rank draws its operands (float, double, float16, bfloat16) from a
 * seed of its own: exponents over a wide range and, in every fourth
 * element, a large term that the ranks' terms cancel, so that any two
 * orders of summation differ in their last bits somewhere. Under the knob,
 * one run checks that these give identical bytes at every rank:
 * coll_allreduce, coll_reduce at every root followed by coll_bcast,
 * coll_reduce_scatter_block followed by coll_allgather, coll_iallreduce and
 * a persistent allreduce (started twice); and rank 0 prints one hash line
 * per datatype and op, which tests/mp/reproducible.sh compares across runs
 * with other algorithms forced, other slot sizes, the synchronous path off
 * and tcp: the same lines every time. Without the knob it prints the
 * allreduce's hashes only (the script shows that those differ between
 * algorithms: the data is sensitive to the order, so the test can fail). */
#define _POSIX_C_SOURCE 200809L
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"
#include "order_operands.h"

static const coll_datatype_t kTypes[] = {COLL_FLOAT, COLL_DOUBLE, COLL_FLOAT16, COLL_BFLOAT16};
static const char *const kTypeNames[] = {"float", "double", "float16", "bfloat16"};
static const size_t kSizes[] = {4, 8, 2, 2};

static uint16_t to_bfloat16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16); /* nearest even */
}
static uint16_t to_float16(float f) { /* normal range only: the operands stay in it */
  uint32_t u;
  memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000, exp = (u >> 23) & 0xff, mant = u & 0x7fffff;
  if (exp < 103) return (uint16_t)sign; /* below float16's range: zero */
  const uint32_t e = exp - 112, m = mant >> 13;
  return (uint16_t)(sign | (e << 10) | m);
}

static void fill(void *buf, int t, size_t count, int rank, int prod) {
  for (size_t i = 0; i < count; ++i) {
    const double x = operand(rank, i, prod);
    switch (t) {
      case 0: ((float *)buf)[i] = (float)x; break;
      case 1: ((double *)buf)[i] = x; break;
      case 2: ((uint16_t *)buf)[i] = to_float16((float)x); break;
      default: ((uint16_t *)buf)[i] = to_bfloat16((float)x); break;
    }
  }
}

static void same_bytes(const void *got, const void *want, size_t n, const char *what, int t,
                       const char *op) {
  CHECK(memcmp(got, want, n) == 0, "%s (%s %s) differs from coll_allreduce's bytes", what,
        kTypeNames[t], op);
}

int main(int argc, char **argv) {
  const size_t count = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000;
  OK(coll_init(&argc, &argv));
  const coll_comm_t w = coll_comm_world();
  g_rank = rank_of(w);
  const int n = size_of(w);
  const char *knob = getenv("COLL_REPRODUCIBLE");
  /* exact: the sums exact-sum's, the rest as order: every form agrees too */
  const int order = knob && (strcmp(knob, "order") == 0 || strcmp(knob, "exact") == 0);
  const size_t per = (count + (size_t)n - 1) / (size_t)n; /* reduce_scatter_block's block */
  const size_t total = per * (size_t)n;
  char *in = malloc(total * 8), *ref = malloc(total * 8), *out = malloc(total * 8),
       *block = malloc(per * 8);
  CHECK(in && ref && out && block, "memory");
  static const coll_op_t kOps[] = {COLL_SUM, COLL_PROD};
  static const char *const kOpNames[] = {"sum", "prod"};
  for (int t = 0; t < 4; ++t)
    for (int o = 0; o < 2; ++o) {
      const coll_datatype_t dt = kTypes[t];
      const size_t es = kSizes[t];
      g_state = 0x9E3779B97F4A7C15ULL * (uint64_t)(g_rank + 1) + (uint64_t)(t * 2 + o);
      fill(in, t, total, g_rank, o);
      OK(coll_allreduce(in, ref, total, dt, kOps[o], w));
      if (order) {
        for (int root = 0; root < n; ++root) {
          memset(out, 0x5a, total * es);
          OK(coll_reduce(in, out, total, dt, kOps[o], root, w));
          OK(coll_bcast(out, total, dt, root, w));
          same_bytes(out, ref, total * es, "coll_reduce + coll_bcast", t, kOpNames[o]);
        }
        OK(coll_reduce_scatter_block(in, block, per, dt, kOps[o], w));
        OK(coll_allgather(block, out, per, dt, w));
        same_bytes(out, ref, total * es, "coll_reduce_scatter_block + coll_allgather", t,
                   kOpNames[o]);
        coll_request_t r;
        OK(coll_iallreduce(in, out, total, dt, kOps[o], w, &r));
        OK(coll_wait(&r));
        same_bytes(out, ref, total * es, "coll_iallreduce", t, kOpNames[o]);
        OK(coll_allreduce_init(in, out, total, dt, kOps[o], w, &r));
        for (int k = 0; k < 2; ++k) {
          memset(out, 0x5a, total * es);
          OK(coll_start(r));
          OK(coll_wait(&r));
          same_bytes(out, ref, total * es, "a persistent allreduce", t, kOpNames[o]);
        }
        OK(coll_request_free(&r));
      }
      /* Every rank holds rank 0's bytes (allreduce's promise, kept here
       * by every algorithm). */
      uint64_t h = fnv(ref, total * es), h0 = h;
      OK(coll_bcast(&h0, 1, COLL_UINT64, 0, w));
      CHECK(h == h0, "%s %s: this rank's allreduce result differs from rank 0's",
            kTypeNames[t], kOpNames[o]);
      if (g_rank == 0)
        printf("hash %s %s %zu: %016llx\n", kTypeNames[t], kOpNames[o], total,
               (unsigned long long)h);
    }
  free(in), free(ref), free(out), free(block);
  OK(coll_finalize());
  return 0;
}
