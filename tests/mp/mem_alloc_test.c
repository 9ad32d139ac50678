/* coll_mem_alloc / coll_mem_free (issue 32 item 4): memory that peers on
 * the host write into in place. Modes (argv[1]):
 *
 *   collectives  bcast from every root, allgather and allreduce (uint32
 *                sum, recvbuf from coll_mem_alloc) at edge sizes (1 B,
 *                an odd size, one slot, one slot + 7, several slots + 3),
 *                the receive buffers from coll_mem_alloc on every rank,
 *                on none, and on every other rank (each rank decides for
 *                itself: placement must not need agreement); every byte
 *                checked against its closed form. tests/mp/mem_alloc.sh
 *                checks on top, from COLL_DEBUG's account, that messages
 *                did land in place.
 *   allreduce    allreduce alone, in and out of place, at those sizes
 *                and at many slots per rank (for the algorithm forced by
 *                COLL_ALLREDUCE_ALGO; mem_alloc.sh counts its placements).
 *   free         the errors (NULL and 0 arguments, a free of malloc'd
 *                memory, a double free), and a buffer freed and allocated
 *                again - at the same address where the arena gives it
 *                back - holding new data: a registration of the old one
 *                must not serve the new; memory not freed keeps its
 *                contents after coll_finalize.
 *   fork         a child of fork() does not inherit the memory (it dies
 *                of SIGSEGV touching it) and the parent's buffer and
 *                collectives are untouched.
 *   exhaust      allocates until COLL_ERR_NO_RESOURCES (under a small
 *                /dev/shm, small_shm.sh), then malloc'd buffers still work,
 *                then everything is freed and the memory is there again.
 */
#define _GNU_SOURCE
#include <coll/coll.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "c_check.h"

static unsigned char pattern(int root, size_t i, int round) {
  return (unsigned char)(root * 131 + (int)(i % 251) * 7 + round * 17 + 1);
}

/* Every rank's buffer: coll_mem's when use_mem, else malloc's. */
static void* get_buf(size_t bytes, int use_mem) {
  void* p = NULL;
  if (use_mem) {
    OK(coll_mem_alloc(bytes, &p));
    CHECK(p != NULL, "coll_mem_alloc gave NULL");
  } else {
    p = malloc(bytes);
    CHECK(p != NULL, "malloc(%zu)", bytes);
  }
  return p;
}

static void put_buf(void* p, int use_mem) {
  if (use_mem)
    OK(coll_mem_free(p));
  else
    free(p);
}

static void check_bcast(coll_comm_t w, size_t bytes, int use_mem, int round) {
  const int n = size_of(w), r = rank_of(w);
  unsigned char* buf = get_buf(bytes, use_mem);
  for (int root = 0; root < n; ++root) {
    for (size_t i = 0; i < bytes; ++i) buf[i] = r == root ? pattern(root, i, round) : 0xee;
    OK(coll_bcast(buf, bytes, COLL_UINT8, root, w));
    for (size_t i = 0; i < bytes; ++i)
      CHECK(buf[i] == pattern(root, i, round), "bcast of %zu B from %d (mem %d): byte %zu is %d",
            bytes, root, use_mem, i, buf[i]);
  }
  put_buf(buf, use_mem);
}

static void check_allgather(coll_comm_t w, size_t block, int use_mem, int round) {
  const int n = size_of(w), r = rank_of(w);
  unsigned char* send = malloc(block);
  unsigned char* recv = get_buf(block * (size_t)n, use_mem);
  CHECK(send != NULL, "malloc");
  for (size_t i = 0; i < block; ++i) send[i] = pattern(r, i, round);
  memset(recv, 0xee, block * (size_t)n);
  OK(coll_allgather(send, recv, block, COLL_UINT8, w));
  for (int q = 0; q < n; ++q)
    for (size_t i = 0; i < block; ++i)
      CHECK(recv[(size_t)q * block + i] == pattern(q, i, round),
            "allgather of %zu B (mem %d): block %d byte %zu is %d", block, use_mem, q, i,
            recv[(size_t)q * block + i]);
  put_buf(recv, use_mem);
  free(send);
}

/* in_place: COLL_IN_PLACE, the input in recvbuf (its halves are sent
 * from there and then overwritten by placed chunks). */
static void check_allreduce(coll_comm_t w, size_t bytes, int use_mem, int in_place) {
  const int n = size_of(w), r = rank_of(w);
  const size_t count = bytes / 4 ? bytes / 4 : 1;
  uint32_t* in = malloc(count * 4);
  uint32_t* out = get_buf(count * 4, use_mem);
  CHECK(in != NULL, "malloc");
  for (size_t i = 0; i < count; ++i) (in_place ? out : in)[i] = (uint32_t)(r * 7 + i);
  OK(coll_allreduce(in_place ? COLL_IN_PLACE : in, out, count, COLL_UINT32, COLL_SUM, w));
  for (size_t i = 0; i < count; ++i)
    CHECK(out[i] == (uint32_t)(7 * n * (n - 1) / 2 + n * i),
          "allreduce of %zu (mem %d, in place %d): [%zu] is %u", count, use_mem, in_place, i,
          out[i]);
  put_buf(out, use_mem);
  free(in);
}

/* Allreduce alone (mem_alloc.sh's count is then its own), in and out of
 * place, on every rank, none and every other; the sizes as in
 * collectives() plus many chunks per partner (Rabenseifner's halves). */
static void allreduce_only(coll_comm_t w) {
  const size_t slot = 128 << 10; /* the tests' COLL_SLOT_SIZE */
  const size_t sizes[] = {1, 4095, slot, slot + 7, 3 * slot + 3, 9 * slot + 11};
  const int r = rank_of(w);
  for (int who = 0; who < 3; ++who) {
    const int use_mem = who == 0 ? 1 : who == 1 ? 0 : (r % 2 == 0);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k)
      for (int in_place = 0; in_place < 2; ++in_place)
        check_allreduce(w, sizes[k] * (size_t)size_of(w), use_mem, in_place);
  }
}

static void collectives(coll_comm_t w) {
  const size_t slot = 128 << 10; /* the tests' COLL_SLOT_SIZE (meson.build) */
  const size_t sizes[] = {1, 4095, slot, slot + 7, 3 * slot + 3};
  const int r = rank_of(w);
  int round = 0;
  for (int who = 0; who < 3; ++who) { /* every rank, none, every other rank */
    const int use_mem = who == 0 ? 1 : who == 1 ? 0 : (r % 2 == 0);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; ++k) {
      check_bcast(w, sizes[k], use_mem, ++round);
      check_allgather(w, sizes[k], use_mem, ++round);
      check_allreduce(w, sizes[k] * (size_t)size_of(w), use_mem, 0);
    }
  }
  /* One buffer used by many calls in a row (the cached registration).
   * Placing is opportunistic - a chunk sent before its receiver's offer
   * is in goes through a slot - so in the first ten calls the root comes
   * 20 ms late: its receivers have offered by then, and mem_alloc.sh can
   * count on placed messages. */
  unsigned char* buf = get_buf(2 * slot + 5, 1);
  for (int i = 0; i < 20; ++i) {
    const int root = i % size_of(w);
    for (size_t j = 0; j < 2 * slot + 5; ++j) buf[j] = r == root ? pattern(root, j, i) : 0;
    if (r == root && i < 10) usleep(20000);
    OK(coll_bcast(buf, 2 * slot + 5, COLL_UINT8, root, w));
    for (size_t j = 0; j < 2 * slot + 5; ++j)
      CHECK(buf[j] == pattern(root, j, i), "repeated bcast %d: byte %zu", i, j);
  }
  put_buf(buf, 1);
}

static void free_errors_and_reuse(coll_comm_t w) {
  void* p = (void*)1;
  CHECK(coll_mem_alloc(0, &p) == COLL_ERR_INVALID_ARG, "0 bytes accepted");
  CHECK(p == NULL, "*ptr not NULL after a failure");
  CHECK(coll_mem_alloc(64, NULL) == COLL_ERR_INVALID_ARG, "NULL ptr accepted");
  OK(coll_mem_free(NULL));
  void* m = malloc(64);
  CHECK(coll_mem_free(m) == COLL_ERR_INVALID_ARG, "a free of malloc'd memory accepted");
  free(m);

  const size_t bytes = (256 << 10) + 11;
  void* a = NULL;
  OK(coll_mem_alloc(bytes, &a));
  CHECK(((uintptr_t)a % 4096) == 0, "%p not page aligned", a);
  for (size_t i = 0; i < bytes; ++i) CHECK(((unsigned char*)a)[i] == 0, "not zeroed at %zu", i);
  check_bcast(w, 1, 1, 1);
  OK(coll_bcast(a, bytes, COLL_UINT8, 0, w));
  OK(coll_mem_free(a));
  CHECK(coll_mem_free(a) == COLL_ERR_INVALID_ARG, "a double free accepted");

  void* b = NULL;
  OK(coll_mem_alloc(bytes, &b));
  if (b == a) fprintf(stderr, "[rank %d] the same address again: %p\n", rank_of(w), b);
  unsigned char* u = b;
  for (size_t i = 0; i < bytes; ++i) CHECK(u[i] == 0, "reallocated memory not zeroed at %zu", i);
  const int r = rank_of(w);
  for (size_t i = 0; i < bytes; ++i) u[i] = r == 1 ? pattern(1, i, 99) : 0;
  OK(coll_bcast(u, bytes, COLL_UINT8, 1 % size_of(w), w));
  for (size_t i = 0; i < bytes; ++i)
    CHECK(u[i] == pattern(1 % size_of(w), i, 99) || size_of(w) == 1, "reused buffer byte %zu", i);
  OK(coll_mem_free(b));
}

/* Memory not freed before coll_finalize keeps its contents at its address
 * (a program reads its results there after finalize). */
static unsigned char* g_kept;
static const size_t kKept = 70001;

static void fork_child(coll_comm_t w) {
  const size_t bytes = 300000;
  unsigned char* p = NULL;
  OK(coll_mem_alloc(bytes, (void**)&p));
  const int r = rank_of(w);
  for (size_t i = 0; i < bytes; ++i) p[i] = pattern(r, i, 5);
  fflush(NULL);
  const pid_t pid = fork();
  CHECK(pid >= 0, "fork");
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    p[0] = 1; /* not inherited: SIGSEGV here */
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV,
        "the child touched coll_mem memory without SIGSEGV (status 0x%x)", status);
  for (size_t i = 0; i < bytes; ++i) CHECK(p[i] == pattern(r, i, 5), "parent's byte %zu", i);
  OK(coll_bcast(p, bytes, COLL_UINT8, 0, w));
  for (size_t i = 0; i < bytes; ++i) CHECK(p[i] == pattern(0, i, 5), "bcast after fork: %zu", i);
  check_allgather(w, 70000, 1, 6);
  OK(coll_mem_free(p));
}

static void exhaust(coll_comm_t w) {
  enum { kMax = 4096 };
  static void* got[kMax];
  const size_t piece = 4 << 20;
  int n = 0, rc = COLL_SUCCESS;
  while (n < kMax && (rc = coll_mem_alloc(piece, &got[n])) == COLL_SUCCESS) ++n;
  CHECK(rc == COLL_ERR_NO_RESOURCES, "after %d pieces: %s", n, coll_strerror(rc));
  const char* why = coll_comm_last_error(w);
  CHECK(strstr(why, "/dev/shm") || strstr(why, "COLL_SHM_ARENA"), "message: %s", why);
  fprintf(stderr, "[rank %d] %d pieces of 4 MiB, then: %s\n", rank_of(w), n, why);
  /* The staged path (malloc'd buffers) is untouched. */
  check_bcast(w, 3 * (128 << 10) + 3, 0, 7);
  check_allgather(w, 4097, 0, 8);
  for (int i = 0; i < n; ++i) OK(coll_mem_free(got[i]));
  /* The room is there again once every rank has freed (/dev/shm is shared:
   * one rank may have taken most of it). */
  OK(coll_barrier(w));
  check_bcast(w, (128 << 10) + 7, 1, 9);
}

int main(int argc, char** argv) {
  OK(coll_init(&argc, &argv));
  coll_comm_t w = coll_comm_world();
  g_rank = rank_of(w);
  CHECK(argc == 2, "usage: mem_alloc_test collectives|allreduce|free|fork|exhaust");
  if (!strcmp(argv[1], "collectives"))
    collectives(w);
  else if (!strcmp(argv[1], "allreduce"))
    allreduce_only(w);
  else if (!strcmp(argv[1], "free")) {
    free_errors_and_reuse(w);
    OK(coll_mem_alloc(kKept, (void**)&g_kept));
    for (size_t i = 0; i < kKept; ++i) g_kept[i] = (unsigned char)(i % 249);
    OK(coll_bcast(g_kept, kKept, COLL_UINT8, 0, w));
  }
  else if (!strcmp(argv[1], "fork"))
    fork_child(w);
  else if (!strcmp(argv[1], "exhaust"))
    exhaust(w);
  else
    CHECK(0, "unknown mode %s", argv[1]);
  OK(coll_barrier(w));
  OK(coll_finalize());
  if (g_kept) {
    for (size_t i = 0; i < kKept; ++i)
      CHECK(g_kept[i] == (unsigned char)(i % 249), "after finalize: byte %zu is %d", i, g_kept[i]);
    g_kept[0] = 7; /* and writable */
  }
  return 0;
}
