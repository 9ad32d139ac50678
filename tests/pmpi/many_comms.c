/* An MPI program with more communicators than libcoll's window arena
 * holds, under the PMPI shim: it duplicates MPI_COMM_WORLD until the shim
 * leaves a duplicate to MPI (its window budget, 3/4 of the arena), at most
 * 400 times, runs an allreduce on every duplicate (each checked against its
 * closed form, served or not) and frees them all. Rank 0 prints how many
 * were served; the test (meson.build) checks the shim's statistics too:
 * some left to MPI for the budget, none failed: a budget beyond what
 * libcoll's arena holds lets libcoll run out first, and that communicator
 * counts as failed (COLL_MPI_WINDOW_BUDGET=100G at np 4 on 2 CPUs: 125
 * served, the 126th failed). */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_mpi.h"

#define MAX_COMMS 400
#define COUNT 1000

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* dlsym gives an object pointer; ISO C has no cast to a function one. */
  coll_mpi_comm_served_fn served_fn = NULL;
  void *p = dlsym(RTLD_DEFAULT, "coll_mpi_comm_served");
  memcpy(&served_fn, &p, sizeof served_fn);
  if (!served_fn) {
    if (rank == 0) printf("many_comms: the shim is not loaded\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  static MPI_Comm comms[MAX_COMMS];
  int made = 0, served = 0, wrong = 0;
  static int in[COUNT], out[COUNT];
  while (made < MAX_COMMS) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[made]);
    const int is_served = served_fn(comms[made]);
    ++made;
    for (int i = 0; i < COUNT; ++i) in[i] = rank * 7 + i + made;
    MPI_Allreduce(in, out, COUNT, MPI_INT, MPI_SUM, comms[made - 1]);
    for (int i = 0; i < COUNT; ++i) {
      const int want = 7 * size * (size - 1) / 2 + size * (i + made);
      if (out[i] != want && ++wrong <= 5)
        printf("many_comms rank %d: WRONG comm %d [%d]: %d, want %d\n", rank, made, i, out[i],
               want);
    }
    if (!is_served) break;
    ++served;
  }
  for (int i = 0; i < made; ++i) MPI_Comm_free(&comms[i]);
  int all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    if (served == made)
      printf("many_comms: WRONG: all %d duplicates served, none left to MPI\n", made);
    else if (all_wrong == 0)
      printf("many_comms: %d of %d duplicates served, every result right\n", served, made);
  }
  MPI_Finalize();
  return all_wrong == 0 && served < made ? 0 : 1;
}
