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
 *  - a datatype with no libcoll element of its size (3 ints): passed to MPI.
 *
 * Where the shim is loaded each function must have served (or passed) the
 * calls made. Without the shim the same program checks plain MPI (the
 * reference run). Prints "pmpi_userops: all checks passed at np N". */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_mpi.h"
#include "pmpi_check.h"

static int rank, size, errors;
static coll_mpi_counts_fn counts_fn;
static MPI_Datatype mat_type, int3_type;
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

static void sum3(void* in, void* inout, int* len, MPI_Datatype* t) {
  if (*t != int3_type) {
    ++wrong_type;
    return;
  }
  for (int i = 0; i < 3 * *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
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

/* 12-byte elements: no libcoll datatype carries one whole; MPI applies it. */
static void test_passed(void) {
  MPI_Op op;
  MPI_Op_create(sum3, 1, &op);
  int in[6], out[6];
  for (int i = 0; i < 6; ++i) in[i] = rank * 10 + i;
  struct Mark ar = mark("MPI_Allreduce");
  MPI_Allreduce(in, out, 2, int3_type, op, MPI_COMM_WORLD);
  int bad = 0;
  for (int i = 0; i < 6; ++i) bad += out[i] != 10 * size * (size - 1) / 2 + size * i;
  CHECK(bad == 0, "3-int elements: %d wrong", bad);
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

  MPI_Op op;
  MPI_Op_create(max_abs, 1, &op);
  test_commutative(op);
  MPI_Op_free(&op);
  test_matrices();
  test_free();
  test_passed();
  CHECK(wrong_type == 0, "%d calls of a user function with another datatype", wrong_type);

  MPI_Type_free(&mat_type);
  MPI_Type_free(&int3_type);
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
