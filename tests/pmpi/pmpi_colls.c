/* Every MPI collective through the PMPI shim (libcoll_mpi.so), against
 * closed forms.
 *
 * Built against MPI only; run as `mpirun -x LD_PRELOAD=libcoll_mpi.so
 * pmpi_colls`, and without the shim as the reference (plain Open MPI must
 * pass the same checks). For MPI_Reduce, Scan, Exscan, Reduce_scatter(_block),
 * Allgather(v), Gather(v), Scatter(v), Alltoall(v) and their I-forms:
 * counts 0, 1, 7, 1000 and 70000 (larger than a slot), every root, MPI_IN_PLACE
 * wherever MPI allows it, v-forms with uneven counts, zero counts and gaps
 * between blocks (which must stay untouched), and a non-contiguous datatype
 * (an int with an extent of two ints) on the receive or send side, which the
 * shim stages. Where the shim is loaded (coll_mpi_counts found with dlsym)
 * each function must have served exactly the calls made, and passed none to
 * MPI; MPI_Alltoallw must have been passed (a datatype per peer).
 *
 * Prints "pmpi_colls: all checks passed at np N" on rank 0. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_mpi.h"
#include "pmpi_check.h"

static int rank, size, errors;

/* Calls made of each function, to compare with the shim's counts. */
enum { kReduce, kScan, kExscan, kRsb, kRs, kAllgather, kAllgatherv, kGather, kGatherv, kScatter,
       kScatterv, kAlltoall, kAlltoallv, kFns };
static const char* names[kFns] = {"Reduce", "Scan", "Exscan", "Reduce_scatter_block",
                                  "Reduce_scatter", "Allgather", "Allgatherv", "Gather",
                                  "Gatherv", "Scatter", "Scatterv", "Alltoall", "Alltoallv"};
static unsigned long long made[kFns][2]; /* [fn][non-blocking] */

/* The value rank r contributes at element i. */
static int val(int r, long i) { return r * 1000 + (int)(i % 100000); }

/* A blocking call or its I-form and a wait. */
#define RUN(fn, nb, blocking, ...)                                  \
  do {                                                              \
    made[fn][nb]++;                                                 \
    if (nb) {                                                       \
      MPI_Request req_;                                             \
      int rc_ = __VA_ARGS__;                                        \
      CHECK(rc_ == MPI_SUCCESS, "%s: rc %d", names[fn], rc_);       \
      MPI_Wait(&req_, MPI_STATUS_IGNORE);                           \
    } else {                                                        \
      int rc_ = blocking;                                           \
      CHECK(rc_ == MPI_SUCCESS, "%s: rc %d", names[fn], rc_);       \
    }                                                               \
  } while (0)

static MPI_Datatype strided; /* an int with the extent of two: every other int */

static int* ints(long n, int fill) {
  int* p = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  for (long i = 0; i < n; ++i) p[i] = fill;
  return p;
}

static void reductions(int count, int nb) {
  const long n = size;
  int* in = ints(n * count, 0);
  int* out = ints(n * count, -1);
  for (long i = 0; i < n * count; ++i) in[i] = val(rank, i);
  /* reduce, every root, also in place at the root; a double max too */
  for (int root = 0; root < size; ++root) {
    for (int inplace = 0; inplace < 2; ++inplace) {
      for (long i = 0; i < count; ++i) out[i] = inplace && rank == root ? in[i] : -1;
      const void* s = inplace && rank == root ? MPI_IN_PLACE : in;
      RUN(kReduce, nb, MPI_Reduce(s, out, count, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD),
          MPI_Ireduce(s, out, count, MPI_INT, MPI_SUM, root, MPI_COMM_WORLD, &req_));
      for (long i = 0; rank == root && i < count; ++i)
        CHECK(out[i] == 1000 * size * (size - 1) / 2 + size * (int)(i % 100000),
              "reduce root %d count %d [%ld] = %d", root, count, i, out[i]);
      for (long i = 0; rank != root && i < count; ++i)
        CHECK(out[i] == -1, "reduce wrote a non-root's recvbuf");
    }
  }
  {
    double* d = malloc(sizeof(double) * (size_t)(count + 1));
    double* m = malloc(sizeof(double) * (size_t)(count + 1));
    for (long i = 0; i < count; ++i) d[i] = (double)((rank * 7 + i) % size) + 0.5;
    RUN(kReduce, nb, MPI_Reduce(d, m, count, MPI_DOUBLE, MPI_MAX, size - 1, MPI_COMM_WORLD),
        MPI_Ireduce(d, m, count, MPI_DOUBLE, MPI_MAX, size - 1, MPI_COMM_WORLD, &req_));
    for (long i = 0; rank == size - 1 && i < count; ++i)
      CHECK(m[i] == (size - 1) + 0.5, "reduce max [%ld] = %g", i, m[i]);
    free(d);
    free(m);
  }
  /* scan and exscan, also in place */
  for (int inplace = 0; inplace < 2; ++inplace) {
    for (long i = 0; i < count; ++i) out[i] = inplace ? in[i] : -1;
    const void* s = inplace ? MPI_IN_PLACE : in;
    RUN(kScan, nb, MPI_Scan(s, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        MPI_Iscan(s, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req_));
    for (long i = 0; i < count; ++i)
      CHECK(out[i] == 1000 * rank * (rank + 1) / 2 + (rank + 1) * (int)(i % 100000),
            "scan count %d [%ld] = %d", count, i, out[i]);
    for (long i = 0; i < count; ++i) out[i] = inplace ? in[i] : -1;
    RUN(kExscan, nb, MPI_Exscan(s, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        MPI_Iexscan(s, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req_));
    for (long i = 0; rank > 0 && i < count; ++i)
      CHECK(out[i] == 1000 * (rank - 1) * rank / 2 + rank * (int)(i % 100000),
            "exscan count %d [%ld] = %d", count, i, out[i]);
  }
  /* reduce_scatter_block, also in place */
  for (int inplace = 0; inplace < 2; ++inplace) {
    for (long i = 0; i < n * count; ++i) out[i] = inplace ? in[i] : -1;
    const void* s = inplace ? MPI_IN_PLACE : in;
    RUN(kRsb, nb, MPI_Reduce_scatter_block(s, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        MPI_Ireduce_scatter_block(s, out, count, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req_));
    for (long i = 0; i < count; ++i) {
      const long j = (long)rank * count + i;
      CHECK(out[i] == 1000 * size * (size - 1) / 2 + size * (int)(j % 100000),
            "reduce_scatter_block count %d [%ld] = %d", count, i, out[i]);
    }
  }
  /* reduce_scatter, uneven: rank 1 gets nothing, rank i count + i */
  {
    int* counts = malloc(sizeof(int) * (size_t)size);
    long total = 0, before = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = r == 1 ? 0 : count + r;
      if (r < rank) before += counts[r];
      total += counts[r];
    }
    int* big = ints(total, 0);
    int* res = ints(total, -1);
    for (long i = 0; i < total; ++i) big[i] = val(rank, i);
    for (int inplace = 0; inplace < 2; ++inplace) {
      if (inplace) memcpy(res, big, sizeof(int) * (size_t)total);
      const void* s = inplace ? MPI_IN_PLACE : big;
      RUN(kRs, nb, MPI_Reduce_scatter(s, res, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
          MPI_Ireduce_scatter(s, res, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req_));
      for (long i = 0; i < counts[rank]; ++i)
        CHECK(res[i] == 1000 * size * (size - 1) / 2 + size * (int)((before + i) % 100000),
              "reduce_scatter count %d [%ld] = %d", count, i, res[i]);
    }
    free(big);
    free(res);
    free(counts);
  }
  free(in);
  free(out);
}

/* Blocks of count ints from every rank, into a buffer of the datatype
 * (MPI_INT or strided: every other int). */
static void gathers(int count, int nb, MPI_Datatype rtype) {
  const int step = rtype == strided ? 2 : 1;
  const long n = size;
  int* mine = ints(count, 0);
  for (long i = 0; i < count; ++i) mine[i] = val(rank, i);
  int* all = ints(n * count * step, -1);
  /* allgather, also in place */
  for (int inplace = 0; inplace < 2; ++inplace) {
    for (long i = 0; i < n * count * step; ++i) all[i] = -1;
    if (inplace)
      for (long i = 0; i < count; ++i) all[((long)rank * count + i) * step] = mine[i];
    const void* s = inplace ? MPI_IN_PLACE : mine;
    RUN(kAllgather, nb,
        MPI_Allgather(s, count, MPI_INT, all, count, rtype, MPI_COMM_WORLD),
        MPI_Iallgather(s, count, MPI_INT, all, count, rtype, MPI_COMM_WORLD, &req_));
    for (int r = 0; r < size; ++r)
      for (long i = 0; i < count; ++i) {
        const long at = ((long)r * count + i) * step;
        CHECK(all[at] == val(r, i), "allgather count %d from %d [%ld] = %d", count, r, i, all[at]);
        if (step == 2) CHECK(all[at + 1] == -1, "allgather wrote between strided elements");
      }
  }
  /* gather, every root, also in place */
  for (int root = 0; root < size; ++root) {
    for (int inplace = 0; inplace < 2; ++inplace) {
      for (long i = 0; i < n * count * step; ++i) all[i] = -1;
      const int ip = inplace && rank == root;
      if (ip)
        for (long i = 0; i < count; ++i) all[((long)rank * count + i) * step] = mine[i];
      const void* s = ip ? MPI_IN_PLACE : mine;
      RUN(kGather, nb,
          MPI_Gather(s, count, MPI_INT, all, count, rtype, root, MPI_COMM_WORLD),
          MPI_Igather(s, count, MPI_INT, all, count, rtype, root, MPI_COMM_WORLD, &req_));
      for (int r = 0; rank == root && r < size; ++r)
        for (long i = 0; i < count; ++i) {
          const long at = ((long)r * count + i) * step;
          CHECK(all[at] == val(r, i), "gather root %d count %d from %d [%ld] = %d", root, count,
                r, i, all[at]);
        }
    }
  }
  /* scatter, every root, also in place (the root's block stays in sendbuf):
   * the root sends from a buffer of rtype, every rank receives ints */
  for (int root = 0; root < size; ++root) {
    for (int inplace = 0; inplace < 2; ++inplace) {
      for (long i = 0; i < n * count * step; ++i) all[i] = -1;
      for (int r = 0; rank == root && r < size; ++r)
        for (long i = 0; i < count; ++i) all[((long)r * count + i) * step] = val(r, i) + 7;
      int* got = ints(count, -1);
      const int ip = inplace && rank == root;
      void* rb = ip ? MPI_IN_PLACE : got;
      RUN(kScatter, nb,
          MPI_Scatter(all, count, rtype, rb, count, MPI_INT, root, MPI_COMM_WORLD),
          MPI_Iscatter(all, count, rtype, rb, count, MPI_INT, root, MPI_COMM_WORLD, &req_));
      for (long i = 0; !ip && i < count; ++i)
        CHECK(got[i] == val(rank, i) + 7, "scatter root %d count %d [%ld] = %d", root, count, i,
              got[i]);
      free(got);
    }
  }
  free(all);
  free(mine);
}

/* v-forms: rank r's block has cnt(r) ints; blocks placed with gaps of 3
 * elements between them, which must keep their -1. */
static int cnt(int r, int count) { return r == 1 ? 0 : count + r; }

static void vgathers(int count, int nb) {
  int* counts = malloc(sizeof(int) * (size_t)size);
  int* displs = malloc(sizeof(int) * (size_t)size);
  long total = 0;
  for (int r = 0; r < size; ++r) {
    counts[r] = cnt(r, count);
    displs[r] = (int)total + 3 * (r + 1);
    total = displs[r] + counts[r];
  }
  total += 3;
  int* mine = ints(counts[rank], 0);
  for (long i = 0; i < counts[rank]; ++i) mine[i] = val(rank, i);
  int* all = ints(total, -1);
  int* expect = ints(total, -1);
  for (int r = 0; r < size; ++r)
    for (long i = 0; i < counts[r]; ++i) expect[displs[r] + i] = val(r, i);
  for (int inplace = 0; inplace < 2; ++inplace) {
    for (long i = 0; i < total; ++i) all[i] = -1;
    if (inplace) memcpy(all + displs[rank], mine, sizeof(int) * (size_t)counts[rank]);
    const void* s = inplace ? MPI_IN_PLACE : mine;
    RUN(kAllgatherv, nb,
        MPI_Allgatherv(s, counts[rank], MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD),
        MPI_Iallgatherv(s, counts[rank], MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD,
                        &req_));
    for (long i = 0; i < total; ++i)
      CHECK(all[i] == expect[i], "allgatherv count %d [%ld] = %d, want %d", count, i, all[i],
            expect[i]);
  }
  for (int root = 0; root < size; ++root) {
    for (int inplace = 0; inplace < 2; ++inplace) {
      for (long i = 0; i < total; ++i) all[i] = -1;
      const int ip = inplace && rank == root;
      if (ip) memcpy(all + displs[rank], mine, sizeof(int) * (size_t)counts[rank]);
      const void* s = ip ? MPI_IN_PLACE : mine;
      RUN(kGatherv, nb,
          MPI_Gatherv(s, counts[rank], MPI_INT, all, counts, displs, MPI_INT, root,
                      MPI_COMM_WORLD),
          MPI_Igatherv(s, counts[rank], MPI_INT, all, counts, displs, MPI_INT, root,
                       MPI_COMM_WORLD, &req_));
      for (long i = 0; rank == root && i < total; ++i)
        CHECK(all[i] == expect[i], "gatherv root %d count %d [%ld] = %d, want %d", root, count, i,
              all[i], expect[i]);
      /* scatterv from the same layout */
      int* got = ints(counts[rank] + 1, -1);
      void* rb = ip ? MPI_IN_PLACE : got;
      RUN(kScatterv, nb,
          MPI_Scatterv(expect, counts, displs, MPI_INT, rb, counts[rank], MPI_INT, root,
                       MPI_COMM_WORLD),
          MPI_Iscatterv(expect, counts, displs, MPI_INT, rb, counts[rank], MPI_INT, root,
                        MPI_COMM_WORLD, &req_));
      for (long i = 0; !ip && i < counts[rank]; ++i)
        CHECK(got[i] == val(rank, i), "scatterv root %d count %d [%ld] = %d", root, count, i,
              got[i]);
      CHECK(ip || got[counts[rank]] == -1, "scatterv wrote past the block");
      free(got);
    }
  }
  free(all);
  free(expect);
  free(mine);
  free(counts);
  free(displs);
}

/* alltoall: the block for peer p holds val(me, p * count + i); the block
 * received from r holds val(r, me * count + i). */
static void alltoalls(int count, int nb, MPI_Datatype rtype) {
  const int step = rtype == strided ? 2 : 1;
  const long n = size;
  int* send = ints(n * count, 0);
  for (long i = 0; i < n * count; ++i) send[i] = val(rank, i);
  int* recv = ints(n * count * step, -1);
  for (int inplace = 0; inplace < 2; ++inplace) {
    for (long i = 0; i < n * count * step; ++i) recv[i] = inplace ? send[i / step] : -1;
    if (inplace && step == 2)
      for (long i = 0; i < n * count * step; ++i) recv[i] = i % 2 ? -1 : send[i / 2];
    const void* s = inplace ? MPI_IN_PLACE : send;
    RUN(kAlltoall, nb, MPI_Alltoall(s, count, MPI_INT, recv, count, rtype, MPI_COMM_WORLD),
        MPI_Ialltoall(s, count, MPI_INT, recv, count, rtype, MPI_COMM_WORLD, &req_));
    for (int r = 0; r < size; ++r)
      for (long i = 0; i < count; ++i) {
        const long at = ((long)r * count + i) * step;
        CHECK(recv[at] == val(r, (long)rank * count + i), "alltoall count %d from %d [%ld] = %d",
              count, r, i, recv[at]);
        if (step == 2) CHECK(recv[at + 1] == -1, "alltoall wrote between strided elements");
      }
  }
  free(send);
  free(recv);
}

/* alltoallv: a sends b c(a, b) ints, values val(a, b * 1000 + i); blocks laid
 * out with gaps of 2. */
static int c2(int a, int b, int count) { return count == 0 ? 0 : (a + 2 * b) % 3 + count / 2; }

static void alltoallvs(int count, int nb) {
  int *sc = malloc(sizeof(int) * (size_t)size), *sd = malloc(sizeof(int) * (size_t)size);
  int *rc = malloc(sizeof(int) * (size_t)size), *rd = malloc(sizeof(int) * (size_t)size);
  long st = 0, rt = 0;
  for (int p = 0; p < size; ++p) {
    sc[p] = c2(rank, p, count);
    sd[p] = (int)st + 2;
    st = sd[p] + sc[p];
    rc[p] = c2(p, rank, count);
    rd[p] = (int)rt + 2;
    rt = rd[p] + rc[p];
  }
  int* send = ints(st + 2, -5);
  for (int p = 0; p < size; ++p)
    for (long i = 0; i < sc[p]; ++i) send[sd[p] + i] = val(rank, p * 1000L + i);
  int* recv = ints(rt + 2, -1);
  RUN(kAlltoallv, nb,
      MPI_Alltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, MPI_COMM_WORLD),
      MPI_Ialltoallv(send, sc, sd, MPI_INT, recv, rc, rd, MPI_INT, MPI_COMM_WORLD, &req_));
  int* expect = ints(rt + 2, -1);
  for (int p = 0; p < size; ++p)
    for (long i = 0; i < rc[p]; ++i) expect[rd[p] + i] = val(p, rank * 1000L + i);
  for (long i = 0; i < rt + 2; ++i)
    CHECK(recv[i] == expect[i], "alltoallv count %d [%ld] = %d, want %d", count, i, recv[i],
          expect[i]);
  /* in place: the data to send is in recv, laid out as the result; the
   * counts are symmetric for that (MPI requires it) */
  for (int p = 0; p < size; ++p) rc[p] = c2(p, p, count) + c2(rank, rank, count);
  rt = 0;
  for (int p = 0; p < size; ++p) {
    rd[p] = (int)rt + 2;
    rt = rd[p] + rc[p];
  }
  free(recv);
  recv = ints(rt + 2, -1);
  for (int p = 0; p < size; ++p)
    for (long i = 0; i < rc[p]; ++i) recv[rd[p] + i] = val(rank, p * 1000L + i);
  RUN(kAlltoallv, nb,
      MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd, MPI_INT,
                    MPI_COMM_WORLD),
      MPI_Ialltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, recv, rc, rd, MPI_INT,
                     MPI_COMM_WORLD, &req_));
  for (int p = 0; p < size; ++p) {
    CHECK(recv[rd[p] - 1] == -1, "alltoallv in place wrote a gap");
    for (long i = 0; i < rc[p]; ++i)
      CHECK(recv[rd[p] + i] == val(p, rank * 1000L + i), "alltoallv in place from %d [%ld] = %d",
            p, i, recv[rd[p] + i]);
  }
  free(send);
  free(recv);
  free(expect);
  free(sc);
  free(sd);
  free(rc);
  free(rd);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  coll_mpi_counts_fn counts_fn = NULL;
  coll_mpi_active_fn active_fn = NULL;
  lookup("coll_mpi_counts", &counts_fn, sizeof counts_fn);
  lookup("coll_mpi_active", &active_fn, sizeof active_fn);
  const int active = active_fn && active_fn();
  if (rank == 0)
    printf("pmpi_colls: np %d, %s\n", size,
           counts_fn ? (active ? "shim loaded, active" : "shim loaded, inactive")
                     : "shim not loaded");
  MPI_Type_create_resized(MPI_INT, 0, 2 * (MPI_Aint)sizeof(int), &strided);
  MPI_Type_commit(&strided);

  const int counts[] = {0, 1, 7, 1000, 70000};
  for (size_t k = 0; k < sizeof counts / sizeof counts[0]; ++k) {
    for (int nb = 0; nb < 2; ++nb) {
      reductions(counts[k], nb);
      gathers(counts[k], nb, MPI_INT);
      gathers(counts[k], nb, strided);
      vgathers(counts[k], nb);
      alltoalls(counts[k], nb, MPI_INT);
      alltoalls(counts[k], nb, strided);
      alltoallvs(counts[k], nb);
    }
  }
  /* MPI_Alltoallw: a datatype per peer, passed to MPI */
  {
    int *one = malloc(sizeof(int) * (size_t)size), *d = malloc(sizeof(int) * (size_t)size);
    MPI_Datatype* t = malloc(sizeof(MPI_Datatype) * (size_t)size);
    int *s = ints(size, rank), *r = ints(size, -1);
    for (int p = 0; p < size; ++p) {
      one[p] = 1;
      d[p] = p * (int)sizeof(int);
      t[p] = MPI_INT;
    }
    MPI_Alltoallw(s, one, d, t, r, one, d, t, MPI_COMM_WORLD);
    for (int p = 0; p < size; ++p) CHECK(r[p] == p, "alltoallw from %d = %d", p, r[p]);
    free(one), free(d), free(t), free(s), free(r);
  }

  if (counts_fn) {
    for (int f = 0; f < kFns; ++f) {
      for (int nb = 0; nb < 2; ++nb) {
        char name[64];
        snprintf(name, sizeof name, "MPI_%s%s", nb ? "I" : "", names[f]);
        if (nb) name[5] = (char)(name[5] - 'A' + 'a'); /* MPI_Ireduce: the rest lower case */
        unsigned long long served = 0, passed = 0;
        CHECK(counts_fn(name, &served, &passed) == 0, "%s: not intercepted", name);
        const unsigned long long want = active ? made[f][nb] : 0;
        CHECK(served == want && passed == made[f][nb] - want,
              "%s: %llu served, %llu passed; %llu calls made", name, served, passed, made[f][nb]);
      }
    }
    unsigned long long served = 0, passed = 0;
    counts_fn("MPI_Alltoallw", &served, &passed);
    CHECK(served == 0 && passed == 1, "MPI_Alltoallw: %llu served, %llu passed", served, passed);
  }
  MPI_Type_free(&strided);
  int all = 0;
  MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (all == 0)
      printf("pmpi_colls: all checks passed at np %d\n", size);
    else
      printf("pmpi_colls: %d checks failed\n", all);
  }
  MPI_Finalize();
  return all == 0 ? 0 : 1;
}
