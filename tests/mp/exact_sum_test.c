/* COLL_REPRODUCIBLE=exact (issue 36): sums whose bits do not depend on the
 * number of ranks (tests/mp/exact_sum_check.py runs this at np 1-7 and
 * checks every result against a serial reference of the definition).
 *
 *   exact_sum_test COUNT OUTFILE [api]
 *
 * Element i of the vector has m = 1 + i % 7 contributions x(i, 0..m-1),
 * drawn as bits from (i, j) alone: wide exponent ranges, subnormals,
 * exact and near cancellation of the first two, and in some elements
 * infinities, NaNs, an overflowing pair, or every contribution -0. At np n
 * the contributions j < min(m, n) are held by ranks (i + j) % n; every
 * other rank passes -0, which the exact sum ignores (it is the identity of
 * IEEE addition, and the smallest key). So an element with m <= n has the
 * same contributions at every such n, spread over other ranks.
 *
 * One run checks that coll_allreduce, coll_iallreduce, a persistent
 * allreduce, coll_reduce at the last rank, coll_reduce_scatter_block and
 * coll_reduce_scatter (uneven blocks) give the same bytes for every
 * element, and rank 0 writes, per datatype and element, the result and the
 * contributions (bits, hex) to OUTFILE. With "api" the level is set by
 * coll_comm_set_reproducible instead of the environment, after checks that
 * a level that differs between ranks, or is out of range at one rank,
 * fails at every rank and changes nothing. */
#define _POSIX_C_SOURCE 200809L
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

enum { kMaxContributions = 7 };
static const coll_datatype_t kTypes[] = {COLL_DOUBLE, COLL_FLOAT, COLL_FLOAT16, COLL_BFLOAT16};
static const char *const kTypeNames[] = {"double", "float", "float16", "bfloat16"};
static const size_t kSizes[] = {8, 4, 2, 2};
/* fraction bits, exponent bits, and the span of biased exponents drawn */
static const int kFraction[] = {52, 23, 10, 7}, kExponentBits[] = {11, 8, 5, 8};
static const int kSpan[] = {120, 60, 28, 60};

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/* Contribution j of element i, as bits of type t. */
static uint64_t contribution(int t, size_t i, int j) {
  const int f = kFraction[t], eb = kExponentBits[t];
  const uint64_t max_biased = (1ULL << eb) - 1, bias = (max_biased >> 1);
  const uint64_t sign_bit = 1ULL << (f + eb), inf = max_biased << f;
  if (i % 37 == 0) return sign_bit; /* every contribution -0 */
  if (i % 23 == 5 && j == 0) return inf;
  if (i % 29 == 7 && j == 0) return inf | 1; /* a NaN with a payload */
  if (i % 31 == 3 && j < 2) return j == 0 ? inf | sign_bit : inf; /* -inf + inf */
  if (i % 41 == 9 && j < 2) return ((max_biased - 1) << f) | 5; /* the largest: overflows */
  const uint64_t r = mix((uint64_t)t << 56 ^ (uint64_t)i << 8 ^ (uint64_t)j);
  uint64_t biased = bias - (uint64_t)kSpan[t] / 2 + r % (uint64_t)kSpan[t];
  if (i % 19 == 4) biased = r % 2; /* subnormal (or the smallest normals) */
  const uint64_t fraction = (r >> 20) & ((1ULL << f) - 1);
  uint64_t bits = (biased << f) | fraction | ((r >> 63) ? sign_bit : 0);
  if (j == 1 && i % 3 != 0) { /* cancel x(i, 0), exactly or all but its last bit */
    const uint64_t first = contribution(t, i, 0);
    bits = first ^ sign_bit ^ (i % 3 == 2 ? 1 : 0);
  }
  return bits;
}

static void put(void *buf, int t, size_t i, uint64_t bits) {
  memcpy((char *)buf + i * kSizes[t], &bits, kSizes[t]); /* little-endian */
}
static uint64_t get(const void *buf, int t, size_t i) {
  uint64_t bits = 0;
  memcpy(&bits, (const char *)buf + i * kSizes[t], kSizes[t]);
  return bits;
}

/* This rank's operand of element i at np n. */
static uint64_t operand(int t, size_t i, int rank, int n) {
  const int m = 1 + (int)(i % 7), held = m < n ? m : n;
  for (int j = 0; j < held; ++j)
    if ((int)((i + (size_t)j) % (size_t)n) == rank) return contribution(t, i, j);
  return 1ULL << (kFraction[t] + kExponentBits[t]); /* -0 */
}

static int g_exact; /* else the order mode: the check's control */

static int is_nan(int t, uint64_t bits) {
  const int f = kFraction[t], eb = kExponentBits[t];
  const uint64_t max_biased = (1ULL << eb) - 1;
  return ((bits >> f) & max_biased) == max_biased && (bits & ((1ULL << f) - 1)) != 0;
}

/* Exact mode: the same bytes. The order mode fixes the association, not
 * which of two NaN operands a kernel's add passes on (a compiler may swap
 * the operands of a commutative add): there any NaN matches any NaN. */
static void same(const void *got, const void *want, size_t n, const char *what, int t) {
  for (size_t i = 0; i < n / kSizes[t]; ++i) {
    const uint64_t x = get(got, t, i), y = get(want, t, i);
    CHECK(x == y || (!g_exact && is_nan(t, x) && is_nan(t, y)),
          "%s (%s) element %zu: %llx, coll_allreduce's %llx", what, kTypeNames[t], i,
          (unsigned long long)x, (unsigned long long)y);
  }
}

/* A level that differs between ranks, or is out of range at one, fails at
 * every rank; the communicator's level stays (checked by the sums after). */
static void refused_levels(coll_comm_t w, int rank, int n) {
  if (n < 2) return;
  const int status = coll_comm_set_reproducible(
      w, rank == n - 1 ? COLL_REPRODUCIBLE_ORDER : COLL_REPRODUCIBLE_EXACT);
  CHECK(status == COLL_ERR_INVALID_ARG, "different levels: %s", coll_strerror(status));
  CHECK(strstr(coll_comm_last_error(w), "different levels"), "message: %s",
        coll_comm_last_error(w));
  const int bad = coll_comm_set_reproducible(
      w, rank == 0 ? (coll_reproducible_t)7 : COLL_REPRODUCIBLE_EXACT);
  CHECK(bad == COLL_ERR_INVALID_ARG, "a level out of range at rank 0: %s", coll_strerror(bad));
  double x = 1, y = 0;
  OK(coll_allreduce(&x, &y, 1, COLL_DOUBLE, COLL_SUM, w));
  CHECK(y == n && strcmp(coll_comm_last_algorithm(w, "allreduce"), "exact") != 0,
        "a refused level changed the communicator's: %s", coll_comm_last_algorithm(w, "allreduce"));
}

int main(int argc, char **argv) {
  CHECK(argc >= 3, "usage: exact_sum_test COUNT OUTFILE [api]");
  const size_t count = (size_t)strtoull(argv[1], NULL, 10);
  OK(coll_init(&argc, &argv));
  const coll_comm_t w = coll_comm_world();
  g_rank = rank_of(w);
  const int n = size_of(w);
  const char *knob = getenv("COLL_REPRODUCIBLE");
  g_exact = knob && strcmp(knob, "exact") == 0;
  if (argc > 3 && strcmp(argv[3], "api") == 0) {
    CHECK(!knob || !*knob || strcmp(knob, "0") == 0, "api: run without COLL_REPRODUCIBLE");
    g_exact = 1;
    refused_levels(w, g_rank, n);
    OK(coll_comm_set_reproducible(w, COLL_REPRODUCIBLE_EXACT));
  }
  /* reduce_scatter_block's vector is per * n elements; the checks read
   * the first `count` of every form. */
  const size_t per = (count + (size_t)n - 1) / (size_t)n, total = per * (size_t)n;
  size_t *counts = malloc((size_t)n * sizeof *counts);
  char *in = malloc(total * 8), *ref = malloc(total * 8), *out = malloc(total * 8),
       *block = malloc(total * 8);
  CHECK(counts && in && ref && out && block, "memory");
  /* Uneven reduce_scatter blocks: rank r gets 2r parts of 1 + 2 + ... */
  size_t parts = 0, given = 0;
  for (int r = 0; r < n; ++r) parts += (size_t)r + 1;
  for (int r = 0; r < n; ++r) {
    counts[r] = r == n - 1 ? total - given : total * ((size_t)r + 1) / parts;
    given += counts[r];
  }
  FILE *f = NULL;
  if (g_rank == 0) CHECK((f = fopen(argv[2], "w")) != NULL, "cannot write %s", argv[2]);
  for (int t = 0; t < 4; ++t) {
    const coll_datatype_t dt = kTypes[t];
    const size_t es = kSizes[t];
    for (size_t i = 0; i < total; ++i) put(in, t, i, operand(t, i, g_rank, n));
    OK(coll_allreduce(in, ref, total, dt, COLL_SUM, w));
    coll_request_t r;
    OK(coll_iallreduce(in, out, total, dt, COLL_SUM, w, &r));
    OK(coll_wait(&r));
    same(out, ref, total * es, "coll_iallreduce", t);
    OK(coll_allreduce_init(in, out, total, dt, COLL_SUM, w, &r));
    for (int k = 0; k < 2; ++k) {
      memset(out, 0x5a, total * es);
      OK(coll_start(r));
      OK(coll_wait(&r));
      same(out, ref, total * es, "a persistent allreduce", t);
    }
    OK(coll_request_free(&r));
    memcpy(out, in, total * es);
    OK(coll_allreduce(COLL_IN_PLACE, out, total, dt, COLL_SUM, w));
    same(out, ref, total * es, "coll_allreduce in place", t);
    memset(out, 0x5a, total * es);
    OK(coll_reduce(in, out, total, dt, COLL_SUM, n - 1, w));
    if (g_rank == n - 1) same(out, ref, total * es, "coll_reduce at the last rank", t);
    OK(coll_reduce_scatter_block(in, block, per, dt, COLL_SUM, w));
    same(block, ref + (size_t)g_rank * per * es, per * es, "coll_reduce_scatter_block", t);
    OK(coll_reduce_scatter(in, block, counts, dt, COLL_SUM, w));
    size_t before = 0;
    for (int q = 0; q < g_rank; ++q) before += counts[q];
    same(block, ref + before * es, counts[g_rank] * es, "coll_reduce_scatter", t);
    const char *algo = coll_comm_last_algorithm(w, "allreduce");
    CHECK(n == 1 || !g_exact || strcmp(algo, "exact") == 0, "allreduce ran %s, not exact", algo);
    if (f)
      for (size_t i = 0; i < count; ++i) {
        const int m = 1 + (int)(i % 7), held = m < n ? m : n;
        fprintf(f, "%s %zu %llx", kTypeNames[t], i, (unsigned long long)get(ref, t, i));
        for (int j = 0; j < held; ++j)
          fprintf(f, " %llx", (unsigned long long)contribution(t, i, j));
        fputc('\n', f);
      }
  }
  if (f) CHECK(fclose(f) == 0, "writing %s", argv[2]);
  free(counts), free(in), free(ref), free(out), free(block);
  OK(coll_finalize());
  return 0;
}
