/* Issue 31, item 3 (a bad argument rejected on one rank only): garbage in
 * one argument on one rank is an error on every rank that the call
 * depends on, and never a result with COLL_SUCCESS that another call's
 * data made.
 *
 *   refusal_property_test TRIALS [SEED]
 *
 * Every rank draws the same trials from SEED: a collective (blocking or
 * not; under the knob also persistent, whose init is collective there), a count, a root, the rank that misbehaves and what it passes - a
 * NULL or COLL_IN_PLACE buffer where it is significant, datatype or op 999,
 * root out of range, a count past the address space or one that differs
 * from the others', sendbuf == recvbuf, a NULL request or counts array.
 *
 * With COLL_CHECK_ARGS=1 every rank gets the error, nothing is written
 * anywhere, and the communicator stays usable: the trial ends with one
 * correct call of another random collective, checked against closed forms.
 *
 * Without it (docs/architecture.md, "Invalid arguments") the ranks that
 * accepted the call learn of the refusal only from the refusing rank
 * (Channel::notify_refused), so each trial runs on a fresh duplicate of
 * the world: the refusing rank gets its error; every other rank gets an
 * error or, where the call did not need the refusing rank (a bcast root),
 * COLL_SUCCESS with the exact result; the duplicate is freed (it may have
 * failed), and the world's next correct call is exact. Then every rank
 * passes the same garbage on the world: all refuse, and the world stays
 * usable. A count unlike the others' is not drawn there: no rank can
 * refuse it alone. */
#define _POSIX_C_SOURCE 200809L
#include <coll/coll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c_check.h"

enum { kMaxRanks = 8, kMaxCount = 300 };
enum Collective {
  kAllreduce, kBcast, kReduce, kAllgather, kAllgatherv, kAlltoall, kGather, kScatter,
  kScan, kExscan, kReduceScatterBlock, kCollectives
};
static const char *const kNames[] = {"allreduce", "bcast", "reduce", "allgather", "allgatherv",
                                     "alltoall", "gather", "scatter", "scan", "exscan",
                                     "reduce_scatter_block"};
enum Garbage {
  kNullSend, kNullRecv, kInPlaceRecv, kBadDatatype, kBadOp, kBadRoot, kHugeCount, kOtherCount,
  kAliased, kNullRequest, kNullCounts, kGarbageKinds
};
static const char *const kGarbageNames[] = {
    "NULL sendbuf", "NULL recvbuf", "COLL_IN_PLACE recvbuf", "datatype 999", "op 999",
    "root out of range", "count 2^61", "a count unlike the others'", "sendbuf == recvbuf",
    "NULL request", "NULL recvcounts"};

static int g_size;
static coll_comm_t g_comm; /* where issue() calls */
static int64_t g_send[kMaxRanks * kMaxCount], g_recv[kMaxRanks * kMaxCount + kMaxRanks];
static const int64_t kUntouched = -0x5a5a5a5a5a5a5a5aLL;

static uint64_t g_state;
static uint64_t next_random(void) { /* xorshift64*: the same draws on every rank */
  g_state ^= g_state >> 12, g_state ^= g_state << 25, g_state ^= g_state >> 27;
  return g_state * 2685821657736338717ULL;
}
static int draw(int n) { return (int)(next_random() % (uint64_t)n); }

/* What rank `src` holds at index i of its send buffer. */
static int64_t value(int src, size_t i) { return (int64_t)src * 100000 + (int64_t)i; }

struct Call {
  int coll, nonblocking, root;
  const void *sendbuf;
  void *recvbuf;
  size_t count;
  coll_datatype_t datatype;
  coll_op_t op;
  size_t counts[kMaxRanks], displs[kMaxRanks];
  const size_t *recvcounts;
  coll_request_t request, *request_ptr;
};

static int rooted(int c) { return c == kBcast || c == kReduce || c == kGather || c == kScatter; }
static int reduction(int c) {
  return c == kAllreduce || c == kReduce || c == kScan || c == kExscan || c == kReduceScatterBlock;
}

/* A correct call of collective c: this rank's data in g_send, g_recv
 * filled with kUntouched. allgatherv's counts differ per rank and leave a
 * gap of one element between blocks. */
static void correct_call(struct Call *k, int c, size_t count, int root, int nonblocking) {
  memset(k, 0, sizeof *k);
  k->coll = c, k->count = count, k->root = root, k->nonblocking = nonblocking;
  k->datatype = COLL_INT64, k->op = COLL_SUM;
  k->sendbuf = g_send, k->recvbuf = g_recv;
  k->request = COLL_REQUEST_NULL, k->request_ptr = &k->request;
  size_t at = 0;
  for (int r = 0; r < g_size; ++r) {
    k->counts[r] = count + (size_t)r;
    k->displs[r] = at;
    at += k->counts[r] + 1;
  }
  k->recvcounts = k->counts;
  for (size_t i = 0; i < sizeof g_send / sizeof *g_send; ++i) g_send[i] = value(g_rank, i);
  for (size_t i = 0; i < sizeof g_recv / sizeof *g_recv; ++i) g_recv[i] = kUntouched;
  if (c == kBcast)
    for (size_t i = 0; i < count; ++i) g_recv[i] = g_rank == root ? value(root, i) : kUntouched;
}

/* Whether garbage g on rank `bad` is something that rank must refuse. */
static int applies(int g, const struct Call *k, int bad) {
  const int c = k->coll, at_root = bad == k->root;
  switch (g) {
    case kNullSend: return c != kBcast && (c != kScatter || at_root);
    case kNullRecv: return (c != kGather && c != kReduce) || at_root;
    case kInPlaceRecv: return c != kScatter || !at_root; /* the root's in-place scatter */
    case kBadOp: return reduction(c);
    case kBadRoot: return rooted(c);
    case kOtherCount: return c != kAllgatherv;
    case kAliased:
      return c == kAllgather || c == kAlltoall || c == kAllgatherv ||
             ((c == kGather || c == kScatter) && at_root);
    case kNullRequest: return k->nonblocking;
    case kNullCounts: return c == kAllgatherv;
    default: return 1;
  }
}

static void spoil(struct Call *k, int g) {
  switch (g) {
    case kNullSend: k->sendbuf = NULL; break;
    case kNullRecv: k->recvbuf = NULL; break;
    case kInPlaceRecv: k->recvbuf = COLL_IN_PLACE; break;
    case kBadDatatype: k->datatype = (coll_datatype_t)999; break;
    case kBadOp: k->op = (coll_op_t)999; break;
    case kBadRoot: k->root = (k->count & 1) ? g_size : -1; break; /* no draw: one rank only */
    case kHugeCount: k->count = (size_t)1 << 61; break;
    case kOtherCount: k->count += 1; break;
    case kAliased: k->sendbuf = k->recvbuf; break;
    case kNullRequest: k->request_ptr = NULL; break;
    case kNullCounts: k->recvcounts = NULL; break;
  }
}

/* Starts and completes the call; its status. k->nonblocking: 0 blocking,
 * 1 non-blocking, 2 persistent (init, one start, wait, free). */
static int issue(struct Call *k) {
  const void *s = k->sendbuf;
  void *r = k->recvbuf;
  const size_t n = k->count;
  const coll_datatype_t t = k->datatype;
  const coll_op_t op = k->op;
  const int root = k->root;
  const coll_comm_t w = g_comm;
  coll_request_t *q = k->request_ptr;
  int rc;
  if (!k->nonblocking) {
    switch (k->coll) {
      case kAllreduce: return coll_allreduce(s, r, n, t, op, w);
      case kBcast: return coll_bcast(r, n, t, root, w);
      case kReduce: return coll_reduce(s, r, n, t, op, root, w);
      case kAllgather: return coll_allgather(s, r, n, t, w);
      case kAllgatherv: return coll_allgatherv(s, n + (size_t)g_rank, r, k->recvcounts, k->displs, t, w);
      case kAlltoall: return coll_alltoall(s, r, n, t, w);
      case kGather: return coll_gather(s, r, n, t, root, w);
      case kScatter: return coll_scatter(s, r, n, t, root, w);
      case kScan: return coll_scan(s, r, n, t, op, w);
      case kExscan: return coll_exscan(s, r, n, t, op, w);
      default: return coll_reduce_scatter_block(s, r, n, t, op, w);
    }
  }
  const int persistent = k->nonblocking == 2;
  /* coll_iNAME or coll_NAME_init, with the same arguments. */
#define START(name, ...) \
  (persistent ? coll_##name##_init(__VA_ARGS__, w, q) : coll_i##name(__VA_ARGS__, w, q))
  switch (k->coll) {
    case kAllreduce: rc = START(allreduce, s, r, n, t, op); break;
    case kBcast: rc = START(bcast, r, n, t, root); break;
    case kReduce: rc = START(reduce, s, r, n, t, op, root); break;
    case kAllgather: rc = START(allgather, s, r, n, t); break;
    case kAllgatherv:
      rc = START(allgatherv, s, n + (size_t)g_rank, r, k->recvcounts, k->displs, t);
      break;
    case kAlltoall: rc = START(alltoall, s, r, n, t); break;
    case kGather: rc = START(gather, s, r, n, t, root); break;
    case kScatter: rc = START(scatter, s, r, n, t, root); break;
    case kScan: rc = START(scan, s, r, n, t, op); break;
    case kExscan: rc = START(exscan, s, r, n, t, op); break;
    default: rc = START(reduce_scatter_block, s, r, n, t, op); break;
  }
#undef START
  if (rc != COLL_SUCCESS) return rc;
  if (!persistent) return coll_wait(q);
  rc = coll_start(*q);
  if (rc == COLL_SUCCESS) rc = coll_wait(q);
  const int freed = coll_request_free(q);
  return rc != COLL_SUCCESS ? rc : freed;
}

static const char *form_name(const struct Call *k) {
  return k->nonblocking == 2 ? " (persistent)" : k->nonblocking ? " (non-blocking)" : "";
}

static int64_t sum_over(int from, int to, size_t i) { /* sum of value(r, i), from <= r < to */
  int64_t s = 0;
  for (int r = from; r < to; ++r) s += value(r, i);
  return s;
}

/* The closed form of element i of this rank's g_recv after call k, or
 * kUntouched where the call writes nothing. */
static int64_t expected(const struct Call *k, size_t i) {
  const size_t n = k->count;
  const int me = g_rank, p = g_size;
  switch (k->coll) {
    case kAllreduce: return i < n ? sum_over(0, p, i) : kUntouched;
    case kReduce: return i < n && me == k->root ? sum_over(0, p, i) : kUntouched;
    case kScan: return i < n ? sum_over(0, me + 1, i) : kUntouched;
    case kExscan: return i < n && me > 0 ? sum_over(0, me, i) : kUntouched;
    case kReduceScatterBlock: return i < n ? sum_over(0, p, (size_t)me * n + i) : kUntouched;
    case kBcast: return i < n ? value(k->root, i) : kUntouched;
    case kScatter: return i < n ? value(k->root, (size_t)me * n + i) : kUntouched;
    case kAllgather: return i < n * (size_t)p ? value((int)(i / n), i % n) : kUntouched;
    case kAlltoall:
      return i < n * (size_t)p ? value((int)(i / n), (size_t)me * n + i % n) : kUntouched;
    case kGather:
      return me == k->root && i < n * (size_t)p ? value((int)(i / n), i % n) : kUntouched;
    default: /* allgatherv: block r at displs[r], counts[r] long */
      for (int r = 0; r < p; ++r)
        if (i >= k->displs[r] && i < k->displs[r] + k->counts[r]) return value(r, i - k->displs[r]);
      return kUntouched;
  }
}

static void check_recv(const struct Call *k, int trial, const char *what) {
  for (size_t i = 0; i < sizeof g_recv / sizeof *g_recv; ++i) {
    const int64_t want = expected(k, i);
    CHECK(g_recv[i] == want, "trial %d, %s coll_%s%s count %zu root %d: recv[%zu] = %lld, not %lld",
          trial, what, kNames[k->coll], form_name(k), k->count,
          k->root, i, (long long)g_recv[i], (long long)want);
  }
}

/* COLL_CHECK_ARGS=1: every rank refuses; the world's next call is exact. */
static void checked_trial(int trial, const size_t *counts, int *refused_by) {
  struct Call k;
  const int c = draw(kCollectives);
  /* Blocking, non-blocking or persistent: a persistent init is collective
   * under the knob, so a refused one fails every rank's init. */
  correct_call(&k, c, counts[draw(4)], draw(g_size), draw(3));
  const int bad = draw(g_size);
  int g;
  do g = draw(kGarbageKinds); while (!applies(g, &k, bad));
  if (g_rank == bad) spoil(&k, g);
  const int rc = issue(&k);
  const char *msg = coll_comm_last_error(g_comm);
  CHECK(rc == COLL_ERR_INVALID_ARG,
        "trial %d: rank %d passed %s to coll_%s%s: this rank got %s (%s), not an error",
        trial, bad, kGarbageNames[g], kNames[c], form_name(&k),
        coll_strerror(rc), msg);
  /* The others name the rank that refused (or the mismatch). */
  if (g_rank != bad)
    CHECK(strstr(msg, "refused the call") || strstr(msg, "argument mismatch"),
          "trial %d: message '%s'", trial, msg);
  /* Nothing written (bcast's buffer holds the root's data, checked by the
   * next call's). */
  if (c != kBcast) {
    struct Call none = k;
    none.coll = kAllreduce, none.count = 0; /* expected(): kUntouched everywhere */
    check_recv(&none, trial, "refused");
  }
  ++refused_by[g];
}

/* Without the knob: garbage on one rank, on a duplicate of the world. */
static void one_rank_trial(int trial, const size_t *counts, int *refused_by, int *succeeded) {
  struct Call k;
  const int c = draw(kCollectives);
  /* Persistent too: the refusing rank has no request, the others' start
   * fails where it needs that rank (Channel::notify_refused_init). */
  correct_call(&k, c, counts[draw(4)], draw(g_size), draw(3));
  const int bad = draw(g_size);
  int g;
  do g = draw(kGarbageKinds); while (g == kOtherCount || !applies(g, &k, bad));
  if (g_rank == bad) spoil(&k, g);
  OK(coll_comm_dup(coll_comm_world(), &g_comm));
  const int rc = issue(&k);
  const char *msg = coll_comm_last_error(g_comm);
  if (g_rank == bad) {
    CHECK(rc == COLL_ERR_INVALID_ARG, "trial %d: this rank passed %s to coll_%s%s: got %s (%s)",
          trial, kGarbageNames[g], kNames[c], form_name(&k), coll_strerror(rc), msg);
    if (c != kBcast) {
      struct Call none = k;
      none.coll = kAllreduce, none.count = 0;
      check_recv(&none, trial, "refused");
    }
    ++refused_by[g];
  } else if (rc == COLL_SUCCESS) {
    /* Only a call that did not need rank `bad`'s part, with its result. */
    check_recv(&k, trial, "accepted, and rank(s) refused");
    ++*succeeded;
  } else {
    /* The refusal; or a peer that learnt of it first (Channel::notify_failed),
     * or one that has freed the duplicate since (its call did not need the
     * refusing rank, or failed too). */
    CHECK(strstr(msg, "refused") || strstr(msg, "failed at rank") ||
          strstr(msg, "has left the communicator"),
          "trial %d: rank %d passed %s to coll_%s: this rank got %s (%s), which names neither "
          "the refusal nor a failed peer", trial, bad, kGarbageNames[g], kNames[c],
          coll_strerror(rc), msg);
  }
  OK(coll_comm_free(&g_comm));
  /* Every rank passes the same garbage on the world: all refuse it, and
   * the world stays in step (checked by the next call). */
  g_comm = coll_comm_world();
  struct Call all;
  correct_call(&all, draw(kCollectives), counts[draw(4)], draw(g_size), draw(3));
  do g = draw(kGarbageKinds); while (g == kOtherCount || !applies(g, &all, all.root) ||
                                     !applies(g, &all, (all.root + 1) % g_size));
  spoil(&all, g);
  const int all_rc = issue(&all);
  CHECK(all_rc == COLL_ERR_INVALID_ARG, "trial %d: every rank passed %s to coll_%s%s: got %s (%s)",
        trial, kGarbageNames[g], kNames[all.coll], form_name(&all), coll_strerror(all_rc),
        coll_comm_last_error(g_comm));
}

int main(int argc, char **argv) {
  const int trials = argc > 1 ? atoi(argv[1]) : 1000;
  g_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 0x2545F4914F6CDD1DULL;
  if (!g_state) g_state = 1;
  OK(coll_init(&argc, &argv));
  g_rank = rank_of(coll_comm_world());
  g_size = size_of(coll_comm_world());
  const char *knob = getenv("COLL_CHECK_ARGS");
  const int checked = knob && strcmp(knob, "1") == 0;
  CHECK(g_size >= 2 && g_size <= kMaxRanks, "2 to %d ranks", kMaxRanks);
  static const size_t kCounts[] = {1, 5, 37, kMaxCount};
  int refused_by[kGarbageKinds] = {0}, succeeded = 0;
  for (int trial = 0; trial < trials; ++trial) {
    g_comm = coll_comm_world();
    if (checked)
      checked_trial(trial, kCounts, refused_by);
    else
      one_rank_trial(trial, kCounts, refused_by, &succeeded);
    /* The next correct call on the world, of another collective, is exact. */
    g_comm = coll_comm_world();
    struct Call next;
    correct_call(&next, draw(kCollectives), kCounts[draw(4)], draw(g_size), draw(2));
    const int next_rc = issue(&next);
    CHECK(next_rc == COLL_SUCCESS, "trial %d: then coll_%s%s count %zu root %d -> %s (%s)",
          trial, kNames[next.coll], next.nonblocking ? " (non-blocking)" : "", next.count,
          next.root, coll_strerror(next_rc), coll_comm_last_error(g_comm));
    check_recv(&next, trial, "after it,");
  }
  /* Sums over the ranks: what the others saw of the refusals. */
  int total_succeeded = 0, total_refused[kGarbageKinds];
  OK(coll_allreduce(&succeeded, &total_succeeded, 1, COLL_INT32, COLL_SUM, coll_comm_world()));
  OK(coll_allreduce(refused_by, total_refused, kGarbageKinds, COLL_INT32, COLL_SUM,
                    coll_comm_world()));
  if (g_rank == 0) {
    printf("refusal_property_test: %d trials at np %d%s, refused:", trials, g_size,
           checked ? " (COLL_CHECK_ARGS=1), refusals seen by the ranks"
                   : ", refusals at the refusing rank");
    for (int g = 0; g < kGarbageKinds; ++g) printf(" %s %d;", kGarbageNames[g], total_refused[g]);
    if (!checked)
      printf(" calls completed exactly at ranks that did not need the refusing one: %d",
             total_succeeded);
    printf("\n");
  }
  OK(coll_finalize());
  return 0;
}
