/* A user's C99 program: only <coll/coll.h>, built with
 * `cc c_random.c $(pkg-config --cflags --libs libcoll)` (c_program_test.sh),
 * and by meson for the runs at other rank counts, over tcp and under
 * mpirun and srun (tests/mp, tests/ompi, tests/slurm).
 *
 * Runs every collective of coll.h in each of its three forms (blocking;
 * coll_iX + coll_wait; coll_X_init + coll_start + coll_wait, started
 * several times with new inputs), over a seeded random sequence of
 * datatypes, operators, sizes (0 and 1 often), roots, v-counts and gapped
 * displacements, in place (where MPI allows COLL_IN_PLACE) or not. Every
 * rank draws the same sequence, and every input element is a function of
 * (seed, step, repetition, rank, element key), so each rank computes its
 * expected result alone and compares it bit for bit, gaps in the receive
 * buffer included. Inputs keep floating-point results exact in any order
 * (small integers, +-1/+-2 products, quarters), in bfloat16's 8 bits too;
 * integer SUM/PROD wrap, computed on unsigned 64-bit values and truncated
 * to the type's width. Each reducing collective runs a bfloat16 SUM and a
 * float16 MAX in every form.
 *
 *   c_random                  the sequence on the world
 *   c_random MAX_CONNECTIONS  first an allreduce on the world (the tcp
 *                             suite forces the ring: COLL_ALLREDUCE_ALGO),
 *                             after which the process must hold at most
 *                             MAX_CONNECTIONS transport connections
 *                             (coll_comm_resource_stats: tcp connects on
 *                             first use, a ring to 2 neighbours); then the
 *                             sequence on the world and on a split (even
 *                             and odd ranks) */
#include <coll/coll.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROUNDS 3        /* each collective x form runs this many times */
#define REPETITIONS 3   /* starts of each persistent request */
#define MAX_BLOCK 1000u /* elements a rank sends to or gets from one rank */
#define KEY_STRIDE (MAX_BLOCK + 1u)
#define UNWRITTEN 0xEE /* the byte receive buffers start with */

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
/* 0 and 1 an eighth of the time each, else up to max. */
static size_t random_count(size_t max) {
  const uint64_t r = next_random();
  if (r % 8u < 2u) return (size_t)(r % 8u);
  return (size_t)((r >> 3) % (max + 1u));
}

enum { BLOCKING, NONBLOCKING, PERSISTENT, FORM_COUNT };
static const char *const form_names[FORM_COUNT] = {"blocking", "nonblocking", "persistent"};

enum {
  ALLREDUCE,
  BCAST,
  BARRIER,
  REDUCE,
  ALLGATHER,
  ALLGATHERV,
  REDUCE_SCATTER_BLOCK,
  REDUCE_SCATTER,
  GATHER,
  GATHERV,
  SCATTER,
  SCATTERV,
  ALLTOALL,
  ALLTOALLV,
  SCAN,
  EXSCAN,
  COLLECTIVE_COUNT
};
static const char *const collective_names[COLLECTIVE_COUNT] = {"allreduce",
                                                               "bcast",
                                                               "barrier",
                                                               "reduce",
                                                               "allgather",
                                                               "allgatherv",
                                                               "reduce_scatter_block",
                                                               "reduce_scatter",
                                                               "gather",
                                                               "gatherv",
                                                               "scatter",
                                                               "scatterv",
                                                               "alltoall",
                                                               "alltoallv",
                                                               "scan",
                                                               "exscan"};

static int reduces(int collective) {
  return collective == ALLREDUCE || collective == REDUCE || collective == REDUCE_SCATTER_BLOCK ||
         collective == REDUCE_SCATTER || collective == SCAN || collective == EXSCAN;
}
/* Whether MPI allows COLL_IN_PLACE (at the root only, for the rooted ones). */
static int has_in_place(int collective) { return collective != BCAST && collective != BARRIER; }

static int is_float_type(coll_datatype_t t) {
  return t == COLL_FLOAT || t == COLL_DOUBLE || t == COLL_FLOAT16 || t == COLL_BFLOAT16;
}
static int is_bitwise(coll_op_t op) { return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR; }
static int is_signed_type(coll_datatype_t t) {
  return t == COLL_INT8 || t == COLL_INT16 || t == COLL_INT32 || t == COLL_INT64;
}
static unsigned width_bits(coll_datatype_t t) { return (unsigned)coll_datatype_size(t) * 8u; }
static uint64_t width_mask(coll_datatype_t t) {
  return width_bits(t) == 64 ? ~(uint64_t)0 : (((uint64_t)1 << width_bits(t)) - 1);
}

/* Elements are stored through memcpy: buffers hold any type at any offset. */
static void store_bytes(void *buf, size_t pos, size_t size, const void *value) {
  memcpy((unsigned char *)buf + pos * size, value, size);
}
/* Integer elements are handled as bit patterns in the low bits of a uint64_t. */
static void store_bits(void *buf, size_t pos, coll_datatype_t t, uint64_t bits) {
  const uint8_t v8 = (uint8_t)bits;
  const uint16_t v16 = (uint16_t)bits;
  const uint32_t v32 = (uint32_t)bits;
  switch (coll_datatype_size(t)) {
    case 1:
      store_bytes(buf, pos, 1, &v8);
      break;
    case 2:
      store_bytes(buf, pos, 2, &v16);
      break;
    case 4:
      store_bytes(buf, pos, 4, &v32);
      break;
    default:
      store_bytes(buf, pos, 8, &bits);
      break;
  }
}
static int64_t as_signed(uint64_t bits, coll_datatype_t t) {
  const unsigned w = width_bits(t);
  if (w < 64 && (bits >> (w - 1)) & 1u) return -(int64_t)(((~bits) & width_mask(t)) + 1);
  return (int64_t)bits; /* for w == 64: two's complement, as gcc and clang define it */
}

/* The 16-bit encodings of the values used here: zero or normal, with at
 * most 8 significant bits, so both are exact (no rounding to write). */
static uint32_t float_bits(double v) {
  const float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}
static uint16_t bfloat16_bits(double v) { return (uint16_t)(float_bits(v) >> 16); }
static uint16_t float16_bits(double v) {
  const uint32_t u = float_bits(v), sign = (u >> 16) & 0x8000u, magnitude = u & 0x7fffffffu;
  if (magnitude == 0) return (uint16_t)sign;
  return (uint16_t)(sign | (((magnitude >> 23) - 127u + 15u) << 10) | ((magnitude >> 13) & 0x3ffu));
}
static void store_float(void *buf, size_t pos, coll_datatype_t t, double v) {
  const float f = (float)v;
  const uint16_t half = float16_bits(v), bhalf = bfloat16_bits(v);
  switch (t) {
    case COLL_FLOAT:
      store_bytes(buf, pos, sizeof f, &f);
      break;
    case COLL_FLOAT16:
      store_bytes(buf, pos, sizeof half, &half);
      break;
    case COLL_BFLOAT16:
      store_bytes(buf, pos, sizeof bhalf, &bhalf);
      break;
    default:
      store_bytes(buf, pos, sizeof v, &v);
      break;
  }
}

/* Floating-point inputs: small integers (sum: |sum| <= 16 * ranks), +-1/2
 * (prod: powers of two), quarters (min, max, and data that is only moved;
 * for the 16-bit types |x| < 32, at most 7 significant bits). */
static double float_input(coll_datatype_t t, coll_op_t op, uint64_t r) {
  static const double factors[4] = {-2.0, -1.0, 1.0, 2.0};
  if (op == COLL_SUM) return (double)((int)(r % 33u) - 16);
  if (op == COLL_PROD) return factors[r % 4u];
  if (coll_datatype_size(t) == 2) return (double)((int)(r % 255u) - 127) / 4.0;
  return (double)((int)(r % 2001u) - 1000) / 4.0;
}
static uint64_t int_input(coll_op_t op, uint64_t r) {
  if (op == COLL_PROD) return r | 1u;
  if (op == COLL_BAND) return r | mix(r, 0, 0, 0);
  if (op == COLL_BOR) return r & mix(r, 0, 0, 0);
  return r;
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

/* One step: a collective, its form and arguments, and this rank's buffers. */
struct step_case {
  int collective, form, root, in_place, rank, ranks;
  coll_datatype_t type;
  coll_op_t op;   /* for the collectives that only move data: COLL_BXOR's inputs */
  uint64_t key;   /* of the inputs: (step, repetition) */
  size_t count;   /* per block, for the collectives with one count */
  size_t *counts; /* per rank (v-collectives, reduce_scatter) */
  size_t *displs; /* per rank, with gaps */
  size_t *matrix; /* alltoallv: matrix[s * ranks + d] elements from s to d */
  size_t *sdispls, *rdispls, *scounts, *rcounts; /* alltoallv, this rank's */
  unsigned char *send, *recv, *expected;
  size_t send_count, recv_count, check_count; /* elements; check_count: compared */
};

static uint64_t input_draw(const struct step_case *c, int rank, size_t key) {
  return mix(c->key, (uint64_t)rank + 1u, (uint64_t)key, 77u);
}
/* buf[pos + j] = the input of `rank` with element key key + j, j < n. */
static void put_inputs(void *buf, size_t pos, size_t n, const struct step_case *c, int rank,
                       size_t key) {
  size_t j;
  for (j = 0; j < n; ++j) {
    const uint64_t r = input_draw(c, rank, key + j);
    if (is_float_type(c->type))
      store_float(buf, pos + j, c->type, float_input(c->type, c->op, r));
    else
      store_bits(buf, pos + j, c->type, int_input(c->op, r));
  }
}
/* buf[pos + j] = the reduction over ranks first..last of those inputs. */
static void put_reduced(void *buf, size_t pos, size_t n, const struct step_case *c, int first,
                        int last, size_t key) {
  size_t j;
  int r;
  for (j = 0; j < n; ++j) {
    if (is_float_type(c->type)) {
      double acc = 0.0;
      for (r = first; r <= last; ++r) {
        const double v = float_input(c->type, c->op, input_draw(c, r, key + j));
        acc = r == first ? v : reduce_double(c->op, acc, v);
      }
      store_float(buf, pos + j, c->type, acc);
    } else {
      uint64_t acc = 0;
      for (r = first; r <= last; ++r) {
        const uint64_t v = int_input(c->op, input_draw(c, r, key + j)) & width_mask(c->type);
        acc = r == first ? v : reduce_bits(c->op, c->type, acc, v);
      }
      store_bits(buf, pos + j, c->type, acc);
    }
  }
}
/* The same in recv and expected: the receive buffer's contents before the
 * call that the call must keep (in-place inputs a result does not replace,
 * gaps, exscan's rank 0). */
static void put_both(struct step_case *c, size_t pos, size_t n, int rank, size_t key) {
  put_inputs(c->recv, pos, n, c, rank, key);
  put_inputs(c->expected, pos, n, c, rank, key);
}

/* Displacements in rank order with gaps of 0 to 3 elements; the extent. */
static size_t gapped_displs(const size_t *counts, size_t *displs, int ranks) {
  size_t end = 0;
  int r;
  for (r = 0; r < ranks; ++r) {
    displs[r] = end + (size_t)(next_random() % 4u);
    end = displs[r] + counts[r];
  }
  return end;
}

/* Draws the step's arguments and sizes this rank's buffers. */
static void draw_case(struct step_case *c, int step) {
  const int ranks = c->ranks, me = c->rank;
  const int round = step / (COLLECTIVE_COUNT * FORM_COUNT);
  size_t n = (size_t)ranks, total = 0, extent;
  int r, d;
  c->collective = step % COLLECTIVE_COUNT;
  c->form = (step / COLLECTIVE_COUNT) % FORM_COUNT;
  /* The datatypes and operators up to FLOAT16/BFLOAT16 and BXOR only, drawn
   * as before they had company (so the sequence stays the same): the
   * logical ops and the pairs' MAXLOC/MINLOC have tests of their own
   * (tests/mp/ops_test.cpp). */
  c->type = (coll_datatype_t)(next_random() % (COLL_BFLOAT16 + 1));
  if (reduces(c->collective)) {
    do {
      c->op = (coll_op_t)(next_random() % (COLL_BXOR + 1));
    } while (is_float_type(c->type) && is_bitwise(c->op));
    if (round == 0) {
      c->type = COLL_BFLOAT16;
      c->op = COLL_SUM;
    } else if (round == 1) {
      c->type = COLL_FLOAT16;
      c->op = COLL_MAX;
    }
  } else {
    c->op = COLL_BXOR;
  }
  c->root = (int)(next_random() % (uint64_t)ranks);
  c->in_place = has_in_place(c->collective) && next_random() % 2u == 0u;
  c->count = random_count(MAX_BLOCK);
  for (r = 0; r < ranks; ++r) {
    c->counts[r] = random_count(MAX_BLOCK);
    total += c->counts[r];
  }
  extent = gapped_displs(c->counts, c->displs, ranks);
  /* alltoallv in place sends what it receives: a symmetric matrix. */
  for (r = 0; r < ranks; ++r)
    for (d = 0; d < ranks; ++d)
      c->matrix[r * ranks + d] =
          c->in_place && d < r ? c->matrix[d * ranks + r] : random_count(MAX_BLOCK / 4u);
  for (d = 0; d < ranks; ++d) {
    c->scounts[d] = c->matrix[me * ranks + d];
    c->rcounts[d] = c->matrix[d * ranks + me];
  }

  c->send_count = c->recv_count = c->check_count = 0;
  switch (c->collective) {
    case ALLREDUCE:
    case BCAST:
    case SCAN:
    case EXSCAN:
      c->send_count = c->recv_count = c->count;
      break;
    case REDUCE:
      c->send_count = c->count;
      c->recv_count = me == c->root ? c->count : 0;
      break;
    case ALLGATHER:
      c->send_count = c->count;
      c->recv_count = n * c->count;
      break;
    case ALLGATHERV:
      c->send_count = c->counts[me];
      c->recv_count = extent;
      break;
    case REDUCE_SCATTER_BLOCK:
      c->send_count = n * c->count;
      c->recv_count = c->in_place ? n * c->count : c->count;
      break;
    case REDUCE_SCATTER:
      c->send_count = total;
      c->recv_count = c->in_place ? total : c->counts[me];
      break;
    case GATHER:
      c->send_count = c->count;
      c->recv_count = me == c->root ? n * c->count : 0;
      break;
    case GATHERV:
      c->send_count = c->counts[me];
      c->recv_count = me == c->root ? extent : 0;
      break;
    case SCATTER:
      c->send_count = me == c->root ? n * c->count : 0;
      c->recv_count = c->count;
      break;
    case SCATTERV:
      c->send_count = me == c->root ? extent : 0;
      c->recv_count = c->counts[me];
      break;
    case ALLTOALL:
      c->send_count = c->recv_count = n * c->count;
      break;
    case ALLTOALLV:
      c->send_count = gapped_displs(c->scounts, c->sdispls, ranks);
      c->recv_count = gapped_displs(c->rcounts, c->rdispls, ranks);
      break;
    default: /* BARRIER */
      break;
  }
}

/* Fills send and recv with the inputs of c->key and expected with what
 * recv must hold afterwards; sets check_count. */
static void prepare(struct step_case *c) {
  const int me = c->rank, ranks = c->ranks, root_here = me == c->root;
  const size_t size = coll_datatype_size(c->type), count = c->count;
  size_t offset = 0;
  int r;
  memset(c->recv, UNWRITTEN, c->recv_count * size);
  memset(c->expected, UNWRITTEN, c->recv_count * size);
  c->check_count = c->recv_count;
  switch (c->collective) {
    case ALLREDUCE:
    case SCAN:
    case EXSCAN:
      put_inputs(c->send, 0, count, c, me, 0);
      if (c->in_place) put_both(c, 0, count, me, 0);
      if (c->collective != EXSCAN || me > 0)
        put_reduced(c->expected, 0, count, c, 0,
                    c->collective == ALLREDUCE ? ranks - 1
                    : c->collective == SCAN    ? me
                                               : me - 1,
                    0);
      break;
    case BCAST: /* every rank starts from its own data */
      put_inputs(c->recv, 0, count, c, me, 0);
      put_inputs(c->expected, 0, count, c, c->root, 0);
      break;
    case REDUCE:
      put_inputs(c->send, 0, count, c, me, 0);
      if (root_here && c->in_place) put_inputs(c->recv, 0, count, c, me, 0);
      if (root_here) put_reduced(c->expected, 0, count, c, 0, ranks - 1, 0);
      break;
    case ALLGATHER:
    case GATHER:
      put_inputs(c->send, 0, count, c, me, 0);
      if (c->collective == ALLGATHER || root_here) {
        if (c->in_place) put_inputs(c->recv, (size_t)me * count, count, c, me, 0);
        for (r = 0; r < ranks; ++r) put_inputs(c->expected, (size_t)r * count, count, c, r, 0);
      }
      break;
    case ALLGATHERV:
    case GATHERV:
      put_inputs(c->send, 0, c->counts[me], c, me, 0);
      if (c->collective == ALLGATHERV || root_here) {
        if (c->in_place) put_inputs(c->recv, c->displs[me], c->counts[me], c, me, 0);
        for (r = 0; r < ranks; ++r) put_inputs(c->expected, c->displs[r], c->counts[r], c, r, 0);
      }
      break;
    case REDUCE_SCATTER_BLOCK:
    case REDUCE_SCATTER:
      for (r = 0; r < ranks; ++r)
        if (r < me) offset += c->collective == REDUCE_SCATTER ? c->counts[r] : count;
      put_inputs(c->send, 0, c->send_count, c, me, 0);
      if (c->in_place) put_inputs(c->recv, 0, c->send_count, c, me, 0);
      /* Only this rank's block is the result; the rest of an in-place
       * buffer is not specified. */
      c->check_count = c->collective == REDUCE_SCATTER ? c->counts[me] : count;
      put_reduced(c->expected, 0, c->check_count, c, 0, ranks - 1, offset);
      break;
    case SCATTER:
      if (root_here) put_inputs(c->send, 0, (size_t)ranks * count, c, me, 0);
      if (root_here && c->in_place) c->check_count = 0; /* recv is not passed */
      put_inputs(c->expected, 0, count, c, c->root, (size_t)me * count);
      break;
    case SCATTERV:
      if (root_here)
        for (r = 0; r < ranks; ++r)
          put_inputs(c->send, c->displs[r], c->counts[r], c, me, c->displs[r]);
      if (root_here && c->in_place) c->check_count = 0;
      put_inputs(c->expected, 0, c->counts[me], c, c->root, c->displs[me]);
      break;
    case ALLTOALL:
      put_inputs(c->send, 0, (size_t)ranks * count, c, me, 0);
      if (c->in_place) put_inputs(c->recv, 0, (size_t)ranks * count, c, me, 0);
      for (r = 0; r < ranks; ++r)
        put_inputs(c->expected, (size_t)r * count, count, c, r, (size_t)me * count);
      break;
    case ALLTOALLV:
      for (r = 0; r < ranks; ++r) {
        put_inputs(c->send, c->sdispls[r], c->scounts[r], c, me, (size_t)r * KEY_STRIDE);
        /* In place, the data for r is where r's data to this rank lands. */
        if (c->in_place)
          put_inputs(c->recv, c->rdispls[r], c->rcounts[r], c, me, (size_t)r * KEY_STRIDE);
        put_inputs(c->expected, c->rdispls[r], c->rcounts[r], c, r, (size_t)me * KEY_STRIDE);
      }
      break;
    default:
      break;
  }
}

/* Calls coll_X, coll_iX or coll_X_init: the same arguments, then the request. */
#define CALL(form, request, name, ...)                          \
  ((form) == BLOCKING      ? coll_##name(__VA_ARGS__)           \
   : (form) == NONBLOCKING ? coll_i##name(__VA_ARGS__, request) \
                           : coll_##name##_init(__VA_ARGS__, request))

/* Arguments only the root uses are NULL elsewhere (coll.h allows it). */
static int call(const struct step_case *c, coll_request_t *request, coll_comm_t comm) {
  const int f = c->form, root = c->root, root_here = c->rank == root;
  const coll_datatype_t t = c->type;
  const coll_op_t op = c->op;
  const void *send = c->in_place ? COLL_IN_PLACE : c->send;
  const void *root_send = c->in_place && root_here ? COLL_IN_PLACE : c->send;
  void *root_recv = root_here ? c->recv : NULL;
  const size_t *root_counts = root_here ? c->counts : NULL;
  const size_t *root_displs = root_here ? c->displs : NULL;
  void *scatter_recv = c->in_place && root_here ? COLL_IN_PLACE : c->recv;
  const size_t my_count = c->counts[c->rank];
  switch (c->collective) {
    case ALLREDUCE:
      return CALL(f, request, allreduce, send, c->recv, c->count, t, op, comm);
    case BCAST:
      return CALL(f, request, bcast, c->recv, c->count, t, root, comm);
    case BARRIER:
      return CALL(f, request, barrier, comm);
    case REDUCE:
      return CALL(f, request, reduce, root_send, root_recv, c->count, t, op, root, comm);
    case ALLGATHER:
      return CALL(f, request, allgather, send, c->recv, c->count, t, comm);
    case ALLGATHERV:
      return CALL(f, request, allgatherv, send, my_count, c->recv, c->counts, c->displs, t, comm);
    case REDUCE_SCATTER_BLOCK:
      return CALL(f, request, reduce_scatter_block, send, c->recv, c->count, t, op, comm);
    case REDUCE_SCATTER:
      return CALL(f, request, reduce_scatter, send, c->recv, c->counts, t, op, comm);
    case GATHER:
      return CALL(f, request, gather, root_send, root_recv, c->count, t, root, comm);
    case GATHERV:
      return CALL(f, request, gatherv, root_send, my_count, root_recv, root_counts, root_displs, t,
                  root, comm);
    case SCATTER:
      return CALL(f, request, scatter, root_here ? c->send : NULL, scatter_recv, c->count, t, root,
                  comm);
    case SCATTERV:
      return CALL(f, request, scatterv, root_here ? c->send : NULL, root_counts, root_displs,
                  scatter_recv, my_count, t, root, comm);
    case ALLTOALL:
      return CALL(f, request, alltoall, send, c->recv, c->count, t, comm);
    case ALLTOALLV:
      return CALL(f, request, alltoallv, send, c->scounts, c->sdispls, c->recv, c->rcounts,
                  c->rdispls, t, comm);
    case SCAN:
      return CALL(f, request, scan, send, c->recv, c->count, t, op, comm);
    default:
      return CALL(f, request, exscan, send, c->recv, c->count, t, op, comm);
  }
}

static void describe(const struct step_case *c, int step, char *out, size_t size) {
  snprintf(out, size, "rank %d step %d: %s %s, type %d op %d, count %zu, root %d%s", c->rank, step,
           form_names[c->form], collective_names[c->collective], (int)c->type, (int)c->op, c->count,
           c->root, c->in_place ? ", in place" : "");
}

/* Runs step `step`: returns 0, 1 (wrong results) or -1 (a call failed: the
 * communicator may be unusable). */
static int run_step(struct step_case *c, int step, coll_comm_t comm, size_t *elements) {
  const size_t size = coll_datatype_size(c->type);
  const int repetitions = c->form == PERSISTENT ? REPETITIONS : 1;
  coll_request_t request = COLL_REQUEST_NULL;
  int rep, status = COLL_SUCCESS, wrong = 0;
  char what[200];
  describe(c, step, what, sizeof what);
  for (rep = 0; rep < repetitions; ++rep) {
    size_t i;
    c->key = (uint64_t)step * REPETITIONS + (uint64_t)rep;
    prepare(c);
    if (rep == 0) status = call(c, &request, comm);
    if (status == COLL_SUCCESS && c->form == PERSISTENT) status = coll_start(request);
    if (status == COLL_SUCCESS && c->form != BLOCKING) status = coll_wait(&request);
    if (status != COLL_SUCCESS) {
      fprintf(stderr, "c_random %s, start %d: %s: %s\n", what, rep, coll_strerror(status),
              coll_comm_last_error(comm));
      return -1;
    }
    for (i = 0; i < c->check_count; ++i) {
      if (memcmp(c->recv + i * size, c->expected + i * size, size) != 0) {
        fprintf(stderr, "c_random %s, start %d: element %zu of %zu wrong\n", what, rep, i,
                c->check_count);
        wrong = 1;
        break;
      }
    }
    *elements += c->recv_count;
  }
  if (c->form == PERSISTENT && coll_request_free(&request) != COLL_SUCCESS) return -1;
  return wrong;
}

static void *allocate(size_t bytes) {
  void *p = malloc(bytes == 0 ? 1 : bytes);
  if (p == NULL) {
    fprintf(stderr, "c_random: out of memory\n");
    exit(1);
  }
  return p;
}

/* The whole sequence on comm, whose rank and size c holds: how many steps
 * failed. */
static int run_sequence(struct step_case *c, coll_comm_t comm, size_t *elements, int *steps) {
  int step, errors = 0;
  for (step = 0; step < ROUNDS * COLLECTIVE_COUNT * FORM_COUNT; ++step) {
    int result;
    size_t size;
    draw_case(c, step);
    size = coll_datatype_size(c->type);
    c->send = (unsigned char *)allocate(c->send_count * size);
    c->recv = (unsigned char *)allocate(c->recv_count * size);
    c->expected = (unsigned char *)allocate(c->recv_count * size);
    result = run_step(c, step, comm, elements);
    free(c->send);
    free(c->recv);
    free(c->expected);
    ++*steps;
    if (result != 0) ++errors;
    if (result < 0) break; /* the communicator may be broken: no more collectives */
  }
  return errors;
}

int main(int argc, char **argv) {
  int rank = -1, ranks = 0, status, errors = 0, steps = 0;
  size_t elements = 0;
  coll_comm_t world, half = COLL_COMM_NULL;
  struct step_case c;

  status = coll_init(&argc, &argv);
  if (status != COLL_SUCCESS) {
    fprintf(stderr, "c_random: coll_init: %s: %s\n", coll_strerror(status),
            coll_comm_last_error(NULL));
    return 1;
  }
  world = coll_comm_world();
  coll_comm_rank(world, &rank);
  coll_comm_size(world, &ranks);
  memset(&c, 0, sizeof c);
  c.rank = rank;
  c.ranks = ranks;
  c.counts = (size_t *)allocate((size_t)ranks * sizeof(size_t));
  c.displs = (size_t *)allocate((size_t)ranks * sizeof(size_t));
  c.sdispls = (size_t *)allocate((size_t)ranks * sizeof(size_t));
  c.rdispls = (size_t *)allocate((size_t)ranks * sizeof(size_t));
  c.scounts = (size_t *)allocate((size_t)ranks * sizeof(size_t));
  c.rcounts = (size_t *)allocate((size_t)ranks * sizeof(size_t));
  c.matrix = (size_t *)allocate((size_t)ranks * (size_t)ranks * sizeof(size_t));

  if (argc > 1) {
    const unsigned max_connections = (unsigned)strtoul(argv[1], NULL, 10);
    int64_t x = rank, sum = 0;
    coll_resource_stats_t stats;
    int call, stats_status = COLL_SUCCESS;
    memset(&stats, 0, sizeof stats);
    /* Read after the first, before the second: no rank can be past the
     * second (its result needs this rank's input), so none is yet in a
     * later collective with other peers. */
    for (call = 0; call < 2; ++call) {
      status = coll_allreduce(&x, &sum, 1, COLL_INT64, COLL_SUM, world);
      if (status != COLL_SUCCESS || sum != (int64_t)ranks * (ranks - 1) / 2) {
        fprintf(stderr, "c_random rank %d: allreduce %d: %s, sum %lld\n", rank, call,
                coll_strerror(status), (long long)sum);
        ++errors;
      }
      if (call == 0) stats_status = coll_comm_resource_stats(world, &stats);
    }
    status = stats_status;
    if (status != COLL_SUCCESS || stats.connections > max_connections) {
      fprintf(stderr,
              "c_random rank %d: after one allreduce (%s) the process holds %u connections, "
              "wants at most %u (%s)\n",
              rank, coll_comm_last_algorithm(world, "allreduce"), stats.connections,
              max_connections, coll_strerror(status));
      ++errors;
    }
    status = coll_comm_split(world, rank % 2, rank, &half);
    if (status != COLL_SUCCESS) {
      fprintf(stderr, "c_random rank %d: split: %s\n", rank, coll_strerror(status));
      ++errors;
    }
  }
  errors += run_sequence(&c, world, &elements, &steps);
  if (half != COLL_COMM_NULL) {
    c.rank = rank / 2;
    c.ranks = (ranks - rank % 2 + 1) / 2;
    errors += run_sequence(&c, half, &elements, &steps);
    coll_comm_free(&half);
  }

  if (rank == 0 || errors != 0) {
    printf("c_random rank %d of %d: %d steps (every collective x form), %zu elements, %d errors\n",
           rank, ranks, steps, elements, errors);
  }
  free(c.counts);
  free(c.displs);
  free(c.sdispls);
  free(c.rdispls);
  free(c.scounts);
  free(c.rcounts);
  free(c.matrix);
  status = coll_finalize();
  if (status != COLL_SUCCESS) {
    fprintf(stderr, "c_random rank %d: coll_finalize: %s\n", rank, coll_strerror(status));
    ++errors;
  }
  return errors == 0 ? 0 : 1;
}
