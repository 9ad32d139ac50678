/* coll_split_bench: coll_comm_split + coll_comm_free against
 * MPI_Comm_split + MPI_Comm_free, side by side under mpirun, alternating,
 * REPEATS rounds of ITER calls each; prints the median per call (max over
 * ranks) for both and their ratio. Colors: rank % 2 (two halves), keys:
 * reversed ranks.
 *
 *   mpirun -np 8 coll_split_bench [-i ITER] [-r REPEATS] */
#include <coll/coll.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double round_us(int lib, int iters, int rank, int n) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    if (lib) {
      coll_comm_t c;
      if (coll_comm_split(coll_comm_world(), rank % 2, n - rank, &c) != COLL_SUCCESS ||
          coll_comm_free(&c) != COLL_SUCCESS) {
        fprintf(stderr, "coll_comm_split: %s\n", coll_comm_last_error(COLL_COMM_NULL));
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    } else {
      MPI_Comm c;
      MPI_Comm_split(MPI_COMM_WORLD, rank % 2, n - rank, &c);
      MPI_Comm_free(&c);
    }
  }
  double t = (MPI_Wtime() - t0) * 1e6 / iters, max;
  MPI_Allreduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return max;
}

int main(int argc, char** argv) {
  int iters = 50, repeats = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "-i")) iters = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "-r")) repeats = atoi(argv[i + 1]);
  }
  MPI_Init(&argc, &argv);
  if (coll_init(&argc, &argv) != COLL_SUCCESS) return 1;
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  double* c = malloc(sizeof(double) * (size_t)repeats);
  double* m = malloc(sizeof(double) * (size_t)repeats);
  round_us(1, 2, rank, n);  // warm up both
  round_us(0, 2, rank, n);
  for (int r = 0; r < repeats; ++r) {
    if (r % 2) {
      m[r] = round_us(0, iters, rank, n);
      c[r] = round_us(1, iters, rank, n);
    } else {
      c[r] = round_us(1, iters, rank, n);
      m[r] = round_us(0, iters, rank, n);
    }
  }
  qsort(c, (size_t)repeats, sizeof *c, cmp);
  qsort(m, (size_t)repeats, sizeof *m, cmp);
  if (rank == 0)
    printf("split+free at np %d (%d x %d calls): libcoll median %.1f us [%.1f .. %.1f], "
           "MPI median %.1f us [%.1f .. %.1f], ratio %.2f\n",
           n, repeats, iters, c[repeats / 2], c[0], c[repeats - 1], m[repeats / 2], m[0],
           m[repeats - 1], c[repeats / 2] / m[repeats / 2]);
  free(c);
  free(m);
  coll_finalize();
  MPI_Finalize();
  return 0;
}
