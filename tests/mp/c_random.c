/* A user's C99 program: only <coll/coll.h>, built with
 * `cc c_random.c $(pkg-config --cflags --libs libcoll)` (c_program_test.sh).
 *
 * Runs a seeded random sequence of allreduces and broadcasts (sizes 0 to
 * 100000 elements, every datatype, every valid operator, every root, in
 * place or not). Every rank draws the same sequence, and every rank's input
 * is a function of (seed, step, rank, index), so each rank checks its result
 * against values it computes alone. Inputs keep floating-point results
 * exact in any order; integer SUM/PROD wrap, computed on unsigned 64-bit
 * values and truncated to the type's width. */
#include <coll/coll.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STEPS 60
#define MAX_COUNT 100000u

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b * 0xBF58476D1CE4E5B9ull + c * 0x94D049BB133111EBull +
               d * 0xD6E8FEB86659FD93ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* The sequence every rank draws in the same order. */
static uint64_t rng_state = 20240601u;
static uint64_t next_random(void) {
  rng_state = mix(rng_state, 1, 2, 3);
  return rng_state;
}

static int is_float_type(coll_datatype_t t) { return t == COLL_FLOAT || t == COLL_DOUBLE; }
static int is_signed_type(coll_datatype_t t) {
  return t == COLL_INT8 || t == COLL_INT16 || t == COLL_INT32 || t == COLL_INT64;
}
static unsigned width_bits(coll_datatype_t t) { return (unsigned)coll_datatype_size(t) * 8u; }
static uint64_t width_mask(coll_datatype_t t) {
  return width_bits(t) == 64 ? ~(uint64_t)0 : (((uint64_t)1 << width_bits(t)) - 1);
}

/* Integer elements are handled as bit patterns in the low bits of a uint64_t. */
static void store_bits(void *buf, size_t i, coll_datatype_t t, uint64_t bits) {
  unsigned char *p = (unsigned char *)buf + i * coll_datatype_size(t);
  switch (coll_datatype_size(t)) {
    case 1: {
      uint8_t v = (uint8_t)bits;
      memcpy(p, &v, 1);
      break;
    }
    case 2: {
      uint16_t v = (uint16_t)bits;
      memcpy(p, &v, 2);
      break;
    }
    case 4: {
      uint32_t v = (uint32_t)bits;
      memcpy(p, &v, 4);
      break;
    }
    default:
      memcpy(p, &bits, 8);
      break;
  }
}
static int64_t as_signed(uint64_t bits, coll_datatype_t t) {
  const unsigned w = width_bits(t);
  if (w < 64 && (bits >> (w - 1)) & 1u) return -(int64_t)(((~bits) & width_mask(t)) + 1);
  return (int64_t)bits; /* for w == 64: two's complement, as gcc and clang define it */
}

/* Floating-point inputs: small integers (sum), +-1/2 (prod), quarters (min/max). */
static double float_input(coll_op_t op, uint64_t r) {
  static const double factors[4] = {-2.0, -1.0, 1.0, 2.0};
  if (op == COLL_SUM) return (double)((int)(r % 33u) - 16);
  if (op == COLL_PROD) return factors[r % 4u];
  return (double)((int)(r % 2001u) - 1000) / 4.0;
}
static uint64_t int_input(coll_op_t op, uint64_t r) {
  if (op == COLL_PROD) return r | 1u;
  if (op == COLL_BAND) return r | mix(r, 0, 0, 0);
  if (op == COLL_BOR) return r & mix(r, 0, 0, 0);
  return r;
}

static void store_input(void *buf, size_t i, coll_datatype_t t, coll_op_t op, int step, int rank) {
  const uint64_t r = mix((uint64_t)step, (uint64_t)rank + 1u, (uint64_t)i, 77u);
  if (t == COLL_FLOAT) {
    float v = (float)float_input(op, r);
    memcpy((char *)buf + i * sizeof v, &v, sizeof v);
  } else if (t == COLL_DOUBLE) {
    double v = float_input(op, r);
    memcpy((char *)buf + i * sizeof v, &v, sizeof v);
  } else {
    store_bits(buf, i, t, int_input(op, r));
  }
}

static double reduce_double(coll_op_t op, double a, double b) {
  switch (op) {
    case COLL_SUM:
      return a + b;
    case COLL_PROD:
      return a * b;
    case COLL_MIN:
      return b < a ? b : a;
    default:
      return b > a ? b : a;
  }
}
static uint64_t reduce_bits(coll_op_t op, coll_datatype_t t, uint64_t a, uint64_t b) {
  switch (op) {
    case COLL_SUM:
      return (a + b) & width_mask(t);
    case COLL_PROD:
      return (a * b) & width_mask(t);
    case COLL_BAND:
      return a & b;
    case COLL_BOR:
      return a | b;
    case COLL_BXOR:
      return a ^ b;
    case COLL_MIN:
      if (is_signed_type(t)) return as_signed(b, t) < as_signed(a, t) ? b : a;
      return b < a ? b : a;
    default:
      if (is_signed_type(t)) return as_signed(b, t) > as_signed(a, t) ? b : a;
      return b > a ? b : a;
  }
}

/* The expected allreduce result at element i, written into expected[i]. */
static void store_expected(void *expected, size_t i, coll_datatype_t t, coll_op_t op, int step,
                           int ranks) {
  int r;
  if (is_float_type(t)) {
    double acc = 0.0;
    for (r = 0; r < ranks; ++r) {
      const double v = float_input(op, mix((uint64_t)step, (uint64_t)r + 1u, (uint64_t)i, 77u));
      acc = r == 0 ? v : reduce_double(op, acc, v);
    }
    if (t == COLL_FLOAT) {
      float f = (float)acc;
      memcpy((char *)expected + i * sizeof f, &f, sizeof f);
    } else {
      memcpy((char *)expected + i * sizeof acc, &acc, sizeof acc);
    }
  } else {
    uint64_t acc = 0;
    for (r = 0; r < ranks; ++r) {
      const uint64_t v =
          int_input(op, mix((uint64_t)step, (uint64_t)r + 1u, (uint64_t)i, 77u)) & width_mask(t);
      acc = r == 0 ? v : reduce_bits(op, t, acc, v);
    }
    store_bits(expected, i, t, acc);
  }
}

int main(int argc, char **argv) {
  int rank = -1, ranks = 0, step, status, errors = 0, allreduces = 0, bcasts = 0;
  size_t total_elements = 0;
  coll_comm_t world;
  unsigned char *send, *recv, *expected;
  const size_t max_bytes = (size_t)MAX_COUNT * 8u;

  status = coll_init(&argc, &argv);
  if (status != COLL_SUCCESS) {
    fprintf(stderr, "c_random: coll_init: %s: %s\n", coll_strerror(status),
            coll_comm_last_error(NULL));
    return 1;
  }
  world = coll_comm_world();
  coll_comm_rank(world, &rank);
  coll_comm_size(world, &ranks);
  send = (unsigned char *)malloc(max_bytes);
  recv = (unsigned char *)malloc(max_bytes);
  expected = (unsigned char *)malloc(max_bytes);
  if (send == NULL || recv == NULL || expected == NULL) {
    fprintf(stderr, "c_random: out of memory\n");
    return 1;
  }

  for (step = 0; step < STEPS; ++step) {
    const coll_datatype_t type = (coll_datatype_t)(next_random() % COLL_DATATYPE_COUNT);
    const size_t count = (size_t)(next_random() % (MAX_COUNT + 1u));
    const size_t bytes = count * coll_datatype_size(type);
    const int do_bcast = (int)(next_random() % 3u == 0u);
    size_t i, bad = 0, first_bad = 0;

    if (do_bcast) {
      const int root = (int)(next_random() % (uint64_t)ranks);
      /* The root's data is the input of (step, root); the others start from their own. */
      for (i = 0; i < count; ++i) {
        store_input(recv, i, type, COLL_BXOR, step, rank);
        store_input(expected, i, type, COLL_BXOR, step, root);
      }
      status = coll_bcast(recv, count, type, root, world);
      ++bcasts;
      if (status != COLL_SUCCESS) {
        fprintf(stderr, "c_random rank %d step %d: bcast of %zu from %d failed: %s: %s\n", rank,
                step, count, root, coll_strerror(status), coll_comm_last_error(world));
        ++errors;
        break; /* the communicator may be broken: no more collectives */
      }
      if (bytes != 0 && memcmp(recv, expected, bytes) != 0) {
        fprintf(
            stderr,
            "c_random rank %d step %d: bcast of %zu %s-sized elements from root %d: wrong data\n",
            rank, step, count, is_float_type(type) ? "float" : "int", root);
        ++errors;
      }
    } else {
      coll_op_t op;
      int in_place;
      do {
        op = (coll_op_t)(next_random() % COLL_OP_COUNT);
      } while (is_float_type(type) && (op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR));
      in_place = (int)(next_random() % 2u);
      for (i = 0; i < count; ++i) {
        store_input(in_place ? recv : send, i, type, op, step, rank);
        store_expected(expected, i, type, op, step, ranks);
      }
      if (!in_place && bytes != 0) memset(recv, 0xEE, bytes);
      status = coll_allreduce(in_place ? COLL_IN_PLACE : send, recv, count, type, op, world);
      ++allreduces;
      if (status != COLL_SUCCESS) {
        fprintf(stderr,
                "c_random rank %d step %d: allreduce of %zu (type %d op %d) failed: %s: %s\n", rank,
                step, count, (int)type, (int)op, coll_strerror(status),
                coll_comm_last_error(world));
        ++errors;
        break;
      }
      for (i = 0; i < count; ++i) {
        const size_t size = coll_datatype_size(type);
        if (memcmp(recv + i * size, expected + i * size, size) != 0 && bad++ == 0) first_bad = i;
      }
      if (bad != 0) {
        fprintf(stderr,
                "c_random rank %d step %d: allreduce of %zu (type %d op %d%s): %zu wrong elements, "
                "first at %zu\n",
                rank, step, count, (int)type, (int)op, in_place ? " in place" : "", bad, first_bad);
        ++errors;
      }
      if (!in_place) { /* the send buffer is the caller's: untouched */
        for (i = 0; i < count; ++i) store_input(expected, i, type, op, step, rank);
        if (bytes != 0 && memcmp(send, expected, bytes) != 0) {
          fprintf(stderr, "c_random rank %d step %d: sendbuf modified\n", rank, step);
          ++errors;
        }
      }
    }
    total_elements += count;
  }

  if (rank == 0 || errors != 0) {
    printf("c_random rank %d of %d: %d allreduces, %d bcasts, %zu elements, %d errors\n", rank,
           ranks, allreduces, bcasts, total_elements, errors);
  }
  free(send);
  free(recv);
  free(expected);
  status = coll_finalize();
  if (status != COLL_SUCCESS) {
    fprintf(stderr, "c_random rank %d: coll_finalize: %s\n", rank, coll_strerror(status));
    ++errors;
  }
  return errors == 0 ? 0 : 1;
}
