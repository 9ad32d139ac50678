/* coll_overlap: communication/computation overlap of a non-blocking
 * allreduce, as osu_iallreduce defines it, for libcoll's coll_iallreduce
 * and MPI_Iallreduce side by side (mpirun; one MPI_Barrier before every
 * timed call, for both).
 *
 *   t_pure     start + wait, nothing between
 *   t_cpu      a compute loop as long as t_pure
 *   t_overall  start, compute t_cpu, wait
 *   overlap %  = max(0, 100 - 100 (t_overall - t_cpu) / t_pure)
 *
 * 100 % is perfect overlap (the collective finished during the compute).
 * Progress for libcoll happens at start and in the wait, or in its progress
 * thread with COLL_ASYNC_PROGRESS=1.
 *
 *   coll_overlap [-m MAX] [-i ITER] */
#include <coll/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile double g_sink;

/* Busy work of about `us` microseconds (calibrated once). */
static double g_loops_per_us = 0;
static void compute(double us) {
  long n = (long)(us * g_loops_per_us);
  double x = 1.0;
  for (long i = 0; i < n; ++i) x = x * 1.0000001 + 1e-9;
  g_sink = x;
}
static void calibrate(void) {
  long n = 1 << 22;
  double t0 = MPI_Wtime();
  g_loops_per_us = 1;
  compute((double)n);
  double t = (MPI_Wtime() - t0) * 1e6;
  g_loops_per_us = (double)n / t;
}

typedef struct {
  double pure, cpu, overall;
} Times;

static Times measure(int lib, float* buf, size_t count, int iters) {
  Times t = {0, 0, 0};
  for (int phase = 0; phase < 2; ++phase) {
    double sum = 0;
    for (int i = 0; i < iters + iters / 10; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      if (lib) {
        coll_request_t r;
        coll_iallreduce(COLL_IN_PLACE, buf, count, COLL_FLOAT, COLL_SUM, coll_comm_world(), &r);
        if (phase) compute(t.pure);
        coll_wait(&r);
      } else {
        MPI_Request r;
        MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
        if (phase) compute(t.pure);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
      if (i >= iters / 10) sum += (MPI_Wtime() - t0) * 1e6;
    }
    double avg = sum / iters, max;
    MPI_Allreduce(&avg, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (phase == 0)
      t.pure = max;
    else
      t.overall = max;
  }
  double t0 = MPI_Wtime();
  for (int i = 0; i < 10; ++i) compute(t.pure);
  t.cpu = (MPI_Wtime() - t0) * 1e6 / 10;
  return t;
}

static double overlap(Times t) {
  double o = 100.0 - 100.0 * (t.overall - t.cpu) / t.pure;
  return o < 0 ? 0 : o;
}

int main(int argc, char** argv) {
  size_t max = 1 << 20;
  int iters = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-m")) max = strtoull(argv[i + 1], NULL, 0);
    if (!strcmp(argv[i], "-i")) iters = atoi(argv[i + 1]);
  }
  MPI_Init(&argc, &argv);
  if (coll_init(&argc, &argv) != COLL_SUCCESS) {
    fprintf(stderr, "coll_init: %s\n", coll_comm_last_error(COLL_COMM_NULL));
    return 1;
  }
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  calibrate();
  float* buf = calloc(max / sizeof(float) + 1, sizeof(float));
  const char* async = getenv("COLL_ASYNC_PROGRESS");
  if (rank == 0)
    printf("# iallreduce overlap, np %d, libcoll progress thread %s\n"
           "# %-10s %12s %12s %10s %12s %12s %10s\n",
           n, async && !strcmp(async, "1") ? "on" : "off", "Size", "libcoll pure", "overall",
           "overlap%", "MPI pure", "overall", "overlap%");
  for (size_t bytes = 4; bytes <= max; bytes *= 4) {
    const int it = bytes > 65536 ? iters / 10 + 1 : iters;
    Times c = measure(1, buf, bytes / sizeof(float), it);
    Times m = measure(0, buf, bytes / sizeof(float), it);
    if (rank == 0)
      printf("  %-10zu %12.2f %12.2f %10.1f %12.2f %12.2f %10.1f\n", bytes, c.pure, c.overall,
             overlap(c), m.pure, m.overall, overlap(m));
  }
  free(buf);
  coll_finalize();
  MPI_Finalize();
  return 0;
}
