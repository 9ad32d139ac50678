/* MPI_Alloc_mem through the shim (issue 32 item 4): the memory comes from
 * coll_mem_alloc (COLL_DEBUG's account, checked by mem_alloc.sh, says
 * chunks landed in place), and bcast and allgather into it from every
 * root, at sizes up to
 * several slots, give the exact bytes; MPI_Free_mem of it and of memory
 * MPI gave (0 bytes: MPI's own) both succeed; a buffer not freed before
 * MPI_Finalize keeps its contents after it. Prints "pmpi_alloc_mem: all
 * checks passed at np N". */
#define _GNU_SOURCE
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int g_rank;

#define CHECK(cond, ...)                                                          \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", g_rank, __FILE__,    \
              __LINE__, #cond);                                                   \
      fprintf(stderr, __VA_ARGS__);                                               \
      fprintf(stderr, "\n");                                                      \
      MPI_Abort(MPI_COMM_WORLD, 1);                                               \
    }                                                                             \
  } while (0)

static unsigned char pattern(int root, size_t i, int round) {
  return (unsigned char)(root * 131 + (int)(i % 251) * 7 + round * 17 + 1);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int n;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  const size_t sizes[] = {1, 4095, 128 << 10, (128 << 10) + 7, 3 * (128 << 10) + 3};
  int round = 0;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
    const size_t bytes = sizes[k];
    unsigned char* buf = NULL;
    CHECK(MPI_Alloc_mem((MPI_Aint)(bytes * (size_t)n), MPI_INFO_NULL, &buf) == MPI_SUCCESS, "alloc");
    for (int root = 0; root < n; ++root) {
      ++round;
      for (size_t i = 0; i < bytes; ++i) buf[i] = g_rank == root ? pattern(root, i, round) : 0xee;
      if (g_rank == root) usleep(5000); /* the receivers offer first: chunks land in place */
      MPI_Bcast(buf, (int)bytes, MPI_BYTE, root, MPI_COMM_WORLD);
      for (size_t i = 0; i < bytes; ++i)
        CHECK(buf[i] == pattern(root, i, round), "bcast %zu B from %d: byte %zu is %d", bytes, root,
              i, buf[i]);
    }
    unsigned char* send = malloc(bytes);
    CHECK(send != NULL, "malloc");
    ++round;
    for (size_t i = 0; i < bytes; ++i) send[i] = pattern(g_rank, i, round);
    MPI_Allgather(send, (int)bytes, MPI_BYTE, buf, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < bytes; ++i)
        CHECK(buf[(size_t)q * bytes + i] == pattern(q, i, round), "allgather %zu B: block %d byte %zu",
              bytes, q, i);
    free(send);
    CHECK(MPI_Free_mem(buf) == MPI_SUCCESS, "free");
  }
  void* zero = NULL;
  CHECK(MPI_Alloc_mem(0, MPI_INFO_NULL, &zero) == MPI_SUCCESS, "0 bytes");
  CHECK(MPI_Free_mem(zero) == MPI_SUCCESS, "free of MPI's memory");

  const size_t kept_bytes = 65537;
  unsigned char* kept = NULL;
  CHECK(MPI_Alloc_mem((MPI_Aint)kept_bytes, MPI_INFO_NULL, &kept) == MPI_SUCCESS, "alloc kept");
  for (size_t i = 0; i < kept_bytes; ++i) kept[i] = (unsigned char)(i % 253);
  MPI_Bcast(kept, (int)kept_bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  for (size_t i = 0; i < kept_bytes; ++i)
    if (kept[i] != (unsigned char)(i % 253)) {
      fprintf(stderr, "[rank %d] after MPI_Finalize byte %zu is %d\n", g_rank, i, kept[i]);
      return 1;
    }
  if (g_rank == 0) printf("pmpi_alloc_mem: all checks passed at np %d\n", n);
  return 0;
}
