/* The operands of the COLL_REPRODUCIBLE tests (tests/mp/reproducible_test.c,
 * native; tests/pmpi/pmpi_reproducible.c, through the PMPI shim): every
 * rank draws from a seed of its own, exponents over a wide range and, in
 * every fourth element, a large term that the ranks' terms cancel, so that
 * any two orders of summation differ in their last bits somewhere; for
 * products, factors near 1. Header-only: the shim's test is built against
 * MPI alone. */
#ifndef COLL_TESTS_ORDER_OPERANDS_H
#define COLL_TESTS_ORDER_OPERANDS_H

#include <stddef.h>
#include <stdint.h>

static uint64_t g_state;
static uint64_t next_random(void) { /* xorshift64* */
  g_state ^= g_state >> 12, g_state ^= g_state << 25, g_state ^= g_state >> 27;
  return g_state * 2685821657736338717ULL;
}

/* Operand i of this rank, as a double before rounding to the type. */
static double operand(int rank, size_t i, int prod) {
  const double mantissa = 1.0 + (double)(next_random() % 1000000) / 1000000.0;
  if (prod) return (next_random() & 1 ? 1.0 : -1.0) * (0.5 + mantissa / 2); /* near 1 */
  const int exponent = (int)(next_random() % 24) - 12;
  double x = next_random() & 1 ? mantissa : -mantissa;
  x = exponent >= 0 ? x * (double)(1 << exponent) : x / (double)(1 << -exponent);
  if (i % 4 == 0) x += (rank % 2 ? -1.0 : 1.0) * 3000.0 * (rank + 1); /* cancels partly */
  return x;
}

/* FNV-1a of n bytes: the hash lines that tests/mp/reproducible.sh compares. */
static uint64_t fnv(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

#endif
