/* The PMPI shim (libcoll_mpi.so) under a plain MPI program.
 *
 * Built against MPI only; run as `mpirun -x LD_PRELOAD=libcoll_mpi.so
 * pmpi_test [--threads]`. Every result is checked against closed-form values;
 * where the shim is loaded (coll_mpi_counts found with dlsym) every call is
 * also checked to have been served or passed to MPI as the shim's rules say,
 * and the same way on every rank. Without the shim the same program checks
 * plain MPI (the reference run).
 *
 * Covers: MPI_Allreduce / Iallreduce over every predefined type x operator
 * the shim maps, MPI_IN_PLACE, counts 0 .. 5000; MPI_Bcast / Ibcast from
 * every root, contiguous and strided datatypes; MPI_Barrier / Ibarrier;
 * MPI_COMM_SELF; dup / split / create / cart chains and frees; a congruent
 * communicator set up lazily; MPI_Comm_create_group of subsets (served);
 * an inter-communicator (passed to MPI);
 * user operators (served; more in pmpi_userops.c); MPI_LAND/LOR/LXOR and
 * MAXLOC/MINLOC on every pair type (served); a derived
 * datatype on some ranks with the type signature of a predefined one on
 * others (served on all, or passed to MPI on all); mixed arrays of served and
 * point-to-point requests in every wait and test function; MPI_Request_free;
 * progress across both engines (an MPI_Isend needed by a peer before a
 * served collective; a served request a peer waits for while this rank is in
 * MPI_Recv); MPI_ERRORS_RETURN on a failed served call (--errors); threads
 * (--threads: MPI_THREAD_MULTIPLE, one communicator per thread); Open
 * MPI's yield_when_idle as MPI_Init set it after all of that (the shim turns
 * it off around each opal_progress call of its waits, and back on).
 *
 * Prints "pmpi_test: all checks passed at np N" on rank 0. */
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll_mpi.h"
#include "pmpi_check.h"

static int rank, size, errors;
static coll_mpi_counts_fn counts_fn;
static coll_mpi_comm_served_fn served_fn;
static int shim_active;

static unsigned long long served(const char* fn) {
  unsigned long long s = 0, p = 0;
  if (counts_fn) counts_fn(fn, &s, &p);
  return s;
}

/* Whether the shim serves this collective here (COLL_MPI_COLLECTIVES). */
static int want(const char* knob) {
  if (!shim_active) return 0;
  const char* list = getenv("COLL_MPI_COLLECTIVES");
  if (!list || !*list || strcmp(list, "all") == 0) return 1;
  return strstr(list, knob) != NULL;
}

/* The calls of fn since before were served (1) or not (0) as expected, and
 * the same on every rank. */
static void expect_served(const char* fn, const char* knob, unsigned long long before,
                          unsigned long long calls, int should, MPI_Comm comm, int line) {
  const unsigned long long got = served(fn) - before;
  const unsigned long long want_n = (should && want(knob)) ? calls : 0;
  if (counts_fn)
    CHECK(got == want_n, "(from line %d) %s: %llu served, expected %llu", line, fn, got, want_n);
  long long mine = (long long)got, lo, hi;
  PMPI_Allreduce(&mine, &lo, 1, MPI_LONG_LONG, MPI_MIN, comm);
  PMPI_Allreduce(&mine, &hi, 1, MPI_LONG_LONG, MPI_MAX, comm);
  CHECK(lo == hi, "(from line %d) %s: ranks disagree on serving (%lld .. %lld)", line, fn, lo, hi);
}

/* ---- allreduce over every type x op ------------------------------------- */

enum { OP_SUM, OP_PROD, OP_MIN, OP_MAX, OP_BAND, OP_BOR, OP_BXOR, NOPS };
static const char* op_names[NOPS] = {"SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR"};
static MPI_Op mpi_op(int op) {
  MPI_Op ops[NOPS] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR};
  return ops[op];
}

/* Small values whose reductions fit every type (sums <= 70, products <= 16). */
static long long value(int op, int r, int i) {
  switch (op) {
    case OP_SUM: return (r + 1) * (i % 7 + 1) % 17;
    case OP_PROD: return 1 + (r + i) % 2;
    case OP_MIN:
    case OP_MAX: return (r * 3 + i) % 11;
    default: return 1LL << ((r + i) % 7);
  }
}

#define DEFINE_TYPE(NAME, T, IS_FLOAT)                                                   \
  static void fill_##NAME(void* buf, int n, int op, int r) {                             \
    T* p = (T*)buf;                                                                      \
    for (int i = 0; i < n; ++i) p[i] = (T)value(op, r, i);                               \
  }                                                                                      \
  static void expect_##NAME(void* buf, int n, int op, int np) {                          \
    T* p = (T*)buf;                                                                      \
    for (int i = 0; i < n; ++i) {                                                        \
      long long acc = value(op, 0, i);                                                   \
      for (int r = 1; r < np; ++r) {                                                     \
        long long v = value(op, r, i);                                                   \
        switch (op) {                                                                    \
          case OP_SUM: acc += v; break;                                                  \
          case OP_PROD: acc *= v; break;                                                 \
          case OP_MIN: acc = v < acc ? v : acc; break;                                   \
          case OP_MAX: acc = v > acc ? v : acc; break;                                   \
          case OP_BAND: acc &= v; break;                                                 \
          case OP_BOR: acc |= v; break;                                                  \
          default: acc ^= v; break;                                                      \
        }                                                                                \
      }                                                                                  \
      p[i] = (T)acc;                                                                     \
    }                                                                                    \
  }                                                                                      \
  static const int is_float_##NAME = IS_FLOAT;

DEFINE_TYPE(i8, int8_t, 0)
DEFINE_TYPE(u8, uint8_t, 0)
DEFINE_TYPE(i16, int16_t, 0)
DEFINE_TYPE(u16, uint16_t, 0)
DEFINE_TYPE(i32, int32_t, 0)
DEFINE_TYPE(u32, uint32_t, 0)
DEFINE_TYPE(i64, int64_t, 0)
DEFINE_TYPE(u64, uint64_t, 0)
DEFINE_TYPE(sc, signed char, 0)
DEFINE_TYPE(uc, unsigned char, 0)
DEFINE_TYPE(sh, short, 0)
DEFINE_TYPE(ush, unsigned short, 0)
DEFINE_TYPE(in, int, 0)
DEFINE_TYPE(un, unsigned, 0)
DEFINE_TYPE(lo, long, 0)
DEFINE_TYPE(ulo, unsigned long, 0)
DEFINE_TYPE(ll, long long, 0)
DEFINE_TYPE(ull, unsigned long long, 0)
DEFINE_TYPE(fl, float, 1)
DEFINE_TYPE(db, double, 1)
DEFINE_TYPE(by, unsigned char, 2) /* MPI_BYTE: bitwise only */

struct type_case {
  const char* name;
  MPI_Datatype type;
  size_t bytes;
  void (*fill)(void*, int, int, int);
  void (*expect)(void*, int, int, int);
  int is_float;
};

#define CASE(NAME, MPITYPE, T) {#MPITYPE, MPITYPE, sizeof(T), fill_##NAME, expect_##NAME, is_float_##NAME}

static void test_allreduce_types(void) {
  const struct type_case cases[] = {
      CASE(i8, MPI_INT8_T, int8_t),       CASE(u8, MPI_UINT8_T, uint8_t),
      CASE(i16, MPI_INT16_T, int16_t),    CASE(u16, MPI_UINT16_T, uint16_t),
      CASE(i32, MPI_INT32_T, int32_t),    CASE(u32, MPI_UINT32_T, uint32_t),
      CASE(i64, MPI_INT64_T, int64_t),    CASE(u64, MPI_UINT64_T, uint64_t),
      CASE(sc, MPI_SIGNED_CHAR, signed char), CASE(uc, MPI_UNSIGNED_CHAR, unsigned char),
      CASE(sh, MPI_SHORT, short),         CASE(ush, MPI_UNSIGNED_SHORT, unsigned short),
      CASE(in, MPI_INT, int),             CASE(un, MPI_UNSIGNED, unsigned),
      CASE(lo, MPI_LONG, long),           CASE(ulo, MPI_UNSIGNED_LONG, unsigned long),
      CASE(ll, MPI_LONG_LONG, long long), CASE(ull, MPI_UNSIGNED_LONG_LONG, unsigned long long),
      CASE(fl, MPI_FLOAT, float),         CASE(db, MPI_DOUBLE, double),
      CASE(by, MPI_BYTE, unsigned char),
  };
  const int counts[] = {0, 1, 33, 5000};
  const size_t max_bytes = 5000 * 8;
  char* send = malloc(max_bytes);
  char* recv = malloc(max_bytes);
  char* want_buf = malloc(max_bytes);
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; ++t) {
    const struct type_case* c = &cases[t];
    for (int op = 0; op < NOPS; ++op) {
      if (c->is_float == 1 && op >= OP_BAND) continue;  /* not defined in MPI */
      if (c->is_float == 2 && op < OP_BAND) continue;   /* MPI_BYTE: bitwise only */
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
        const int n = counts[k];
        for (int in_place = 0; in_place < 2; ++in_place) {
          for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
            const char* fn = nonblocking ? "MPI_Iallreduce" : "MPI_Allreduce";
            const unsigned long long before = served(fn);
            memset(recv, 0x5a, max_bytes);
            c->fill(in_place ? recv : send, n, op, rank);
            c->expect(want_buf, n, op, size);
            const void* s = in_place ? MPI_IN_PLACE : send;
            int rc;
            if (nonblocking) {
              MPI_Request r;
              rc = MPI_Iallreduce(s, recv, n, c->type, mpi_op(op), MPI_COMM_WORLD, &r);
              if (rc == MPI_SUCCESS) rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
              CHECK(r == MPI_REQUEST_NULL, "%s: request not null after wait", fn);
            } else {
              rc = MPI_Allreduce(s, recv, n, c->type, mpi_op(op), MPI_COMM_WORLD);
            }
            CHECK(rc == MPI_SUCCESS, "%s %s %s: rc %d", fn, c->name, op_names[op], rc);
            CHECK(memcmp(recv, want_buf, (size_t)n * c->bytes) == 0, "%s %s %s count %d%s: wrong result",
                  fn, c->name, op_names[op], n, in_place ? " in place" : "");
            if (!served_fn || !counts_fn) continue;
            const unsigned long long got = served(fn) - before;
            CHECK(got == (unsigned long long)want("allreduce"), "%s %s %s: served %llu", fn, c->name,
                  op_names[op], got);
          }
        }
      }
    }
  }
  free(send);
  free(recv);
  free(want_buf);
}

/* Complex SUM (served as pairs); MPI_LONG_DOUBLE (passed to MPI); the
 * logical operators on int and MPI_C_BOOL, MAXLOC / MINLOC on every pair
 * type (served, MPI's tie rule: the lower index wins). (A derived type of
 * pairs would go to MPI, which rejects MAXLOC on it: not tested.) */
static void test_allreduce_other(void) {
  double z[4] = {rank + 1.0, -(rank + 1.0), 2.0, 0.5}, zr[4];
  unsigned long long b = served("MPI_Allreduce");
  MPI_Allreduce(z, zr, 2, MPI_C_DOUBLE_COMPLEX, MPI_SUM, MPI_COMM_WORLD);
  const double s = size * (size + 1) / 2.0;
  CHECK(zr[0] == s && zr[1] == -s && zr[2] == 2.0 * size && zr[3] == 0.5 * size, "complex sum");
  expect_served("MPI_Allreduce", "allreduce", b, 1, 1, MPI_COMM_WORLD, __LINE__);

  long double ld = rank + 1, ldr = 0;
  b = served("MPI_Allreduce");
  MPI_Allreduce(&ld, &ldr, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  CHECK(ldr == s, "long double sum");
  expect_served("MPI_Allreduce", "allreduce", b, 1, 0, MPI_COMM_WORLD, __LINE__);

  b = served("MPI_Allreduce");
  int land[3] = {rank + 1, rank == 0, 2 * (rank % 2)}, landr[3] = {-1, -1, -1};
  MPI_Allreduce(land, landr, 3, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  CHECK(landr[0] == 1 && landr[1] == (size == 1) && landr[2] == 0, "MPI_LAND %d %d %d", landr[0],
        landr[1], landr[2]);
  MPI_Allreduce(land, landr, 3, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
  CHECK(landr[0] == 1 && landr[1] == 1 && landr[2] == (size > 1), "MPI_LOR");
  MPI_Allreduce(land, landr, 3, MPI_INT, MPI_LXOR, MPI_COMM_WORLD);
  CHECK(landr[0] == size % 2 && landr[1] == 1 && landr[2] == (size / 2) % 2, "MPI_LXOR");
  _Bool bl = rank != 1, blr = 0;
  MPI_Allreduce(&bl, &blr, 1, MPI_C_BOOL, MPI_LAND, MPI_COMM_WORLD);
  CHECK(blr == (size < 2), "MPI_LAND on MPI_C_BOOL");
  /* Values rank % 3: the maximum 2 first at rank 2, the minimum 0 at rank 0. */
  struct { int v, r; } in = {rank % 3, rank}, out;
  MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MAXLOC, MPI_COMM_WORLD);
  CHECK(out.v == (size > 2 ? 2 : size - 1) && out.r == (size > 2 ? 2 : size - 1), "MPI_MAXLOC");
  struct { double v; int r; } din = {-(double)(rank % 3), rank}, dout;
  MPI_Allreduce(&din, &dout, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
  CHECK(dout.v == -(double)(size > 2 ? 2 : size - 1) && dout.r == (size > 2 ? 2 : size - 1),
        "MPI_MINLOC on MPI_DOUBLE_INT: %g at %d", dout.v, dout.r);
  struct { float v; int r; } fin = {1.5f, rank}, fout;
  MPI_Allreduce(&fin, &fout, 1, MPI_FLOAT_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  CHECK(fout.v == 1.5f && fout.r == 0, "MPI_MAXLOC tie: the lower index");
  struct { long v; int r; } lin = {rank, rank}, lout;
  MPI_Allreduce(&lin, &lout, 1, MPI_LONG_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  CHECK(lout.v == size - 1 && lout.r == size - 1, "MPI_MAXLOC on MPI_LONG_INT");
  struct { short v; int r; } sin_ = {(short)(100 - rank), rank}, sout;
  MPI_Allreduce(&sin_, &sout, 1, MPI_SHORT_INT, MPI_MINLOC, MPI_COMM_WORLD);
  CHECK(sout.v == 100 - (size - 1) && sout.r == size - 1, "MPI_MINLOC on MPI_SHORT_INT");
  struct { long double v; int r; } ldin = {(long double)(rank % 2), rank}, ldout;
  MPI_Allreduce(&ldin, &ldout, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
  CHECK(ldout.v == (size > 1) && ldout.r == (size > 1), "MPI_MAXLOC on MPI_LONG_DOUBLE_INT");
  expect_served("MPI_Allreduce", "allreduce", b, 10, 1, MPI_COMM_WORLD, __LINE__);
}

/* A user operator (MPI_Op_create): served, by a libcoll operator that calls it. */
static void user_sum(void* in, void* inout, int* len, MPI_Datatype* t) {
  int bytes = 0; /* MPI_INT, or a contiguous type of ints */
  MPI_Type_size(*t, &bytes);
  const int n = *len * (bytes / (int)sizeof(int));
  for (int i = 0; i < n; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

static void test_user_op(void) {
  MPI_Op op;
  MPI_Op_create(user_sum, 1, &op);
  int v[3] = {rank, 2 * rank, 1}, r[3];
  const unsigned long long b = served("MPI_Allreduce"), bi = served("MPI_Iallreduce");
  MPI_Allreduce(v, r, 3, MPI_INT, op, MPI_COMM_WORLD);
  const int s = size * (size - 1) / 2;
  CHECK(r[0] == s && r[1] == 2 * s && r[2] == size, "user op result");
  MPI_Request req;
  MPI_Iallreduce(MPI_IN_PLACE, v, 3, MPI_INT, op, MPI_COMM_WORLD, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  CHECK(v[0] == s && v[1] == 2 * s && v[2] == size, "user op iallreduce in place");
  expect_served("MPI_Allreduce", "allreduce", b, 1, 1, MPI_COMM_WORLD, __LINE__);
  expect_served("MPI_Iallreduce", "allreduce", bi, 1, 1, MPI_COMM_WORLD, __LINE__);
  MPI_Op_free(&op);
}

/* ---- bcast ---------------------------------------------------------------- */

static void test_bcast(MPI_Comm comm) {
  int n, me;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  const int counts[] = {0, 1, 100, 70000};
  int* buf = malloc(70000 * sizeof(int));
  for (int root = 0; root < n; ++root) {
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
      for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
        const int c = counts[k];
        for (int i = 0; i < c; ++i) buf[i] = me == root ? root * 1000 + i : -1;
        const char* fn = nonblocking ? "MPI_Ibcast" : "MPI_Bcast";
        const unsigned long long b = served(fn);
        if (nonblocking) {
          MPI_Request r;
          MPI_Ibcast(buf, c, MPI_INT, root, comm, &r);
          MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else {
          MPI_Bcast(buf, c, MPI_INT, root, comm);
        }
        int bad = 0;
        for (int i = 0; i < c; ++i) bad += buf[i] != root * 1000 + i;
        CHECK(bad == 0, "%s root %d count %d: %d wrong", fn, root, c, bad);
        expect_served(fn, "bcast", b, 1, 1, comm, __LINE__);
      }
    }
  }
  /* Every datatype is bytes to a broadcast: MPI_CHAR, MPI_LONG_DOUBLE too. */
  char text[16] = "";
  if (me == 0) strcpy(text, "libcoll_mpi");
  long double ld = me == 0 ? 2.5L : 0;
  const unsigned long long b = served("MPI_Bcast");
  MPI_Bcast(text, 16, MPI_CHAR, 0, comm);
  MPI_Bcast(&ld, 1, MPI_LONG_DOUBLE, 0, comm);
  CHECK(strcmp(text, "libcoll_mpi") == 0 && ld == 2.5L, "bcast of char / long double");
  expect_served("MPI_Bcast", "bcast", b, 2, 1, comm, __LINE__);
  free(buf);
}

/* ---- the same type signature through different datatypes ----------------- */

static void test_mixed_datatypes(void) {
  MPI_Datatype contig, vec;
  MPI_Type_contiguous(8, MPI_INT, &contig);
  MPI_Type_commit(&contig);
  MPI_Type_vector(8, 1, 2, MPI_INT, &vec);
  MPI_Type_commit(&vec);
  int in[16], out[16], bad;
  unsigned long long b;
  MPI_Request r;

  /* Allreduce of 8 ints: MPI_INT x 8 on even ranks, one contiguous type of
   * 8 ints on odd ones, a strided vector (every second int) on rank 1. Open
   * MPI itself refuses predefined operators on derived datatypes
   * (MPI_ERR_OP), so this runs only where the shim serves allreduce: on
   * every rank, whatever the datatype. */
  if (want("allreduce")) {
    for (int i = 0; i < 16; ++i) in[i] = out[i] = -7;
    for (int i = 0; i < 8; ++i) in[rank == 1 ? 2 * i : i] = i + rank;
    b = served("MPI_Allreduce");
    if (rank == 1)
      MPI_Allreduce(in, out, 1, vec, MPI_SUM, MPI_COMM_WORLD);
    else if (rank % 2)
      MPI_Allreduce(in, out, 1, contig, MPI_SUM, MPI_COMM_WORLD);
    else
      MPI_Allreduce(in, out, 8, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    bad = 0;
    for (int i = 0; i < 8; ++i) {
      bad += (rank == 1 ? out[2 * i] : out[i]) != i * size + size * (size - 1) / 2;
      if (rank == 1) bad += out[2 * i + 1] != -7; /* the gaps are not written */
    }
    CHECK(bad == 0, "allreduce with mixed datatypes: %d wrong", bad);
    expect_served("MPI_Allreduce", "allreduce", b, 1, 1, MPI_COMM_WORLD, __LINE__);

    /* The same, non-blocking and in place; rank 1 frees its datatype while
     * the request is pending (allowed). */
    for (int i = 0; i < 16; ++i) out[i] = -7;
    for (int i = 0; i < 8; ++i) out[rank == 1 ? 2 * i : i] = i;
    b = served("MPI_Iallreduce");
    MPI_Datatype vdup;
    MPI_Type_dup(vec, &vdup);
    MPI_Datatype t = rank == 1 ? vdup : (rank % 2 ? contig : MPI_INT);
    MPI_Iallreduce(MPI_IN_PLACE, out, rank % 2 ? 1 : 8, t, MPI_MAX, MPI_COMM_WORLD, &r);
    MPI_Type_free(&vdup);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    bad = 0;
    for (int i = 0; i < 8; ++i) bad += (rank == 1 ? out[2 * i] : out[i]) != i;
    CHECK(bad == 0, "iallreduce in place with mixed datatypes: %d wrong", bad);
    expect_served("MPI_Iallreduce", "allreduce", b, 1, 1, MPI_COMM_WORLD, __LINE__);
  }

  /* A user operator is given the datatype, so with one every rank passes
   * the same datatype (as MPI asks of a reduction): a contiguous type of 8
   * ints is one element, served whole. */
  MPI_Op op;
  MPI_Op_create(user_sum, 1, &op);
  for (int i = 0; i < 16; ++i) in[i] = out[i] = -7;
  for (int i = 0; i < 8; ++i) in[i] = i + rank;
  b = served("MPI_Allreduce");
  MPI_Allreduce(in, out, 1, contig, op, MPI_COMM_WORLD);
  bad = 0;
  for (int i = 0; i < 8; ++i) bad += out[i] != i * size + size * (size - 1) / 2;
  for (int i = 8; i < 16; ++i) bad += out[i] != -7;
  CHECK(bad == 0, "user op on a contiguous datatype: %d wrong", bad);
  expect_served("MPI_Allreduce", "allreduce", b, 1, 1, MPI_COMM_WORLD, __LINE__);
  MPI_Op_free(&op);

  /* Bcast of 6 doubles: a vector on odd ranks, MPI_DOUBLE x 6 on even ones
   * (legal in MPI and in Open MPI): served on every rank. */
  MPI_Datatype dvec;
  MPI_Type_vector(3, 2, 3, MPI_DOUBLE, &dvec); /* 2 of every 3 */
  MPI_Type_commit(&dvec);
  double d[9];
  for (int nonblocking = 0; nonblocking < 2; ++nonblocking) {
    for (int i = 0; i < 9; ++i) d[i] = rank == 0 ? i : -1;
    const char* fn = nonblocking ? "MPI_Ibcast" : "MPI_Bcast";
    b = served(fn);
    if (nonblocking) {
      MPI_Ibcast(d, rank % 2 ? 1 : 6, rank % 2 ? dvec : MPI_DOUBLE, 0, MPI_COMM_WORLD, &r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    } else {
      MPI_Bcast(d, rank % 2 ? 1 : 6, rank % 2 ? dvec : MPI_DOUBLE, 0, MPI_COMM_WORLD);
    }
    bad = 0;
    if (rank % 2) {
      const double w[9] = {0, 1, -1, 2, 3, -1, 4, 5, -1};
      for (int i = 0; i < 9; ++i) bad += d[i] != w[i];
    } else {
      for (int i = 0; i < 6; ++i) bad += d[i] != i;
    }
    CHECK(bad == 0, "%s with mixed datatypes: %d wrong", fn, bad);
    expect_served(fn, "bcast", b, 1, 1, MPI_COMM_WORLD, __LINE__);
  }

  /* A struct of an int and a float (two element types): bytes to a bcast. */
  struct pair {
    int i;
    float f;
  } pv = {rank, rank == 0 ? 1.0f : 0.0f};
  int lens[2] = {1, 1};
  MPI_Aint disp[2] = {offsetof(struct pair, i), offsetof(struct pair, f)};
  MPI_Datatype types[2] = {MPI_INT, MPI_FLOAT}, mixed;
  MPI_Type_create_struct(2, lens, disp, types, &mixed);
  MPI_Type_commit(&mixed);
  b = served("MPI_Bcast");
  MPI_Bcast(&pv, 1, mixed, 0, MPI_COMM_WORLD);
  CHECK(pv.i == 0 && pv.f == 1.0f, "bcast of a struct");
  expect_served("MPI_Bcast", "bcast", b, 1, 1, MPI_COMM_WORLD, __LINE__);
  MPI_Type_free(&mixed);
  MPI_Type_free(&contig);
  MPI_Type_free(&vec);
  MPI_Type_free(&dvec);
}

/* ---- communicators ------------------------------------------------------- */

static void allreduce_check(MPI_Comm comm, const char* what) {
  int n, me;
  MPI_Comm_size(comm, &n);
  MPI_Comm_rank(comm, &me);
  long v = me + 1, r = 0;
  MPI_Allreduce(&v, &r, 1, MPI_LONG, MPI_SUM, comm);
  CHECK(r == (long)n * (n + 1) / 2, "%s: allreduce %ld, expected %ld", what, r, (long)n * (n + 1) / 2);
  MPI_Request req;
  v = me;
  MPI_Iallreduce(MPI_IN_PLACE, &v, 1, MPI_LONG, MPI_MAX, comm, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  CHECK(v == n - 1, "%s: iallreduce max %ld", what, v);
  MPI_Barrier(comm);
  MPI_Ibarrier(comm, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

static void expect_comm_served(MPI_Comm comm, int should, const char* what) {
  if (!served_fn) return;
  const int got = served_fn(comm);
  CHECK(got == (should && shim_active), "%s: served %d, expected %d", what, got, should && shim_active);
}

/* MPI_Comm_create_group (collective over the new group only; the other
 * ranks do not call it), served by coll_comm_create_group except at
 * MPI_THREAD_MULTIPLE: world's ranks but 0, in reverse order, then a group
 * of that group (its ranks 1 and 0, swapped); a group of one (shared self);
 * and, while a served MPI_Iallreduce on world that rank 0 has not started
 * is pending on the members, a group left to MPI (libcoll would queue the
 * creation behind it). */
static void test_create_group(void) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  const int serves = level < MPI_THREAD_MULTIPLE;
  MPI_Group world_group;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  if (size >= 3 && rank > 0) {
    int* members = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size - 1; ++i) members[i] = size - 1 - i;
    MPI_Group g;
    MPI_Group_incl(world_group, size - 1, members, &g);
    MPI_Comm c;
    MPI_Comm_create_group(MPI_COMM_WORLD, g, 3, &c);
    int cr = -1, cs = 0;
    MPI_Comm_rank(c, &cr);
    MPI_Comm_size(c, &cs);
    CHECK(cs == size - 1 && cr == size - 1 - rank, "create_group: rank %d of %d", cr, cs);
    expect_comm_served(c, serves, "MPI_Comm_create_group");
    unsigned long long b = served("MPI_Allreduce");
    allreduce_check(c, "MPI_Comm_create_group");
    expect_served("MPI_Allreduce", "allreduce", b, 1, serves, c, __LINE__);
    if (serves) test_bcast(c); /* it expects its calls served */
    int* got = malloc(sizeof(int) * (size_t)size);
    MPI_Allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, c);
    for (int i = 0; i < cs; ++i)
      CHECK(got[i] == members[i], "create_group: allgather[%d] = %d, expected %d", i, got[i],
            members[i]);
    free(got);
    /* A group of that group: its ranks 1 and 0 (world ranks size-2 and
     * size-1). */
    if (cr < 2) {
      MPI_Group cg, pair;
      MPI_Comm_group(c, &cg);
      const int two[2] = {1, 0};
      MPI_Group_incl(cg, 2, two, &pair);
      MPI_Comm sub;
      MPI_Comm_create_group(c, pair, 4, &sub);
      expect_comm_served(sub, serves, "MPI_Comm_create_group of a group");
      b = served("MPI_Allreduce");
      allreduce_check(sub, "MPI_Comm_create_group of a group");
      expect_served("MPI_Allreduce", "allreduce", b, 1, serves, sub, __LINE__);
      MPI_Comm_free(&sub);
      MPI_Group_free(&pair);
      MPI_Group_free(&cg);
    }
    MPI_Comm_free(&c);
    MPI_Group_free(&g);
    free(members);
  }
  /* A group of one: the shared communicator of size 1. */
  {
    MPI_Group me;
    MPI_Group_incl(world_group, 1, &rank, &me);
    MPI_Comm one;
    MPI_Comm_create_group(MPI_COMM_WORLD, me, 9, &one);
    expect_comm_served(one, 1, "MPI_Comm_create_group of one rank");
    allreduce_check(one, "MPI_Comm_create_group of one rank");
    MPI_Comm_free(&one);
    MPI_Group_free(&me);
  }
  /* A served operation on the parent pending at the creation: left to MPI
   * (every member sees it pending: rank 0 starts its part only when told,
   * after the creation). */
  if (size >= 3 && want("allreduce")) {
    long v = 1, r = 0;
    MPI_Request req;
    if (rank == 0) {
      int go = 0;
      MPI_Recv(&go, 1, MPI_INT, 1, 77, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Iallreduce(&v, &r, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &req);
      MPI_Wait(&req, MPI_STATUS_IGNORE);
    } else {
      MPI_Iallreduce(&v, &r, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD, &req);
      MPI_Group rest;
      int all_but_0[1][3] = {{1, size - 1, 1}};
      MPI_Group_range_incl(world_group, 1, all_but_0, &rest);
      MPI_Comm c;
      MPI_Comm_create_group(MPI_COMM_WORLD, rest, 5, &c);
      expect_comm_served(c, 0, "MPI_Comm_create_group with a parent operation pending");
      if (rank == 1) {
        int go = 1;
        MPI_Send(&go, 1, MPI_INT, 0, 77, MPI_COMM_WORLD);
      }
      allreduce_check(c, "MPI_Comm_create_group with a parent operation pending");
      MPI_Wait(&req, MPI_STATUS_IGNORE);
      MPI_Comm_free(&c);
      MPI_Group_free(&rest);
    }
    CHECK(r == size, "iallreduce pending at MPI_Comm_create_group: %ld", r);
  }
  MPI_Group_free(&world_group);
}

static void test_comms(void) {
  /* MPI_COMM_SELF. */
  unsigned long long b = served("MPI_Allreduce");
  allreduce_check(MPI_COMM_SELF, "MPI_COMM_SELF");
  expect_served("MPI_Allreduce", "allreduce", b, 1, 1, MPI_COMM_WORLD, __LINE__);
  test_bcast(MPI_COMM_SELF);

  /* dup -> split -> dup -> split, collectives on each, frees out of order. */
  MPI_Comm dup, half, halfdup, quarter;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  expect_comm_served(dup, 1, "dup of world");
  MPI_Comm_split(dup, rank % 2, -rank, &half); /* reversed order */
  expect_comm_served(half, 1, "split");
  MPI_Comm_dup(half, &halfdup);
  MPI_Comm_split(halfdup, (rank / 2) % 2, rank, &quarter);
  int hr, hs;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  int* ranks = malloc(sizeof(int) * (size_t)hs);
  MPI_Allgather(&rank, 1, MPI_INT, ranks, 1, MPI_INT, half);
  for (int i = 1; i < hs; ++i) CHECK(ranks[i] < ranks[i - 1], "split order (reversed keys)");
  free(ranks);
  b = served("MPI_Allreduce");
  allreduce_check(dup, "dup");
  allreduce_check(half, "half");
  allreduce_check(halfdup, "halfdup");
  allreduce_check(quarter, "quarter");
  expect_served("MPI_Allreduce", "allreduce", b, 4, 1, MPI_COMM_WORLD, __LINE__);
  test_bcast(half);
  MPI_Comm_free(&half);
  allreduce_check(halfdup, "halfdup after its parent was freed");
  MPI_Comm_free(&dup);
  MPI_Comm_free(&quarter);
  MPI_Comm_free(&halfdup);

  /* Split with MPI_UNDEFINED, create from a group, cart. */
  MPI_Comm some;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : 1, 0, &some);
  CHECK((rank == 0) == (some == MPI_COMM_NULL), "split with MPI_UNDEFINED");
  if (some != MPI_COMM_NULL) {
    expect_comm_served(some, 1, "split without rank 0");
    allreduce_check(some, "split without rank 0");
    MPI_Comm_free(&some);
  }
  MPI_Group world_group, evens;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int range[1][3] = {{0, size - 1, 2}};
  MPI_Group_range_incl(world_group, 1, range, &evens);
  MPI_Comm even_comm;
  MPI_Comm_create(MPI_COMM_WORLD, evens, &even_comm);
  if (even_comm != MPI_COMM_NULL) {
    expect_comm_served(even_comm, 1, "MPI_Comm_create");
    allreduce_check(even_comm, "MPI_Comm_create");
    MPI_Comm_free(&even_comm);
  }
  int dims[1] = {size}, periods[1] = {0};
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  expect_comm_served(cart, 1, "cart");
  allreduce_check(cart, "cart");
  MPI_Comm_free(&cart);

  /* Congruent with world, made by a creator whose copy the shim does not
   * serve (MPI_Comm_idup: its attribute copy runs inside MPI's progress):
   * not served by a first non-blocking call (it cannot wait for a setup),
   * set up at the first blocking one. */
  MPI_Comm cong;
  MPI_Request req;
  MPI_Comm_idup(MPI_COMM_WORLD, &cong, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  long v = 1, r = 0;
  b = served("MPI_Iallreduce");
  MPI_Iallreduce(&v, &r, 1, MPI_LONG, MPI_SUM, cong, &req);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  CHECK(r == size, "congruent: iallreduce");
  expect_served("MPI_Iallreduce", "allreduce", b, 1, size == 1, MPI_COMM_WORLD, __LINE__);
  expect_comm_served(cong, size == 1, "congruent before its first blocking call");
  b = served("MPI_Allreduce");
  MPI_Allreduce(&v, &r, 1, MPI_LONG, MPI_SUM, cong);
  CHECK(r == size, "congruent: allreduce");
  expect_served("MPI_Allreduce", "allreduce", b, 1, 1, MPI_COMM_WORLD, __LINE__);
  expect_comm_served(cong, size == 1 || want("allreduce"), "congruent after its first blocking call");
  allreduce_check(cong, "congruent");
  MPI_Comm_free(&cong);
  MPI_Group_free(&evens);
  MPI_Group_free(&world_group);

  /* An inter-communicator between the two halves: passed to MPI. */
  if (size >= 2) {
    MPI_Comm local, inter;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &local);
    MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 5, &inter);
    int x = rank, y = -1;
    b = served("MPI_Allreduce");
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, inter); /* the other group's sum */
    int other = 0;
    for (int q = 0; q < size; ++q)
      if (q % 2 != rank % 2) other += q;
    CHECK(y == other, "inter-communicator allreduce: %d, expected %d", y, other);
    expect_served("MPI_Allreduce", "allreduce", b, 1, 0, MPI_COMM_WORLD, __LINE__);
    expect_comm_served(inter, 0, "inter-communicator");
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
  }

  /* Many create / free cycles: nothing runs out. */
  for (int i = 0; i < 60; ++i) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    if (i % 10 == 0) expect_comm_served(c, 1, "dup in a create/free loop");
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c);
    CHECK(sum == size, "create/free loop %d", i);
    MPI_Comm_free(&c);
  }
}

/* ---- requests ------------------------------------------------------------ */

static void test_requests(void) {
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  /* Mixed arrays: served iallreduce + ibcast + ibarrier and a ring of
   * point-to-point messages, in every wait and test function. */
  for (int form = 0; form < 7; ++form) {
    int a = rank + 1, ar = 0, bc = rank == 0 ? 99 : 0, sendv = rank, recvv = -1;
    MPI_Request reqs[5];
    MPI_Irecv(&recvv, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &reqs[0]);
    MPI_Iallreduce(&a, &ar, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &reqs[1]);
    MPI_Ibcast(&bc, 1, MPI_INT, 0, MPI_COMM_WORLD, &reqs[2]);
    MPI_Ibarrier(MPI_COMM_WORLD, &reqs[3]);
    MPI_Isend(&sendv, 1, MPI_INT, next, 11, MPI_COMM_WORLD, &reqs[4]);
    MPI_Status st[5];
    int done = 0, flag = 0, idx = 0, outcount = 0, indices[5];
    switch (form) {
      case 0:
        MPI_Waitall(5, reqs, st);
        break;
      case 1:
        while (!flag) MPI_Testall(5, reqs, &flag, st);
        break;
      case 2:
        for (done = 0; done < 5; ++done) {
          MPI_Waitany(5, reqs, &idx, &st[0]);
          CHECK(idx >= 0 && idx < 5 && reqs[idx] == MPI_REQUEST_NULL, "waitany index %d", idx);
        }
        break;
      case 3:
        while (done < 5) {
          MPI_Testany(5, reqs, &idx, &flag, &st[0]);
          if (flag) ++done;
        }
        break;
      case 4:
        while (done < 5) {
          MPI_Waitsome(5, reqs, &outcount, indices, st);
          done += outcount;
        }
        break;
      case 5:
        while (done < 5) {
          MPI_Testsome(5, reqs, &outcount, indices, st);
          done += outcount;
        }
        break;
      default:
        for (int i = 4; i >= 0; --i) {
          do
            MPI_Test(&reqs[i], &flag, &st[0]);
          while (!flag);
        }
        break;
    }
    for (int i = 0; i < 5; ++i) CHECK(reqs[i] == MPI_REQUEST_NULL, "form %d: request %d not null", form, i);
    CHECK(ar == size * (size + 1) / 2 && bc == 99 && recvv == prev, "form %d: results %d %d %d", form, ar,
          bc, recvv);
  }
  /* MPI_Request_free (erroneous for a collective's request in MPI 3.1, so
   * on a point-to-point one) while a served request is outstanding. */
  int x = rank, xr = -1, y = 1, yr = 0, token = rank, got = -1;
  MPI_Request r1, r2, rs;
  MPI_Iallreduce(&x, &xr, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r1);
  MPI_Irecv(&got, 1, MPI_INT, prev, 14, MPI_COMM_WORLD, &r2);
  MPI_Isend(&token, 1, MPI_INT, next, 14, MPI_COMM_WORLD, &rs);
  MPI_Request_free(&rs);
  CHECK(rs == MPI_REQUEST_NULL, "request_free");
  MPI_Wait(&r2, MPI_STATUS_IGNORE);
  MPI_Wait(&r1, MPI_STATUS_IGNORE);
  CHECK(xr == size - 1 && got == prev, "around request_free: %d %d", xr, got);
  MPI_Barrier(MPI_COMM_WORLD);

  /* MPI_Request_get_status and a status of a served request. */
  MPI_Iallreduce(&y, &yr, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r2);
  MPI_Status status;
  MPI_Wait(&r2, &status);
  int count = -1;
  MPI_Get_count(&status, MPI_BYTE, &count);
  if (want("allreduce")) CHECK(count == 0, "status of a served request: count %d", count);

  /* Progress across both engines. (a) This rank's MPI_Isend is needed by
   * the next rank's MPI_Recv before that rank reaches a served allreduce. */
  if (size >= 2) {
    const int n = 1 << 20; /* rendezvous: needs the sender's MPI progress */
    char* big = malloc((size_t)n);
    memset(big, rank, (size_t)n);
    MPI_Request s;
    if (rank == 0) MPI_Isend(big, n, MPI_CHAR, 1, 12, MPI_COMM_WORLD, &s);
    if (rank == 1) MPI_Recv(big, n, MPI_CHAR, 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) MPI_Wait(&s, MPI_STATUS_IGNORE);
    CHECK(sum == size && (rank != 1 || big[n - 1] == 0), "isend before allreduce");
    /* (b) Rank 0 blocks in MPI_Recv (not the shim's) while the others wait
     * for a served request that needs rank 0's libcoll progress. */
    MPI_Request ra;
    int v = 1, vr = 0, token = 0;
    /* The others start late: rank 0's part cannot be done when it enters
     * MPI_Recv. */
    if (rank != 0) usleep(200000);
    MPI_Iallreduce(&v, &vr, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &ra);
    if (rank == 0) {
      MPI_Recv(&token, 1, MPI_INT, 1, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Wait(&ra, MPI_STATUS_IGNORE);
    } else {
      MPI_Wait(&ra, MPI_STATUS_IGNORE);
      if (rank == 1) MPI_Send(&token, 1, MPI_INT, 0, 13, MPI_COMM_WORLD);
    }
    CHECK(vr == size, "iallreduce across MPI_Recv: %d", vr);
    free(big);
  }
}

/* ---- errors (--errors, --errors-fatal) --------------------------------------- */

/* An argument the shim rejects on this rank (a negative sendcount, here on
 * every rank, so no rank waits for another): the MPI error class comes back
 * at once, MPI_Error_string tells why after MPI's text (until the next
 * collective the shim intercepts), and the statistics count it as rejected. */
static void test_rejected(void) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  int s = rank, *r = malloc((size_t)size * sizeof(int));
  const int rc = MPI_Allgather(&s, -1, MPI_INT, r, 1, MPI_INT, c);
  int cls = -1;
  MPI_Error_class(rc, &cls);
  CHECK(cls == MPI_ERR_COUNT, "negative sendcount: class %d", cls);
  char text[MPI_MAX_ERROR_STRING], mpi_text[MPI_MAX_ERROR_STRING];
  int len = 0, mpi_len = 0;
  MPI_Error_string(rc, text, &len);
  PMPI_Error_string(rc, mpi_text, &mpi_len);
  CHECK(len == (int)strlen(text) && strncmp(text, mpi_text, (size_t)mpi_len) == 0 &&
            strstr(text, ": libcoll: MPI_Allgather: rejected by libcoll_mpi: sendcount -1 is "
                         "negative") != NULL,
        "error string '%s'", text);
  if (rank == 0) printf("pmpi_test: rejected sendcount: %s\n", text);
  /* Any other code: MPI's text alone. */
  MPI_Error_string(MPI_ERR_TRUNCATE, text, &len);
  PMPI_Error_string(MPI_ERR_TRUNCATE, mpi_text, &mpi_len);
  CHECK(strcmp(text, mpi_text) == 0 && len == mpi_len, "MPI_ERR_TRUNCATE: '%s'", text);
  /* A non-blocking call without its request pointer (every rank here): the
   * shim's rejection (MPI_ERR_REQUEST), not a pass to MPI, which a rank
   * could not decide alone (the others would serve the call). */
  int one = 1, sum = 0;
  const int rq = MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, c, NULL);
  cls = -1;
  MPI_Error_class(rq, &cls);
  CHECK(cls == MPI_ERR_REQUEST, "MPI_Iallreduce with a NULL request: class %d", cls);
  /* The communicator still works; after it, MPI's text alone for the class too. */
  MPI_Allgather(&s, 1, MPI_INT, r, 1, MPI_INT, c);
  int bad = 0;
  for (int i = 0; i < size; ++i) bad += r[i] != i;
  CHECK(bad == 0, "allgather after a rejected one: %d wrong", bad);
  MPI_Error_string(rc, text, &len);
  PMPI_Error_string(rc, mpi_text, &mpi_len);
  CHECK(strcmp(text, mpi_text) == 0, "after a call: '%s'", text);
  free(r);
  MPI_Comm_free(&c);
}

/* Counts that differ between ranks make libcoll fail the call (an erroneous
 * program): on a communicator with MPI_ERRORS_RETURN the shim returns an MPI
 * error class; with MPI_ERRORS_ARE_FATAL (--errors-fatal) it prints the
 * libcoll message and aborts the job. */
static void test_errors(int fatal) {
  if (size < 2 || !shim_active || !want("allreduce")) return;
  if (!fatal) test_rejected();
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  if (!fatal) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  int v[8] = {0}, r[8];
  const int rc = MPI_Allreduce(v, r, rank == 0 ? 4 : 8, MPI_INT, MPI_SUM, c);
  int cls = -1;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  int failed = rc != MPI_SUCCESS, any = 0;
  PMPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  CHECK(any, "mismatched counts: no rank got an error");
  CHECK(rc == MPI_SUCCESS || cls == MPI_ERR_ARG || cls == MPI_ERR_OTHER, "error class %d", cls);
  if (rank == 0) printf("pmpi_test: mismatched counts: rank 0 got %d (class %d)\n", rc, cls);
  if (rc != MPI_SUCCESS) {
    /* MPI's text, then libcoll's message. */
    char text[MPI_MAX_ERROR_STRING], mpi_text[MPI_MAX_ERROR_STRING];
    int len = 0, mpi_len = 0;
    MPI_Error_string(rc, text, &len);
    PMPI_Error_string(rc, mpi_text, &mpi_len);
    CHECK(len == (int)strlen(text) && strncmp(text, mpi_text, (size_t)mpi_len) == 0 &&
              strstr(text, ": libcoll: MPI_Allreduce: COLL_ERR_") != NULL,
          "error string '%s'", text);
  }
  /* The communicator is failed for libcoll (sticky); free it. */
  MPI_Comm_free(&c);
}

/* ---- threads (--threads) -------------------------------------------------- */

static MPI_Comm thread_comms[2];

static void* thread_body(void* arg) {
  MPI_Comm comm = thread_comms[(intptr_t)arg];
  for (int i = 0; i < 200; ++i) {
    long v = rank + i, r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_LONG, MPI_SUM, comm);
    CHECK(r == (long)size * i + (long)size * (size - 1) / 2, "thread %ld: allreduce", (long)(intptr_t)arg);
    MPI_Request req;
    MPI_Ibcast(&v, 1, MPI_LONG, i % size, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(v == i % size + i, "thread %ld: ibcast", (long)(intptr_t)arg);
  }
  return NULL;
}

static void test_threads(void) {
  for (int t = 0; t < 2; ++t) MPI_Comm_dup(MPI_COMM_WORLD, &thread_comms[t]);
  const unsigned long long b = served("MPI_Allreduce");
  pthread_t th[2];
  for (intptr_t t = 0; t < 2; ++t) pthread_create(&th[t], NULL, thread_body, (void*)t);
  for (int t = 0; t < 2; ++t) pthread_join(th[t], NULL);
  expect_served("MPI_Allreduce", "allreduce", b, 400, 1, MPI_COMM_WORLD, __LINE__);
  for (int t = 0; t < 2; ++t) MPI_Comm_free(&thread_comms[t]);
}

int main(int argc, char** argv) {
  int threads = 0, errors_test = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--threads") == 0) threads = 1;
    if (strcmp(argv[i], "--errors") == 0) errors_test = 1;
    if (strcmp(argv[i], "--errors-fatal") == 0) errors_test = 2;
  }
  int provided = MPI_THREAD_SINGLE;
  if (threads)
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else
    MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  lookup("coll_mpi_counts", &counts_fn, sizeof counts_fn);
  lookup("coll_mpi_comm_served", &served_fn, sizeof served_fn);
  coll_mpi_active_fn active_fn = NULL;
  lookup("coll_mpi_active", &active_fn, sizeof active_fn);
  shim_active = active_fn && active_fn();
  const char* disable = getenv("COLL_MPI_DISABLE");
  if (disable && strcmp(disable, "1") == 0) CHECK(!shim_active, "COLL_MPI_DISABLE=1 but the shim serves");
  if (getenv("PMPI_TEST_EXPECT_SHIM")) CHECK(counts_fn && (shim_active || (disable && *disable == '1')),
                                             "the shim is not loaded or not active");
  if (rank == 0)
    printf("pmpi_test: np %d, shim %s%s\n", size, counts_fn ? "loaded" : "not loaded",
           counts_fn ? (shim_active ? ", active" : ", inactive") : "");

  /* Open MPI's switch (on where mpirun oversubscribes; null under another MPI). */
  const _Bool* yield_when_idle = (const _Bool*)dlsym(RTLD_DEFAULT, "opal_progress_yield_when_idle");
  const int yield_at_init = yield_when_idle ? *yield_when_idle : -1;

  if (threads) {
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    if (provided == MPI_THREAD_MULTIPLE) test_threads();
  } else if (errors_test) {
    test_errors(errors_test == 2);
  } else {
    test_allreduce_types();
    test_allreduce_other();
    test_user_op();
    test_bcast(MPI_COMM_WORLD);
    unsigned long long b = served("MPI_Barrier");
    MPI_Barrier(MPI_COMM_WORLD);
    expect_served("MPI_Barrier", "barrier", b, 1, 1, MPI_COMM_WORLD, __LINE__);
    test_mixed_datatypes();
    test_comms();
    test_create_group();
    test_requests();
  }
  if (yield_when_idle)
    CHECK(*yield_when_idle == yield_at_init, "opal_progress_yield_when_idle %d, %d after MPI_Init",
          *yield_when_idle, yield_at_init);

  int all = 0;
  PMPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all == 0)
      printf("pmpi_test: all checks passed at np %d\n", size);
    else
      printf("pmpi_test: %d failed checks at np %d\n", all, size);
  }
  fflush(stdout);
  MPI_Finalize();
  return all != 0;
}
