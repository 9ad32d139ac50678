/* User-defined operators (MPI_Op_create) through the PMPI shim, against
 * results computed here in rank order.
 *
 *  - a commutative op (the operand of larger magnitude; ties cannot occur)
 *    whose function reads the datatype handle it is given: MPI_INT and
 *    MPI_DOUBLE must arrive as the program's own handles. MPI_Allreduce,
 *    MPI_Reduce (every root), MPI_Iallreduce, MPI_Scan, MPI_Exscan,
 *    MPI_Reduce_scatter_block; counts 0, 1, 7 and past a slot;
 *  - a non-commutative one: the 2x2 integer matrix product, one matrix per
 *    element of MPI_Type_contiguous(4, MPI_INT) (libcoll carries the element
 *    whole), checked against the product in rank order (and that order
 *    matters): MPI_Allreduce, MPI_Reduce at root 0 and at the last rank,
 *    MPI_Scan;
 *  - MPI_Op_free while an MPI_Iallreduce with the op is pending, then a new
 *    op (Open MPI reuses the handle) with another function;
 *  - datatypes with gaps, which the shim packs and unpacks again for the
 *    function: two doubles of a strided vector and a padded struct
 *    { double; int } (commutative ops), a 2x2 matrix whose entries are
 *    strided and an affine map { gap; int; pad; long long } whose data
 *    starts 4 bytes in (non-commutative), in every reduction and its I-form,
 *    from sendbuf and in place (and MPIX_Allreduce_init where Open MPI has
 *    it), counts 1, 5 and 3000, the gap bytes of every result element left
 *    as they were (a sentinel);
 *  - a contiguous datatype of 12 bytes (3 ints: no libcoll element of that
 *    size, packed into 16) served, one of 40 bytes (over the largest)
 *    passed to MPI.
 *
 * Where the shim is loaded each function must have served (or passed) the
 * calls made. Without the shim the same program checks plain MPI (the
 * reference run). Prints "pmpi_userops: all checks passed at np N". */
#include <math.h>
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_mpi.h"
#include "pmpi_check.h"

/* Open MPI's persistent collectives (MPIX_Allreduce_init), where it has them. */
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

static int rank, size, errors;
static coll_mpi_counts_fn counts_fn;
static MPI_Datatype mat_type, int3_type, int10_type;
static int wrong_type; /* calls of a function with a datatype it was not made for */

/* ---- the operators ----------------------------------------------------- */

static void max_abs(void* in, void* inout, int* len, MPI_Datatype* t) {
  if (*t == MPI_INT) {
    const int* a = in;
    int* b = inout;
    for (int i = 0; i < *len; ++i) b[i] = abs(a[i]) > abs(b[i]) ? a[i] : b[i];
  } else if (*t == MPI_DOUBLE) {
    const double* a = in;
    double* b = inout;
    for (int i = 0; i < *len; ++i) b[i] = fabs(a[i]) > fabs(b[i]) ? a[i] : b[i];
  } else {
    ++wrong_type;
  }
}

static void min_abs_int(void* in, void* inout, int* len, MPI_Datatype* t) {
  if (*t != MPI_INT) {
    ++wrong_type;
    return;
  }
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) b[i] = abs(a[i]) < abs(b[i]) ? a[i] : b[i];
}

/* inout = in x inout: in holds the lower ranks' product. */
static void mat_mul(const int* a, const int* b, int* out) {
  int r[4];
  r[0] = a[0] * b[0] + a[1] * b[2];
  r[1] = a[0] * b[1] + a[1] * b[3];
  r[2] = a[2] * b[0] + a[3] * b[2];
  r[3] = a[2] * b[1] + a[3] * b[3];
  memcpy(out, r, sizeof r);
}
static void mat_op(void* in, void* inout, int* len, MPI_Datatype* t) {
  if (*t != mat_type) {
    ++wrong_type;
    return;
  }
  for (int i = 0; i < *len; ++i) {
    int* b = (int*)inout + 4 * i;
    mat_mul((const int*)in + 4 * i, b, b);
  }
}

/* Elementwise sum of int3_type's or int10_type's elements. */
static void sum_ints(void* in, void* inout, int* len, MPI_Datatype* t) {
  const int per = *t == int3_type ? 3 : *t == int10_type ? 10 : 0;
  if (!per) ++wrong_type;
  for (int i = 0; i < per * *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

/* ---- inputs and expected values ------------------------------------------ */

/* Element i of rank r: magnitudes differ between ranks (r is the low 4
 * bits), and the largest is not always the last rank's. */
static int ival(int r, int i) {
  const int mag = ((r * 7 + i * 3) % 13) * 16 + r;
  return (r + i) % 2 ? -mag : mag;
}
static double dval(int r, int i) { return ival(r, i) * 1.5; }
/* The op over ranks lo .. hi - 1 (hi > lo). */
static int iexpect(int lo, int hi, int i, int min) {
  int v = ival(lo, i);
  for (int r = lo + 1; r < hi; ++r)
    if (min ? abs(ival(r, i)) < abs(v) : abs(ival(r, i)) > abs(v)) v = ival(r, i);
  return v;
}

/* A matrix of rank r, element i: the product of these does not commute. */
static void mval(int r, int i, int* m) {
  m[0] = 1;
  m[1] = (r + i) % 3 + 1;
  m[2] = (r * 2 + i) % 2;
  m[3] = 1 + r % 2;
}
static void mexpect(int hi, int i, int* m) {
  mval(0, i, m);
  for (int r = 1; r < hi; ++r) {
    int x[4];
    mval(r, i, x);
    mat_mul(m, x, m);
  }
}

/* ---- the shim's counts ------------------------------------------------ */

static unsigned long long count_of(const char* fn, int passed) {
  unsigned long long s = 0, p = 0;
  if (counts_fn) counts_fn(fn, &s, &p);
  return passed ? p : s;
}
struct Mark {
  const char* fn;
  unsigned long long served, passed;
};
static struct Mark mark(const char* fn) {
  struct Mark m = {fn, count_of(fn, 0), count_of(fn, 1)};
  return m;
}
/* Since m: calls served and passed to MPI. */
static void expect_counts(struct Mark m, unsigned long long served, unsigned long long passed,
                          int line) {
  if (!counts_fn) return;
  const unsigned long long s = count_of(m.fn, 0) - m.served, p = count_of(m.fn, 1) - m.passed;
  CHECK(s == served && p == passed, "line %d: %s: %llu served, %llu passed; expected %llu, %llu",
        line, m.fn, s, p, served, passed);
}

/* ---- the tests ----------------------------------------------------------- */

static const int kCounts[] = {0, 1, 7, 5000};
enum { kNCounts = sizeof kCounts / sizeof kCounts[0], kMax = 5000 };

static void test_commutative(MPI_Op op) {
  int* in = malloc(kMax * sizeof(int));
  int* out = malloc((size_t)kMax * size * sizeof(int));
  double* din = malloc(kMax * sizeof(double));
  double* dout = malloc(kMax * sizeof(double));
  struct Mark ar = mark("MPI_Allreduce"), re = mark("MPI_Reduce"), iar = mark("MPI_Iallreduce"),
              sc = mark("MPI_Scan"), ex = mark("MPI_Exscan"),
              rsb = mark("MPI_Reduce_scatter_block");
  int calls_reduce = 0;
  for (int k = 0; k < kNCounts; ++k) {
    const int n = kCounts[k];
    int bad = 0;
    for (int i = 0; i < n; ++i) in[i] = ival(rank, i), din[i] = dval(rank, i);

    MPI_Allreduce(in, out, n, MPI_INT, op, MPI_COMM_WORLD);
    MPI_Allreduce(din, dout, n, MPI_DOUBLE, op, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i)
      bad += out[i] != iexpect(0, size, i, 0) || dout[i] != 1.5 * iexpect(0, size, i, 0);
    CHECK(bad == 0, "allreduce count %d: %d wrong", n, bad);

    for (int root = 0; root < size; ++root, ++calls_reduce) {
      for (int i = 0; i < n; ++i) out[i] = -1;
      MPI_Reduce(in, out, n, MPI_INT, op, root, MPI_COMM_WORLD);
      bad = 0;
      for (int i = 0; rank == root && i < n; ++i) bad += out[i] != iexpect(0, size, i, 0);
      CHECK(bad == 0, "reduce count %d root %d: %d wrong", n, root, bad);
    }

    MPI_Request req;
    for (int i = 0; i < n; ++i) out[i] = in[i];
    MPI_Iallreduce(MPI_IN_PLACE, out, n, MPI_INT, op, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    bad = 0;
    for (int i = 0; i < n; ++i) bad += out[i] != iexpect(0, size, i, 0);
    CHECK(bad == 0, "iallreduce count %d: %d wrong", n, bad);

    MPI_Scan(din, dout, n, MPI_DOUBLE, op, MPI_COMM_WORLD);
    bad = 0;
    for (int i = 0; i < n; ++i) bad += dout[i] != 1.5 * iexpect(0, rank + 1, i, 0);
    CHECK(bad == 0, "scan count %d: %d wrong", n, bad);

    MPI_Exscan(in, out, n, MPI_INT, op, MPI_COMM_WORLD);
    bad = 0;
    for (int i = 0; rank > 0 && i < n; ++i) bad += out[i] != iexpect(0, rank, i, 0);
    CHECK(bad == 0, "exscan count %d: %d wrong", n, bad);

    /* n elements a rank: the input is size * n of them. */
    int* rin = malloc(((size_t)n * size + 1) * sizeof(int));
    for (int i = 0; i < n * size; ++i) rin[i] = ival(rank, i);
    MPI_Reduce_scatter_block(rin, out, n, MPI_INT, op, MPI_COMM_WORLD);
    bad = 0;
    for (int i = 0; i < n; ++i) bad += out[i] != iexpect(0, size, rank * n + i, 0);
    CHECK(bad == 0, "reduce_scatter_block count %d: %d wrong", n, bad);
    free(rin);
  }
  expect_counts(ar, 2 * kNCounts, 0, __LINE__);
  expect_counts(re, (unsigned long long)calls_reduce, 0, __LINE__);
  expect_counts(iar, kNCounts, 0, __LINE__);
  expect_counts(sc, kNCounts, 0, __LINE__);
  expect_counts(ex, kNCounts, 0, __LINE__);
  expect_counts(rsb, kNCounts, 0, __LINE__);
  free(in);
  free(out);
  free(din);
  free(dout);
}

static void test_matrices(void) {
  MPI_Op op;
  MPI_Op_create(mat_op, 0, &op);
  enum { kMats = 3000 };
  int* in = malloc(4 * kMats * sizeof(int));
  int* out = malloc(4 * kMats * sizeof(int));
  /* The test can fail: the product in the other order differs. */
  if (size > 1) {
    int a[4], b[4], ab[4], ba[4];
    mval(0, 0, a);
    mval(1, 0, b);
    mat_mul(a, b, ab);
    mat_mul(b, a, ba);
    CHECK(memcmp(ab, ba, sizeof ab) != 0, "the matrices commute");
  }
  struct Mark ar = mark("MPI_Allreduce"), re = mark("MPI_Reduce"), sc = mark("MPI_Scan");
  const int counts[] = {1, 5, kMats};
  for (int k = 0; k < 3; ++k) {
    const int n = counts[k];
    for (int i = 0; i < n; ++i) mval(rank, i, in + 4 * i);
    int bad = 0, e[4];
    MPI_Allreduce(in, out, n, mat_type, op, MPI_COMM_WORLD);
    for (int i = 0; i < n; ++i) mexpect(size, i, e), bad += memcmp(e, out + 4 * i, sizeof e) != 0;
    CHECK(bad == 0, "matrix allreduce count %d: %d wrong", n, bad);

    const int roots[] = {0, size - 1};
    for (int j = 0; j < 2; ++j) {
      memset(out, 0, 4 * (size_t)n * sizeof(int));
      MPI_Reduce(in, out, n, mat_type, op, roots[j], MPI_COMM_WORLD);
      bad = 0;
      for (int i = 0; rank == roots[j] && i < n; ++i)
        mexpect(size, i, e), bad += memcmp(e, out + 4 * i, sizeof e) != 0;
      CHECK(bad == 0, "matrix reduce count %d root %d: %d wrong", n, roots[j], bad);
    }

    MPI_Scan(in, out, n, mat_type, op, MPI_COMM_WORLD);
    bad = 0;
    for (int i = 0; i < n; ++i)
      mexpect(rank + 1, i, e), bad += memcmp(e, out + 4 * i, sizeof e) != 0;
    CHECK(bad == 0, "matrix scan count %d: %d wrong", n, bad);
  }
  expect_counts(ar, 3, 0, __LINE__);
  expect_counts(re, 6, 0, __LINE__);
  expect_counts(sc, 3, 0, __LINE__);
  MPI_Op_free(&op);
  CHECK(op == MPI_OP_NULL, "MPI_Op_free left the handle");
  free(in);
  free(out);
}

/* An op freed while a reduction with it is pending, then a new one. */
static void test_free(void) {
  MPI_Op op;
  MPI_Op_create(max_abs, 1, &op);
  enum { n = 7 };
  int in[n], out[n];
  for (int i = 0; i < n; ++i) in[i] = ival(rank, i);
  struct Mark iar = mark("MPI_Iallreduce"), ar = mark("MPI_Allreduce");
  MPI_Request req;
  MPI_Iallreduce(in, out, n, MPI_INT, op, MPI_COMM_WORLD, &req);
  MPI_Op_free(&op);
  MPI_Wait(&req, MPI_STATUS_IGNORE);
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += out[i] != iexpect(0, size, i, 0);
  CHECK(bad == 0, "iallreduce with its op freed: %d wrong", bad);

  MPI_Op_create(min_abs_int, 1, &op);
  MPI_Allreduce(in, out, n, MPI_INT, op, MPI_COMM_WORLD);
  bad = 0;
  for (int i = 0; i < n; ++i) bad += out[i] != iexpect(0, size, i, 1);
  CHECK(bad == 0, "a new op after a free: %d wrong", bad);
  MPI_Op_free(&op);
  expect_counts(iar, 1, 0, __LINE__);
  expect_counts(ar, 1, 0, __LINE__);
}

/* ---- datatypes with gaps (the shim packs their elements) ----------------- */

/* A case: a datatype whose elements have gaps, an op on it, rank r's
 * element i, and one element of the op computed here (inout = in op inout).
 * mask: which bytes of an element are data (1) and which gaps (0). */
struct Gapped {
  const char* name;
  MPI_Datatype type;
  MPI_Aint extent;
  int commute;
  MPI_User_function* fn;
  void (*value)(int r, int i, char* elem);
  void (*apply)(const char* in, char* inout);
  unsigned char mask[64];
};
enum { kSentinel = 0xa5 };
static struct Gapped gapped[4];

/* The user functions: elements as the datatype lays them out. */
static void apply_all(const struct Gapped* g, void* in, void* inout, int len, MPI_Datatype t) {
  if (t != g->type) {
    ++wrong_type;
    return;
  }
  for (int i = 0; i < len; ++i) g->apply((char*)in + i * g->extent, (char*)inout + i * g->extent);
}
static void op0(void* a, void* b, int* len, MPI_Datatype* t) { apply_all(&gapped[0], a, b, *len, *t); }
static void op1(void* a, void* b, int* len, MPI_Datatype* t) { apply_all(&gapped[1], a, b, *len, *t); }
static void op2(void* a, void* b, int* len, MPI_Datatype* t) { apply_all(&gapped[2], a, b, *len, *t); }
static void op3(void* a, void* b, int* len, MPI_Datatype* t) { apply_all(&gapped[3], a, b, *len, *t); }

/* 0: two doubles 16 bytes apart in 32 (a vector, resized): (sum, max). */
static void strided_value(int r, int i, char* e) {
  const double x = r + i, y = (r * 5 + i) % 7;
  memcpy(e, &x, 8);
  memcpy(e + 16, &y, 8);
}
static void strided_apply(const char* in, char* io) {
  double a[2], b[2];
  memcpy(&a[0], in, 8), memcpy(&a[1], in + 16, 8), memcpy(&b[0], io, 8), memcpy(&b[1], io + 16, 8);
  b[0] += a[0];
  b[1] = a[1] > b[1] ? a[1] : b[1];
  memcpy(io, &b[0], 8), memcpy(io + 16, &b[1], 8);
}

/* 1: struct { double d; int n; } (12 bytes of data, padded to 16): (sum, min). */
struct Padded {
  double d;
  int n;
};
static void padded_value(int r, int i, char* e) {
  struct Padded* p = (struct Padded*)e;
  p->d = 0.5 * (r + 2 * i);
  p->n = (r * 3 + i) % 5 - 2;
}
static void padded_apply(const char* in, char* io) {
  const struct Padded* a = (const struct Padded*)in;
  struct Padded* b = (struct Padded*)io;
  b->d += a->d;
  if (a->n < b->n) b->n = a->n;
}

/* 2: a 2x2 int matrix, its entries 8 bytes apart in 32 (a vector,
 * resized): the product, which does not commute. */
static void strided_mat_value(int r, int i, char* e) {
  int m[4];
  mval(r, i, m);
  for (int k = 0; k < 4; ++k) memcpy(e + 8 * k, &m[k], 4);
}
static void strided_mat_apply(const char* in, char* io) {
  int a[4], b[4];
  for (int k = 0; k < 4; ++k) memcpy(&a[k], in + 8 * k, 4), memcpy(&b[k], io + 8 * k, 4);
  mat_mul(a, b, b);
  for (int k = 0; k < 4; ++k) memcpy(io + 8 * k, &b[k], 4);
}

/* 3: the affine map x -> a x + b as struct { int gap; int a; long long b; },
 * the gap left out of the datatype (its data starts 4 bytes in, and 4 of
 * padding lie between a and b): composition in rank order (the lower
 * ranks' map first), which does not commute. */
struct Affine {
  int gap;
  int a;
  long long b;
};
/* Fields by memcpy: Open MPI hands the user function elements of this
 * type at addresses 4 mod 8 (its temporary buffers start at the type's
 * true lower bound, 4), where a struct Affine access is misaligned (UBSan). */
static void affine_value(int r, int i, char* e) {
  const int a = r % 2 ? 2 : -1;
  const long long b = r * 3 + i;
  memcpy(e + offsetof(struct Affine, a), &a, sizeof a);
  memcpy(e + offsetof(struct Affine, b), &b, sizeof b);
}
static void affine_apply(const char* in, char* io) {
  int fa, ga;
  long long fb, gb;
  memcpy(&fa, in + offsetof(struct Affine, a), sizeof fa);
  memcpy(&fb, in + offsetof(struct Affine, b), sizeof fb);
  memcpy(&ga, io + offsetof(struct Affine, a), sizeof ga);
  memcpy(&gb, io + offsetof(struct Affine, b), sizeof gb);
  gb = (long long)ga * fb + gb;
  ga = ga * fa;
  memcpy(io + offsetof(struct Affine, a), &ga, sizeof ga);
  memcpy(io + offsetof(struct Affine, b), &gb, sizeof gb);
}

static MPI_Datatype resized(MPI_Datatype t, MPI_Aint extent) {
  MPI_Datatype r;
  MPI_Type_create_resized(t, 0, extent, &r);
  MPI_Type_free(&t);
  MPI_Type_commit(&r);
  return r;
}

static void make_gapped(void) {
  MPI_Datatype t;
  MPI_Type_vector(2, 1, 2, MPI_DOUBLE, &t);
  gapped[0] = (struct Gapped){"strided (sum, max)", resized(t, 32), 32, 1, op0, strided_value,
                              strided_apply, {0}};
  const int pl[2] = {1, 1};
  const MPI_Aint pd[2] = {offsetof(struct Padded, d), offsetof(struct Padded, n)};
  const MPI_Datatype pt[2] = {MPI_DOUBLE, MPI_INT};
  MPI_Type_create_struct(2, pl, pd, pt, &t);
  gapped[1] = (struct Gapped){"padded struct (sum, min)", resized(t, sizeof(struct Padded)),
                              sizeof(struct Padded), 1, op1, padded_value, padded_apply, {0}};
  MPI_Type_vector(4, 1, 2, MPI_INT, &t);
  gapped[2] = (struct Gapped){"strided matrix product", resized(t, 32), 32, 0, op2,
                              strided_mat_value, strided_mat_apply, {0}};
  const MPI_Aint ad[2] = {offsetof(struct Affine, a), offsetof(struct Affine, b)};
  const MPI_Datatype at[2] = {MPI_INT, MPI_LONG_LONG};
  MPI_Type_create_struct(2, pl, ad, at, &t);
  gapped[3] = (struct Gapped){"affine composition", resized(t, sizeof(struct Affine)),
                              sizeof(struct Affine), 0, op3, affine_value, affine_apply, {0}};
  /* The data bytes: what MPI_Unpack writes into an element. */
  for (int c = 0; c < 4; ++c) {
    struct Gapped* g = &gapped[c];
    int bytes = 0, position = 0;
    MPI_Type_size(g->type, &bytes);
    unsigned char ones[64];
    memset(ones, 1, sizeof ones);
    MPI_Unpack(ones, bytes, &position, g->mask, 1, g->type, MPI_COMM_SELF);
  }
}

/* Elements first .. first + n - 1 of rank r's input into buf's elements. */
static void fill(const struct Gapped* g, char* buf, int n, int first, int r) {
  for (int j = 0; j < n; ++j) g->value(r, first + j, buf + j * g->extent);
}
/* The n result elements at buf: element first + j over ranks lo .. hi - 1
 * in rank order, the gap bytes still the sentinel. */
static void check_gapped(const struct Gapped* g, const char* buf, int n, int first, int lo,
                         int hi, const char* what) {
  int bad = 0, gaps = 0;
  for (int j = 0; j < n; ++j) {
    char e[64], x[64];
    g->value(lo, first + j, e);
    for (int r = lo + 1; r < hi; ++r) g->value(r, first + j, x), g->apply(e, x), memcpy(e, x, 64);
    const char* got = buf + j * g->extent;
    for (MPI_Aint k = 0; k < g->extent; ++k) {
      if (g->mask[k])
        bad += got[k] != e[k];
      else
        gaps += (unsigned char)got[k] != kSentinel;
    }
  }
  CHECK(bad == 0 && gaps == 0, "%s, %s, count %d: %d data bytes wrong, %d gap bytes written",
        g->name, what, n, bad, gaps);
}

/* Every reduction with case g's op at count n: each once from sendbuf,
 * once in place and once non-blocking (and persistent where Open MPI has
 * it); counted in calls[] (the order of kGappedFns). */
static const char* const kGappedFns[] = {
    "MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce", "MPI_Ireduce",
    "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter_block", "MPI_Reduce_scatter",
    "MPI_Ireduce_scatter", "MPI_Scan", "MPI_Iscan", "MPI_Exscan", "MPI_Iexscan",
    "MPIX_Allreduce_init"};
enum { kGappedFnCount = sizeof kGappedFns / sizeof kGappedFns[0] };

static void run_gapped(const struct Gapped* g, MPI_Op op, int n, unsigned long long* calls) {
  const int total = n * size + size * (size - 1) / 2; /* reduce_scatter: n + i for rank i */
  char* in = malloc((size_t)total * g->extent);
  char* out = malloc((size_t)total * g->extent);
  int* counts = malloc(size * sizeof(int));
  int mine = 0; /* reduce_scatter: this rank's first element */
  for (int i = 0; i < size; ++i) counts[i] = n + i, mine += i < rank ? n + i : 0;
  MPI_Request req;
  const size_t all = (size_t)total * g->extent;
#define FRESH(inplace, count) \
  (memset(out, kSentinel, all), memset(in, kSentinel, all), fill(g, (inplace) ? out : in, count, 0, rank))
#define WAIT() MPI_Wait(&req, MPI_STATUS_IGNORE)

  FRESH(0, n), MPI_Allreduce(in, out, n, g->type, op, MPI_COMM_WORLD), calls[0]++;
  check_gapped(g, out, n, 0, 0, size, "allreduce");
  FRESH(1, n), MPI_Allreduce(MPI_IN_PLACE, out, n, g->type, op, MPI_COMM_WORLD), calls[0]++;
  check_gapped(g, out, n, 0, 0, size, "allreduce in place");
  FRESH(0, n), MPI_Iallreduce(in, out, n, g->type, op, MPI_COMM_WORLD, &req), WAIT(), calls[1]++;
  check_gapped(g, out, n, 0, 0, size, "iallreduce");

  FRESH(0, n), MPI_Reduce(in, out, n, g->type, op, 0, MPI_COMM_WORLD), calls[2]++;
  if (rank == 0) check_gapped(g, out, n, 0, 0, size, "reduce at 0");
  const int last = size - 1;
  FRESH(rank == last, n);
  MPI_Reduce(rank == last ? MPI_IN_PLACE : in, out, n, g->type, op, last, MPI_COMM_WORLD), calls[2]++;
  if (rank == last) check_gapped(g, out, n, 0, 0, size, "reduce in place at the last rank");
  FRESH(0, n), MPI_Ireduce(in, out, n, g->type, op, last, MPI_COMM_WORLD, &req), WAIT(), calls[3]++;
  if (rank == last) check_gapped(g, out, n, 0, 0, size, "ireduce at the last rank");

  FRESH(0, n * size), MPI_Reduce_scatter_block(in, out, n, g->type, op, MPI_COMM_WORLD), calls[4]++;
  check_gapped(g, out, n, rank * n, 0, size, "reduce_scatter_block");
  FRESH(1, n * size);
  MPI_Reduce_scatter_block(MPI_IN_PLACE, out, n, g->type, op, MPI_COMM_WORLD), calls[4]++;
  check_gapped(g, out, n, rank * n, 0, size, "reduce_scatter_block in place");
  FRESH(0, n * size);
  MPI_Ireduce_scatter_block(in, out, n, g->type, op, MPI_COMM_WORLD, &req), WAIT(), calls[5]++;
  check_gapped(g, out, n, rank * n, 0, size, "ireduce_scatter_block");

  FRESH(0, total), MPI_Reduce_scatter(in, out, counts, g->type, op, MPI_COMM_WORLD), calls[6]++;
  check_gapped(g, out, counts[rank], mine, 0, size, "reduce_scatter");
  FRESH(1, total);
  MPI_Reduce_scatter(MPI_IN_PLACE, out, counts, g->type, op, MPI_COMM_WORLD), calls[6]++;
  check_gapped(g, out, counts[rank], mine, 0, size, "reduce_scatter in place");
  FRESH(0, total);
  MPI_Ireduce_scatter(in, out, counts, g->type, op, MPI_COMM_WORLD, &req), WAIT(), calls[7]++;
  check_gapped(g, out, counts[rank], mine, 0, size, "ireduce_scatter");

  FRESH(0, n), MPI_Scan(in, out, n, g->type, op, MPI_COMM_WORLD), calls[8]++;
  check_gapped(g, out, n, 0, 0, rank + 1, "scan");
  FRESH(1, n), MPI_Scan(MPI_IN_PLACE, out, n, g->type, op, MPI_COMM_WORLD), calls[8]++;
  check_gapped(g, out, n, 0, 0, rank + 1, "scan in place");
  FRESH(0, n), MPI_Iscan(in, out, n, g->type, op, MPI_COMM_WORLD, &req), WAIT(), calls[9]++;
  check_gapped(g, out, n, 0, 0, rank + 1, "iscan");

  /* Rank 0's exscan result is undefined: not checked. */
  FRESH(0, n), MPI_Exscan(in, out, n, g->type, op, MPI_COMM_WORLD), calls[10]++;
  if (rank > 0) check_gapped(g, out, n, 0, 0, rank, "exscan");
  FRESH(1, n), MPI_Exscan(MPI_IN_PLACE, out, n, g->type, op, MPI_COMM_WORLD), calls[10]++;
  if (rank > 0) check_gapped(g, out, n, 0, 0, rank, "exscan in place");
  FRESH(0, n), MPI_Iexscan(in, out, n, g->type, op, MPI_COMM_WORLD, &req), WAIT(), calls[11]++;
  if (rank > 0) check_gapped(g, out, n, 0, 0, rank, "iexscan");

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
  /* Started twice, the input refilled in between (repacked at each start). */
  MPIX_Allreduce_init(in, out, n, g->type, op, MPI_COMM_WORLD, MPI_INFO_NULL, &req), calls[12]++;
  for (int start = 0; start < 2; ++start) {
    FRESH(0, n);
    MPI_Start(&req);
    WAIT();
    check_gapped(g, out, n, 0, 0, size, "persistent allreduce");
  }
  MPI_Request_free(&req);
#endif
#undef FRESH
#undef WAIT
  free(in);
  free(out);
  free(counts);
}

static void test_gapped(void) {
  make_gapped();
  struct Mark marks[kGappedFnCount];
  unsigned long long calls[kGappedFnCount] = {0};
  for (int f = 0; f < kGappedFnCount; ++f) marks[f] = mark(kGappedFns[f]);
  const int counts[] = {1, 5, 3000};
  for (int c = 0; c < 4; ++c) {
    MPI_Op op;
    MPI_Op_create(gapped[c].fn, gapped[c].commute, &op);
    for (int k = 0; k < 3; ++k) run_gapped(&gapped[c], op, counts[k], calls);
    MPI_Op_free(&op);
  }
  for (int f = 0; f < kGappedFnCount; ++f) expect_counts(marks[f], calls[f], 0, __LINE__);
  for (int c = 0; c < 4; ++c) MPI_Type_free(&gapped[c].type);
}

/* Contiguous elements of sizes no libcoll datatype has: 12 bytes go packed
 * into 16, 40 bytes (more than any has) to MPI. */
static void test_sizes(void) {
  MPI_Op op;
  MPI_Op_create(sum_ints, 1, &op);
  int in[20], out[20];
  for (int i = 0; i < 20; ++i) in[i] = rank * 10 + i;
  struct Mark ar = mark("MPI_Allreduce");
  MPI_Allreduce(in, out, 2, int3_type, op, MPI_COMM_WORLD);
  int bad = 0;
  for (int i = 0; i < 6; ++i) bad += out[i] != 10 * size * (size - 1) / 2 + size * i;
  CHECK(bad == 0, "3-int elements: %d wrong", bad);
  expect_counts(ar, 1, 0, __LINE__);
  ar = mark("MPI_Allreduce");
  MPI_Allreduce(in, out, 2, int10_type, op, MPI_COMM_WORLD);
  bad = 0;
  for (int i = 0; i < 20; ++i) bad += out[i] != 10 * size * (size - 1) / 2 + size * i;
  CHECK(bad == 0, "10-int elements: %d wrong", bad);
  expect_counts(ar, 0, 1, __LINE__);
  MPI_Op_free(&op);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  lookup("coll_mpi_counts", &counts_fn, sizeof counts_fn);
  coll_mpi_active_fn active_fn = NULL;
  lookup("coll_mpi_active", &active_fn, sizeof active_fn);
  const int active = active_fn && active_fn();
  if (getenv("PMPI_TEST_EXPECT_SHIM")) CHECK(active, "the shim is not loaded or not active");
  if (!active) counts_fn = NULL; /* nothing to count */
  if (rank == 0)
    printf("pmpi_userops: np %d, shim %s\n", size, active ? "loaded, active" : "not loaded");
  MPI_Type_contiguous(4, MPI_INT, &mat_type);
  MPI_Type_commit(&mat_type);
  MPI_Type_contiguous(3, MPI_INT, &int3_type);
  MPI_Type_commit(&int3_type);
  MPI_Type_contiguous(10, MPI_INT, &int10_type);
  MPI_Type_commit(&int10_type);

  MPI_Op op;
  MPI_Op_create(max_abs, 1, &op);
  test_commutative(op);
  MPI_Op_free(&op);
  test_matrices();
  test_free();
  test_gapped();
  test_sizes();
  CHECK(wrong_type == 0, "%d calls of a user function with another datatype", wrong_type);

  MPI_Type_free(&mat_type);
  MPI_Type_free(&int3_type);
  MPI_Type_free(&int10_type);
  int all = 0;
  PMPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all == 0)
      printf("pmpi_userops: all checks passed at np %d\n", size);
    else
      printf("pmpi_userops: %d failed checks at np %d\n", all, size);
  }
  MPI_Finalize();
  return all != 0;
}
