/* coll_init_oob: libcoll bootstrapped through the caller's allgather, with
 * no launcher (the way torch_libcoll starts from torch's Store).
 *
 *   mp_oob_init_test NP [TRANSPORT]
 *
 * First, in this process: bad arguments (NULL oob, NULL allgather, a rank
 * outside the job, size 0) and a failing callback (its own status is
 * returned; a foreign nonzero value is COLL_ERR_PEER_LOST; a callback that
 * does not move its bytes is refused) - each a clear error, never a call
 * into a bad recvbuf, and libcoll stays uninitialized.
 * Then NP forked ranks, whose allgather is files in a fresh directory
 * (written under a temporary name, renamed into place, polled for): the
 * world has NP ranks and bootstrap "oob"; allreduce of rank + 1 and of a
 * vector larger than one slot, a dup and a bcast give closed-form results;
 * coll_finalize (one more allgather) returns success. Every wait is
 * bounded: a rank polls 60 s at most, the parent kills its children after
 * 90 s. Exit status 0 when every check passed. */
#define _GNU_SOURCE
#include <coll/coll.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures = 0;
#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "oob_init_test: FAILED: " __VA_ARGS__); \
      fprintf(stderr, "\n");                               \
      ++failures;                                          \
    }                                                      \
  } while (0)

/* ---- a file-based allgather: the caller's rendezvous ---- */

struct files {
  const char *dir;
  int rank, size;
  unsigned round;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int files_allgather(const void *sendbuf, void *recvbuf, size_t bytes, void *state) {
  struct files *f = state;
  char tmp[512], path[512];
  ++f->round;
  snprintf(tmp, sizeof tmp, "%s/.%u_%d", f->dir, f->round, f->rank);
  snprintf(path, sizeof path, "%s/%u_%d", f->dir, f->round, f->rank);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0 || write_all(fd, sendbuf, bytes) != 0 || close(fd) != 0 || rename(tmp, path) != 0)
    return COLL_ERR_NO_RESOURCES;
  const double deadline = now_s() + 60.0;
  for (int r = 0; r < f->size; ++r) {
    snprintf(path, sizeof path, "%s/%u_%d", f->dir, f->round, r);
    for (;;) {
      fd = open(path, O_RDONLY);
      if (fd >= 0) break;
      if (now_s() > deadline) return COLL_ERR_TIMEOUT;
      usleep(1000);
    }
    ssize_t got = bytes ? read(fd, (char *)recvbuf + (size_t)r * bytes, bytes) : 0;
    close(fd);
    if (got != (ssize_t)bytes) return COLL_ERR_INTERNAL;
  }
  return COLL_SUCCESS;
}

/* ---- callbacks that misbehave ---- */

static int fails_with_timeout(const void *s, void *r, size_t n, void *st) {
  (void)s, (void)r, (void)n, (void)st;
  return COLL_ERR_TIMEOUT;
}
static int fails_with_42(const void *s, void *r, size_t n, void *st) {
  (void)s, (void)r, (void)n, (void)st;
  return 42;
}
/* Says it worked, but fills recvbuf with 0xff: impossible lengths. */
static int moves_garbage(const void *s, void *r, size_t n, void *st) {
  (void)s, (void)st;
  memset(r, 0xff, n * 2);
  return COLL_SUCCESS;
}

static void expect_init_error(const coll_oob_t *oob, int want, const char *what) {
  int provided = -1;
  int status = coll_init_oob(oob, COLL_THREAD_SINGLE, &provided);
  const char *detail = coll_comm_last_error(COLL_COMM_NULL);
  CHECK(status == want, "%s: coll_init_oob returned %d (%s), want %d", what, status,
        detail ? detail : "", want);
  CHECK(detail && *detail, "%s: no detail from coll_comm_last_error", what);
  int initialized = 1;
  coll_initialized(&initialized);
  CHECK(!initialized, "%s: libcoll is initialized after a failed coll_init_oob", what);
  if (status == want) printf("%s: %s\n", what, detail ? detail : "");
}

static void bad_arguments(void) {
  coll_oob_t oob = {0, 2, fails_with_timeout, NULL};
  expect_init_error(NULL, COLL_ERR_INVALID_ARG, "NULL oob");
  coll_oob_t no_fn = {0, 2, NULL, NULL};
  expect_init_error(&no_fn, COLL_ERR_INVALID_ARG, "NULL allgather");
  coll_oob_t outside = {2, 2, fails_with_timeout, NULL};
  expect_init_error(&outside, COLL_ERR_INVALID_ARG, "rank 2 of 2");
  coll_oob_t negative = {-1, 2, fails_with_timeout, NULL};
  expect_init_error(&negative, COLL_ERR_INVALID_ARG, "rank -1");
  coll_oob_t empty = {0, 0, fails_with_timeout, NULL};
  expect_init_error(&empty, COLL_ERR_INVALID_ARG, "size 0");
  expect_init_error(&oob, COLL_ERR_TIMEOUT, "callback returns COLL_ERR_TIMEOUT");
  oob.allgather = fails_with_42;
  expect_init_error(&oob, COLL_ERR_PEER_LOST, "callback returns 42");
  coll_oob_t garbage = {0, 2, moves_garbage, NULL};
  expect_init_error(&garbage, COLL_ERR_INVALID_ARG, "callback moves garbage");
}

/* ---- one forked rank ---- */

static int run_rank(const char *dir, int rank, int size) {
  struct files f = {dir, rank, size, 0};
  coll_oob_t oob = {rank, size, files_allgather, &f};
  int provided = -1;
  int status = coll_init_oob(&oob, COLL_THREAD_SINGLE, &provided);
  if (status != COLL_SUCCESS) {
    fprintf(stderr, "rank %d: coll_init_oob: %d: %s\n", rank, status,
            coll_comm_last_error(COLL_COMM_NULL));
    return 1;
  }
  coll_comm_t world = coll_comm_world();
  int r = -1, n = -1;
  coll_comm_rank(world, &r);
  coll_comm_size(world, &n);
  CHECK(r == rank && n == size, "rank %d: world says rank %d of %d (want %d of %d)", rank, r, n,
        rank, size);
  CHECK(strcmp(coll_comm_bootstrap_name(world), "oob") == 0, "rank %d: bootstrap %s", rank,
        coll_comm_bootstrap_name(world));

  int64_t one = rank + 1, sum = 0;
  status = coll_allreduce(&one, &sum, 1, COLL_INT64, COLL_SUM, world);
  CHECK(status == COLL_SUCCESS && sum == (int64_t)size * (size + 1) / 2,
        "rank %d: allreduce: status %d, %lld", rank, status, (long long)sum);

  /* Larger than one slot (and odd): many chunks through the windows. */
  const size_t count = 300001;
  int32_t *v = malloc(count * sizeof *v);
  for (size_t i = 0; i < count; ++i) v[i] = (int32_t)(i % 1000) + rank;
  status = coll_allreduce(COLL_IN_PLACE, v, count, COLL_INT32, COLL_SUM, world);
  int bad = 0;
  for (size_t i = 0; i < count && !bad; ++i)
    bad = v[i] != (int32_t)(size * (int32_t)(i % 1000) + size * (size - 1) / 2);
  CHECK(status == COLL_SUCCESS && !bad, "rank %d: allreduce of %zu: status %d", rank, count,
        status);
  free(v);

  coll_comm_t dup = COLL_COMM_NULL;
  status = coll_comm_dup(world, &dup);
  CHECK(status == COLL_SUCCESS, "rank %d: dup: %d", rank, status);
  double x = rank == size - 1 ? 2.5 : 0.0;
  if (status == COLL_SUCCESS) {
    status = coll_bcast(&x, 1, COLL_DOUBLE, size - 1, dup);
    CHECK(status == COLL_SUCCESS && x == 2.5, "rank %d: bcast on the dup: %d, %g", rank, status,
          x);
    coll_comm_free(&dup);
  }
  status = coll_finalize();
  CHECK(status == COLL_SUCCESS, "rank %d: coll_finalize: %d", rank, status);
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  const int size = argc > 1 ? atoi(argv[1]) : 3;
  if (size < 1 || size > 64) {
    fprintf(stderr, "usage: mp_oob_init_test NP (1..64) [TRANSPORT]\n");
    return 2;
  }
  if (argc > 2) setenv("COLL_TRANSPORT", argv[2], 1);
  /* No launcher's variables: this job has only its allgather. */
  unsetenv("COLL_BOOTSTRAP");

  bad_arguments();

  char dir[] = "/tmp/coll-oob-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  fflush(stdout);
  pid_t pids[64];
  for (int r = 0; r < size; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) _exit(run_rank(dir, r, size));
  }
  const double deadline = now_s() + 90.0;
  int left = size, ok = 1;
  while (left > 0) {
    int wstatus = 0;
    pid_t pid = waitpid(-1, &wstatus, WNOHANG);
    if (pid > 0) {
      --left;
      if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        fprintf(stderr, "oob_init_test: FAILED: a rank (pid %d) ended with status %#x\n", (int)pid,
                wstatus);
        ok = 0;
      }
    } else if (now_s() > deadline) {
      fprintf(stderr, "oob_init_test: FAILED: ranks still running after 90 s: killed\n");
      for (int r = 0; r < size; ++r) kill(pids[r], SIGKILL);
      while (waitpid(-1, NULL, 0) > 0) {
      }
      ok = 0;
      break;
    } else {
      usleep(10000);
    }
  }
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "oob_init_test: could not remove %s\n", dir);
  if (!ok || failures) return 1;
  printf("oob_init_test: np %d%s%s: all checks passed\n", size, argc > 2 ? " over " : "",
         argc > 2 ? argv[2] : "");
  return 0;
}
