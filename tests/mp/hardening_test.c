/* Issue 31: the defects a hostile test found, one mode each. Every rank
 * runs the same mode and passes the same bad arguments, so every rank must
 * refuse each bad call alike - with COLL_ERR_INVALID_ARG, a message naming
 * what was wrong, and nothing written - and the communicator must still
 * give exact results afterwards (a rank that accepted a call the others
 * refused would leave them out of step: a wrong result or a timeout).
 *
 *   hardening_test in_place     COLL_IN_PLACE in an argument that does not
 *                               take it, in every collective
 *   hardening_test counts       byte counts past the address space, plain
 *                               and v-forms, and a buffer whose end wraps
 *   hardening_test aliasing     sendbuf == recvbuf without COLL_IN_PLACE
 *   hardening_test requests     a second coll_start, one request twice in
 *                               coll_waitall, coll_comm_free(world), ...
 *   hardening_test knobs        numeric knobs out of range fail coll_init
 *   hardening_test mismatch     a count that differs on one rank fails every
 *                               rank's call at once; the next communicator
 *                               is exact
 *   hardening_test flood        rank 0 opens connections to collrun's
 *                               rendezvous port (tests/mp/flood.sh counts
 *                               collrun's lines) */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <coll/coll.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "c_check.h"

enum { kCount = 8, kMaxRanks = 16 };

static coll_comm_t g_world;
static int g_size;

/* Buffers whose every byte is known, so that a refused call is seen to
 * have written nothing. */
static int64_t g_send[kMaxRanks * kCount], g_recv[kMaxRanks * kCount];

static int64_t send_value(size_t i) { return (int64_t)(g_rank * 1000 + (int)i); }
static void fill(void) {
  for (size_t i = 0; i < kMaxRanks * kCount; ++i) {
    g_send[i] = send_value(i);
    g_recv[i] = -7;
  }
}
static void check_untouched(const char *what) {
  for (size_t i = 0; i < kMaxRanks * kCount; ++i) {
    CHECK(g_send[i] == send_value(i), "%s: sendbuf[%zu] written: %lld", what, i,
          (long long)g_send[i]);
    CHECK(g_recv[i] == -7, "%s: recvbuf[%zu] written: %lld", what, i, (long long)g_recv[i]);
  }
}

/* The call was refused on this rank with COLL_ERR_INVALID_ARG, the
 * communicator's message contains `needle` (and names the call), and no
 * buffer was written. */
static void refused(int rc, const char *call, const char *needle) {
  const char *why = coll_comm_last_error(g_world);
  CHECK(rc == COLL_ERR_INVALID_ARG, "%s -> %s (%s), expected COLL_ERR_INVALID_ARG", call,
        coll_strerror(rc), why);
  CHECK(why && strstr(why, needle), "%s: message '%s' does not contain '%s'", call,
        why ? why : "(null)", needle);
  check_untouched(call);
  fill();
}
#define REFUSED(call, needle) refused((call), #call, (needle))

/* The world still computes exact results: an allreduce and a bcast. */
static void world_still_works(void) {
  int64_t x[kCount];
  for (int i = 0; i < kCount; ++i) x[i] = (int64_t)(g_rank + 1) * (i + 1);
  OK(coll_allreduce(COLL_IN_PLACE, x, kCount, COLL_INT64, COLL_SUM, g_world));
  for (int i = 0; i < kCount; ++i)
    CHECK(x[i] == (int64_t)(i + 1) * g_size * (g_size + 1) / 2, "allreduce[%d] = %lld", i,
          (long long)x[i]);
  for (int i = 0; i < kCount; ++i) x[i] = g_rank == g_size - 1 ? 40 + i : -1;
  OK(coll_bcast(x, kCount, COLL_INT64, g_size - 1, g_world));
  for (int i = 0; i < kCount; ++i) CHECK(x[i] == 40 + i, "bcast[%d] = %lld", i, (long long)x[i]);
}

/* A count that differs on one rank (an erroneous program that no rank can
 * see alone), without COLL_CHECK_ARGS: the rank that finds a message of the
 * wrong length fails the communicator and tells its peers
 * (Channel::notify_failed), so every rank's call fails at once - before,
 * the others waited until COLL_TIMEOUT (300 s; collrun's --timeout ends the
 * test first). The failed communicator frees cleanly everywhere and the
 * world's next communicator is exact, several times over. */
static void test_mismatch(void) {
  if (g_size < 2) return;
  for (int round = 0; round < 10; ++round) {
    coll_comm_t c = COLL_COMM_NULL;
    OK(coll_comm_dup(g_world, &c));
    const size_t count = g_rank == round % g_size ? kCount / 2 : kCount;
    fill();
    const int rc = coll_allreduce(g_send, g_recv, count, COLL_INT64, COLL_SUM, c);
    CHECK(rc != COLL_SUCCESS, "round %d: a mismatched allreduce returned COLL_SUCCESS", round);
    CHECK(strstr(coll_comm_last_error(c), "rank"), "round %d: message '%s'", round,
          coll_comm_last_error(c));
    OK(coll_comm_free(&c));
    OK(coll_comm_dup(g_world, &c));
    fill();
    OK(coll_allgather(g_send, g_recv, kCount, COLL_INT64, c));
    for (int r = 0; r < g_size; ++r)
      for (int i = 0; i < kCount; ++i)
        CHECK(g_recv[r * kCount + i] == (int64_t)(r * 1000 + i), "round %d: allgather[%d][%d]",
              round, r, i);
    OK(coll_comm_free(&c));
  }
  world_still_works();
}

static void test_in_place(void) {
  void *s = g_send, *r = g_recv;
  void *const ip = COLL_IN_PLACE;
  size_t counts[kMaxRanks], displs[kMaxRanks];
  for (int i = 0; i < g_size; ++i) {
    counts[i] = 1;
    displs[i] = (size_t)i;
  }
  coll_request_t req = COLL_REQUEST_NULL;
  fill();
  /* Issue 31's case first: it was a segfault (memcpy to 0x1). */
  REFUSED(coll_allreduce(s, ip, 4, COLL_DOUBLE, COLL_SUM, g_world),
          "allreduce: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_allreduce(ip, ip, 4, COLL_DOUBLE, COLL_SUM, g_world), "as recvbuf");
  REFUSED(coll_iallreduce(s, ip, 4, COLL_DOUBLE, COLL_SUM, g_world, &req), "as recvbuf");
  REFUSED(coll_allreduce_init(s, ip, 4, COLL_DOUBLE, COLL_SUM, g_world, &req), "as recvbuf");
  REFUSED(coll_bcast(ip, 4, COLL_DOUBLE, 0, g_world), "bcast: COLL_IN_PLACE passed as buffer");
  REFUSED(coll_ibcast(ip, 4, COLL_DOUBLE, 0, g_world, &req), "passed as buffer");
  REFUSED(coll_bcast_init(ip, 4, COLL_DOUBLE, 0, g_world, &req), "passed as buffer");
  REFUSED(coll_allgather(s, ip, 2, COLL_INT64, g_world), "allgather: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_alltoall(s, ip, 1, COLL_INT64, g_world), "alltoall: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_scan(s, ip, 4, COLL_INT64, COLL_SUM, g_world), "scan: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_exscan(s, ip, 4, COLL_INT64, COLL_SUM, g_world),
          "exscan: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_reduce_scatter_block(s, ip, 1, COLL_INT64, COLL_SUM, g_world),
          "reduce_scatter_block: COLL_IN_PLACE passed as recvbuf");
  /* Root-only recvbufs: refused at the non-roots too (all ranks pass it). */
  REFUSED(coll_reduce(s, ip, 4, COLL_INT64, COLL_SUM, 0, g_world),
          "reduce: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_gather(s, ip, 1, COLL_INT64, 0, g_world), "gather: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_gatherv(s, 1, ip, counts, displs, COLL_INT64, 0, g_world),
          "gatherv: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_scatter(ip, r, 1, COLL_INT64, 0, g_world), "scatter: COLL_IN_PLACE passed as sendbuf");
  REFUSED(coll_scatterv(ip, counts, displs, r, 1, COLL_INT64, 0, g_world),
          "scatterv: COLL_IN_PLACE passed as sendbuf");
  REFUSED(coll_allgatherv(s, 1, ip, counts, displs, COLL_INT64, g_world),
          "allgatherv: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_reduce_scatter(s, ip, counts, COLL_INT64, COLL_SUM, g_world),
          "reduce_scatter: COLL_IN_PLACE passed as recvbuf");
  REFUSED(coll_alltoallv(s, counts, displs, ip, counts, displs, COLL_INT64, g_world),
          "alltoallv: COLL_IN_PLACE passed as recvbuf");
  /* The arrays of counts and displacements are read first: not address 1.
   * (Through a volatile, or the compiler refuses to pass address 1 as an
   * array: that is the point.) */
  const size_t *volatile ip_array = (const size_t *)COLL_IN_PLACE;
  REFUSED(coll_allgatherv(s, 1, r, ip_array, displs, COLL_INT64, g_world),
          "COLL_IN_PLACE passed as recvcounts");
  REFUSED(coll_alltoallv(s, counts, ip_array, r, counts, displs, COLL_INT64, g_world),
          "COLL_IN_PLACE passed as sdispls");
  REFUSED(coll_reduce_scatter(s, r, ip_array, COLL_INT64, COLL_SUM, g_world),
          "COLL_IN_PLACE passed as recvcounts");
  /* Count 0 too: the same verdict on every rank, whatever it moves. */
  REFUSED(coll_allreduce(s, ip, 0, COLL_DOUBLE, COLL_SUM, g_world), "as recvbuf");
  CHECK(req == COLL_REQUEST_NULL, "a refused call returned a request");
  world_still_works();
}

static void test_counts(void) {
  void *s = g_send, *r = g_recv;
  const size_t two61 = (size_t)1 << 61; /* 2305843009213693952 */
  size_t counts[kMaxRanks], displs[kMaxRanks], huge[kMaxRanks], far[kMaxRanks];
  for (int i = 0; i < g_size; ++i) {
    counts[i] = 1;
    displs[i] = (size_t)i;
    huge[i] = two61 / 2; /* bytes: 2^60 each at INT8 */
    far[i] = (size_t)i;
  }
  far[g_size - 1] = two61; /* a displacement past the address space */
  fill();
  /* 2^61 bytes: passed the old PTRDIFF_MAX bound and read past the buffer
   * (bcast: signal 11); allreduce called it an overlap. */
  REFUSED(coll_bcast(r, two61, COLL_INT8, 0, g_world),
          "bcast: count 2305843009213693952 x 1 bytes exceeds the address space");
  REFUSED(coll_bcast(r, two61, COLL_DOUBLE, 0, g_world),
          "bcast: count 2305843009213693952 x 8 bytes exceeds the address space");
  REFUSED(coll_allreduce(s, r, two61, COLL_INT8, COLL_SUM, g_world),
          "allreduce: count 2305843009213693952 x 1 bytes exceeds the address space");
  REFUSED(coll_reduce(s, r, two61, COLL_INT8, COLL_MAX, 0, g_world), "exceeds the address space");
  REFUSED(coll_scan(s, r, two61, COLL_INT8, COLL_SUM, g_world), "exceeds the address space");
  REFUSED(coll_allgather(s, r, two61 / 4, COLL_INT8, g_world), "exceeds the address space");
  REFUSED(coll_alltoall(s, r, two61 / 4, COLL_INT8, g_world), "exceeds the address space");
  REFUSED(coll_gather(s, r, two61, COLL_INT8, 0, g_world), "exceeds the address space");
  REFUSED(coll_scatter(s, r, two61, COLL_INT8, 0, g_world), "exceeds the address space");
  REFUSED(coll_reduce_scatter_block(s, r, two61, COLL_INT8, COLL_SUM, g_world),
          "exceeds the address space");
  /* v-forms: the sum of the counts, a displacement, a count of one's own. */
  REFUSED(coll_allgatherv(s, huge[g_rank], r, huge, displs, COLL_INT8, g_world),
          "exceeds the address space");
  REFUSED(coll_allgatherv(s, 1, r, counts, far, COLL_INT64, g_world), "exceeds the address space");
  REFUSED(coll_reduce_scatter(s, r, huge, COLL_INT8, COLL_SUM, g_world),
          "exceeds the address space");
  REFUSED(coll_alltoallv(s, counts, far, r, counts, displs, COLL_INT64, g_world),
          "exceeds the address space");
  REFUSED(coll_gatherv(s, g_rank ? two61 : 1, r, counts, far, COLL_INT64, 0, g_world),
          "exceeds the address space");
  REFUSED(coll_scatterv(s, counts, far, r, g_rank ? two61 : 1, COLL_INT64, 0, g_world),
          "exceeds the address space");
  /* A small count at a pointer whose end wraps around. */
  void *top = (void *)(uintptr_t)(UINTPTR_MAX - 15);
  REFUSED(coll_bcast(top, 4, COLL_DOUBLE, 0, g_world), "buffer");
  REFUSED(coll_bcast(top, 4, COLL_DOUBLE, 0, g_world), "exceeds the address space");
  REFUSED(coll_allreduce(s, top, 4, COLL_DOUBLE, COLL_SUM, g_world), "exceeds the address space");
  world_still_works();
}

static void test_aliasing(void) {
  void *s = g_send, *r = g_recv;
  size_t counts[kMaxRanks], displs[kMaxRanks];
  for (int i = 0; i < g_size; ++i) {
    counts[i] = i == 1 ? 0 : 1; /* rank 1 moves nothing of its own */
    displs[i] = (size_t)i;
  }
  fill();
  /* Rank 0's own block starts at recvbuf: it accepted this, the others
   * refused, and the communicator failed. */
  REFUSED(coll_allgather(r, r, 2, COLL_INT64, g_world), "allgather: sendbuf == recvbuf");
  REFUSED(coll_allgather(s, s, 2, COLL_INT64, g_world), "allgather: sendbuf == recvbuf");
  REFUSED(coll_allgatherv(r, counts[g_rank], r, counts, displs, COLL_INT64, g_world),
          "allgatherv: sendbuf == recvbuf");
  /* gather(v), scatter(v): the root's buffers only are judged (a
   * non-root's other buffer is insignificant, and MPI programs pass the
   * send buffer there again); one rank: it is the root. */
  if (g_size == 1) {
    REFUSED(coll_gather(r, r, 1, COLL_INT64, 0, g_world), "gather: sendbuf == recvbuf");
    REFUSED(coll_gatherv(r, counts[g_rank], r, counts, displs, COLL_INT64, 0, g_world),
            "gatherv: sendbuf == recvbuf");
    REFUSED(coll_scatter(s, s, 1, COLL_INT64, 0, g_world), "scatter: sendbuf == recvbuf");
    REFUSED(coll_scatterv(s, counts, displs, s, counts[g_rank], COLL_INT64, 0, g_world),
            "scatterv: sendbuf == recvbuf");
  }
  {
    int64_t mine = 100 + g_rank, got[kMaxRanks], back = -1;
    OK(coll_gather(&mine, g_rank == 0 ? (void*)got : (void*)&mine, 1, COLL_INT64, 0, g_world));
    for (int i = 0; g_rank == 0 && i < g_size; ++i)
      CHECK(got[i] == 100 + i, "gather with sendbuf == recvbuf off the root: [%d] = %lld", i,
            (long long)got[i]);
    OK(coll_scatter(g_rank == 0 ? (void*)got : (void*)&back, &back, 1, COLL_INT64, 0, g_world));
    CHECK(back == 100 + g_rank, "scatter with sendbuf == recvbuf off the root: %lld",
          (long long)back);
  }
  REFUSED(coll_alltoall(r, r, 1, COLL_INT64, g_world), "alltoall: sendbuf == recvbuf");
  REFUSED(coll_reduce_scatter(r, r, counts, COLL_INT64, COLL_SUM, g_world),
          "reduce_scatter: sendbuf == recvbuf");
  /* This rank's own block of recvbuf, passed as sendbuf: an overlap, not
   * in place, at every rank. */
  REFUSED(coll_allgather(g_recv + g_rank * 2, r, 2, COLL_INT64, g_world),
          g_rank == 0 ? "allgather: sendbuf == recvbuf" : "allgather: sendbuf overlaps recvbuf");
  world_still_works();
  /* A call that moves nothing takes any buffers, the same one twice too
   * (mpi4py passes one empty array's address for both, and MPI accepts
   * it); a v-form's per-rank zero counts do not count as nothing. */
  OK(coll_allgather(r, r, 0, COLL_INT64, g_world));
  OK(coll_alltoall(s, s, 0, COLL_INT64, g_world));
  OK(coll_reduce_scatter_block(r, r, 0, COLL_INT64, COLL_SUM, g_world));
  OK(coll_gather(r, r, 0, COLL_INT64, 0, g_world));
  OK(coll_scatter(s, s, 0, COLL_INT64, g_size - 1, g_world));
  {
    size_t zeros[kMaxRanks] = {0};
    OK(coll_allgatherv(r, 0, r, zeros, displs, COLL_INT64, g_world));
    OK(coll_reduce_scatter(r, r, zeros, COLL_INT64, COLL_SUM, g_world));
  }
  world_still_works();
  /* allreduce's rule: the same buffer twice is in place, on every rank. */
  int64_t x[kCount];
  for (int i = 0; i < kCount; ++i) x[i] = g_rank + i;
  OK(coll_allreduce(x, x, kCount, COLL_INT64, COLL_SUM, g_world));
  for (int i = 0; i < kCount; ++i)
    CHECK(x[i] == (int64_t)g_size * (g_size - 1) / 2 + (int64_t)g_size * i, "x[%d] = %lld", i,
          (long long)x[i]);
  /* And COLL_IN_PLACE still works where it belongs. */
  int64_t all[kMaxRanks * 2];
  for (int i = 0; i < 2 * g_size; ++i) all[i] = i / 2 == g_rank ? 100 * g_rank + i % 2 : -1;
  OK(coll_allgather(COLL_IN_PLACE, all, 2, COLL_INT64, g_world));
  for (int i = 0; i < 2 * g_size; ++i)
    CHECK(all[i] == 100 * (i / 2) + i % 2, "allgather in place [%d] = %lld", i,
          (long long)all[i]);
}

/* The message on the world communicator after a refused call. */
static void world_message_contains(int rc, const char *call, const char *needle) {
  const char *why = coll_comm_last_error(g_world);
  CHECK(rc == COLL_ERR_INVALID_ARG, "%s -> %s, expected COLL_ERR_INVALID_ARG", call,
        coll_strerror(rc));
  CHECK(why && strstr(why, needle), "%s: coll_comm_last_error(world) = '%s', no '%s'", call,
        why ? why : "(null)", needle);
  const char *global = coll_comm_last_error(COLL_COMM_NULL);
  CHECK(global && strstr(global, needle), "%s: coll_comm_last_error(NULL) = '%s', no '%s'", call,
        global ? global : "(null)", needle);
}

static void test_requests(void) {
  double in[4], out[4];
  for (int i = 0; i < 4; ++i) in[i] = g_rank + i;
  const double sum_ranks = (double)g_size * (g_size - 1) / 2;
  coll_request_t req = COLL_REQUEST_NULL;
  OK(coll_allreduce_init(in, out, 4, COLL_DOUBLE, COLL_SUM, g_world, &req));
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 4; ++i) out[i] = -1;
    OK(coll_start(req));
    /* The barrier runs after the allreduce (one communicator, in order):
     * the activation is complete on every rank now, and still active
     * until its wait. It was accepted where complete and refused
     * (silently) where not; then the next wait timed out. */
    if (round % 2 == 0) OK(coll_barrier(g_world));
    world_message_contains(coll_start(req), "second coll_start", "coll_start: the request is active");
    OK(coll_wait(&req));
    CHECK(req != COLL_REQUEST_NULL, "a persistent request was freed by its wait");
    for (int i = 0; i < 4; ++i)
      CHECK(out[i] == sum_ranks + g_size * i, "round %d: out[%d] = %g", round, i, out[i]);
  }
  /* Inactive again: a third start is a new activation, waited by waitall. */
  OK(coll_start(req));
  OK(coll_waitall(1, &req));
  CHECK(out[3] == sum_ranks + g_size * 3, "after waitall: out[3] = %g", out[3]);
  OK(coll_request_free(&req));

  /* One request twice in waitall: refused before anything is waited for. */
  int64_t x[kCount];
  for (int i = 0; i < kCount; ++i) x[i] = g_rank + 1;
  coll_request_t twice[3] = {COLL_REQUEST_NULL, COLL_REQUEST_NULL, COLL_REQUEST_NULL};
  OK(coll_iallreduce(COLL_IN_PLACE, x, kCount, COLL_INT64, COLL_SUM, g_world, &twice[0]));
  twice[2] = twice[0];
  world_message_contains(coll_waitall(3, twice), "coll_waitall with one request twice",
                         "requests[0] and requests[2] are the same request");
  CHECK(twice[0] != COLL_REQUEST_NULL, "the refused waitall completed a request");
  OK(coll_wait(&twice[0]));
  for (int i = 0; i < kCount; ++i)
    CHECK(x[i] == (int64_t)g_size * (g_size + 1) / 2, "iallreduce[%d] = %lld", i, (long long)x[i]);

  coll_comm_t world = g_world;
  world_message_contains(coll_comm_free(&world), "coll_comm_free(&world)",
                         "the world communicator is freed by coll_finalize");
  CHECK(world == g_world, "coll_comm_free(&world) changed the handle");
  CHECK(coll_initialized(NULL) == COLL_ERR_INVALID_ARG, "coll_initialized(NULL) accepted");
  CHECK(strstr(coll_comm_last_error(COLL_COMM_NULL), "NULL flag"),
        "coll_initialized(NULL): no message");
  world_still_works();
}

/* Each bad value makes coll_init fail with a message naming knob and
 * value; then, the knob unset, coll_init succeeds. */
static void test_knobs(int *argc, char ***argv) {
  static const char *const bad[][3] = {
      {"COLL_ZCOPY_THRESHOLD", "-1", "COLL_ZCOPY_THRESHOLD=-1: expected a byte count in [0, "},
      {"COLL_ZCOPY_THRESHOLD", " 5", "COLL_ZCOPY_THRESHOLD= 5: expected"},
      {"COLL_SLOT_SIZE", "-4096", "COLL_SLOT_SIZE=-4096: expected a byte count in [64, "},
      {"COLL_NUM_SLOTS", "+4", "COLL_NUM_SLOTS=+4: expected a count in [3, 16]"},
      {"COLL_NUM_SLOTS", "17", "COLL_NUM_SLOTS=17: expected a count in [3, 16]"},
      {"COLL_SPIN_POLLS", "-1", "COLL_SPIN_POLLS=-1: expected a count in [0, "},
      {"COLL_SHM_ARENA", "-1G", "COLL_SHM_ARENA=-1G: expected a byte count"},
      {"COLL_TIMEOUT", "-1", "COLL_TIMEOUT=-1: expected a number in [0.01, "},
      {"COLL_DEBUG", "2", "COLL_DEBUG=2: expected 0 or 1"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
    const char *was = getenv(bad[k][0]);
    char *saved = was ? strdup(was) : NULL;
    setenv(bad[k][0], bad[k][1], 1);
    const int rc = coll_init(argc, argv);
    const char *why = coll_comm_last_error(COLL_COMM_NULL);
    CHECK(rc == COLL_ERR_INVALID_ARG, "coll_init with %s=%s -> %s (%s)", bad[k][0], bad[k][1],
          coll_strerror(rc), why);
    CHECK(strstr(why, bad[k][2]), "coll_init with %s=%s: message '%s', expected '%s'", bad[k][0],
          bad[k][1], why, bad[k][2]);
    if (saved)
      setenv(bad[k][0], saved, 1);
    else
      unsetenv(bad[k][0]);
    free(saved);
  }
}

/* Rank 0 opens `connections` connections to collrun's rendezvous port and
 * sends each a frame of a type no rank sends first (what a stranger on
 * the machine can do); collrun refuses each and closes it. */
static void flood(int connections) {
  const char *at = getenv("COLL_BOOTSTRAP");
  CHECK(at && strchr(at, ':'), "COLL_BOOTSTRAP=%s: not run by collrun?", at ? at : "(unset)");
  char host[64];
  const size_t host_len = (size_t)(strchr(at, ':') - at);
  CHECK(host_len < sizeof host, "COLL_BOOTSTRAP=%s", at);
  memcpy(host, at, host_len);
  host[host_len] = '\0';
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons((uint16_t)atoi(strchr(at, ':') + 1));
  CHECK(inet_pton(AF_INET, host, &address.sin_addr) == 1, "COLL_BOOTSTRAP=%s", at);
  /* type 99, length 0: not a hello */
  const unsigned char frame[12] = {99};
  int answered = 0;
  for (int i = 0; i < connections; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0, "socket");
    /* Generous: a client that gave up and closed before collrun read its
     * frame would reset the connection, and the frame would go uncounted. */
    struct timeval wait = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    CHECK(connect(fd, (struct sockaddr *)&address, sizeof address) == 0, "connect to %s", at);
    CHECK(write(fd, frame, sizeof frame) == (ssize_t)sizeof frame, "write");
    /* Until collrun closes it (its challenge and its refusal come first),
     * so that each connection was seen before the next. */
    char sink[512];
    ssize_t n;
    while ((n = read(fd, sink, sizeof sink)) > 0) {
    }
    answered += n == 0;
    close(fd);
  }
  printf("rank 0: %d connections sent a bad frame, %d closed by collrun\n", connections, answered);
  CHECK(answered > connections / 2, "collrun closed only %d of %d connections", answered,
        connections);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (strcmp(mode, "knobs") == 0) test_knobs(&argc, &argv);
  OK(coll_init(&argc, &argv));
  g_world = coll_comm_world();
  OK(coll_comm_rank(g_world, &g_rank));
  OK(coll_comm_size(g_world, &g_size));
  CHECK(g_size <= kMaxRanks, "at most %d ranks", kMaxRanks);
  if (strcmp(mode, "in_place") == 0)
    test_in_place();
  else if (strcmp(mode, "counts") == 0)
    test_counts();
  else if (strcmp(mode, "aliasing") == 0)
    test_aliasing();
  else if (strcmp(mode, "requests") == 0)
    test_requests();
  else if (strcmp(mode, "knobs") == 0)
    world_still_works();
  else if (strcmp(mode, "mismatch") == 0)
    test_mismatch();
  else if (strcmp(mode, "flood") == 0) {
    if (g_rank == 0) flood(argc > 2 ? atoi(argv[2]) : 300);
    OK(coll_barrier(g_world));
    world_still_works();
  } else {
    CHECK(0, "unknown mode '%s' (in_place, counts, aliasing, requests, knobs, mismatch, flood)",
          mode);
  }
  OK(coll_finalize());
  if (g_rank == 0) printf("hardening_test %s: ok\n", mode);
  return 0;
}
