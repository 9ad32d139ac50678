// Threads (COLL_THREAD_MULTIPLE): every thread drives its own communicator
// (a dup of the world), all at once, and every result is exact; two threads
// entering the same communicator at once are detected (COLL_ERR_INVALID_ARG
// on one of them) and the communicator is failed on every rank, so that
// calls paired across threads stop completing. Built also with
// ThreadSanitizer (tests/threads/meson.build).
#include <coll/coll.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

int g_rank = -1;

void expect(bool ok, const char* what, long a, long b) {
  if (ok) return;
  std::fprintf(stderr, "[rank %d] threads_test: %s: got %ld, expected %ld\n", g_rank, what, a, b);
  std::exit(1);
}

void ok(int rc, const char* what) {
  if (rc == COLL_SUCCESS) return;
  std::fprintf(stderr, "[rank %d] threads_test: %s: %s\n", g_rank, what, coll_strerror(rc));
  std::exit(1);
}

// Every rank's call on comm fails (the communicator is failed on every
// rank, not on the ranks where the overlap was seen): a call that needs
// every rank - an allreduce of one element.
void expect_failed_everywhere(coll_comm_t comm, const char* when) {
  int64_t x = 1;
  const int rc = coll_allreduce(COLL_IN_PLACE, &x, 1, COLL_INT64, COLL_SUM, comm);
  if (rc != COLL_SUCCESS) return;
  std::fprintf(stderr, "[rank %d] threads_test: %s: the shared communicator still works here "
               "(not failed on every rank)\n", g_rank, when);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = -1;
  ok(coll_init_thread(&argc, &argv, COLL_THREAD_MULTIPLE, &provided), "init");
  expect(provided == COLL_THREAD_MULTIPLE, "provided", provided, COLL_THREAD_MULTIPLE);
  coll_comm_t world = coll_comm_world();
  int n = 0;
  ok(coll_comm_rank(world, &g_rank), "rank");
  ok(coll_comm_size(world, &n), "size");
  const int threads = argc > 1 ? std::atoi(argv[1]) : 3;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 300;

  // One communicator per thread, made in the same order on every rank.
  std::vector<coll_comm_t> comms(size_t(threads), COLL_COMM_NULL);
  for (auto& c : comms) ok(coll_comm_dup(world, &c), "dup");

  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      coll_comm_t c = comms[size_t(t)];
      std::vector<int64_t> v(size_t(33 + 1000 * t));
      for (int i = 0; i < iters; ++i) {
        for (auto& x : v) x = int64_t(g_rank + 1) * (i + t);
        if (i % 3 == 0) {
          coll_request_t r;
          ok(coll_iallreduce(COLL_IN_PLACE, v.data(), v.size(), COLL_INT64, COLL_SUM, c, &r),
             "iallreduce");
          ok(coll_wait(&r), "wait");
        } else {
          ok(coll_allreduce(COLL_IN_PLACE, v.data(), v.size(), COLL_INT64, COLL_SUM, c),
             "allreduce");
        }
        for (auto x : v)
          expect(x == int64_t(n) * (n + 1) / 2 * (i + t), "allreduce on a thread's communicator",
                 long(x), long(int64_t(n) * (n + 1) / 2 * (i + t)));
        int root = i % n, y = g_rank == root ? i : -1;
        ok(coll_bcast(&y, 1, COLL_INT32, root, c), "bcast");
        expect(y == i, "bcast", y, i);
      }
    });
  }
  for (auto& th : pool) th.join();

  // Two threads on ONE communicator at once: erroneous, detected, and the
  // communicator failed on every rank (issue 31 item 2). Both threads enter
  // it as fast as they can with calls that move nothing (count 0: no rank
  // needs to match them), until one is refused; on two or more cores that
  // happens within microseconds, and the loop is bounded (a million calls
  // each).
  {
    coll_comm_t shared = comms[0];
    std::atomic<int> refused{0};
    std::atomic<bool> stop{false};
    auto hammer = [&] {
      int64_t x = 1;
      for (int k = 0; k < 1000000 && !stop.load(); ++k) {
        const int rc = coll_allreduce(COLL_IN_PLACE, &x, 0, COLL_INT64, COLL_SUM, shared);
        if (rc == COLL_ERR_INVALID_ARG) {
          ++refused;
          stop = true;
        } else {
          ok(rc, "allreduce of 0 elements");
        }
      }
    };
    std::thread a(hammer), b(hammer);
    a.join();
    b.join();
    expect(refused.load() > 0, "two threads on one communicator were never refused", 0, 1);
    expect_failed_everywhere(shared, "after two threads' calls of 0 elements");
  }

  // The same with calls that move data, as a program that shares a
  // communicator between threads makes them: thread A adds rank + 1,
  // thread B 1000 * (rank + 1), one element, same count. Where the threads
  // interleave differently on two ranks, A's call at one pairs with B's at
  // the other: a sum that is neither closed form. Before the fix the loser
  // alone was refused and such calls went on completing with COLL_SUCCESS
  // (up to every call of 2000); now the first overlap fails the
  // communicator, every thread on every rank stops with an error, and the
  // communicator stays failed (checked on every rank). Mispaired calls
  // that completed before the first overlap any rank saw cannot be told
  // (no rank sees them): counted and printed, not asserted.
  // (Not at np 1: nothing to pair.)
  coll_comm_t raced = COLL_COMM_NULL;
  if (n > 1) {
    coll_comm_t& shared = raced;
    ok(coll_comm_dup(world, &shared), "dup");
    std::atomic<int> errors{0}, mispaired{0};
    auto racer = [&](int64_t scale) {
      for (int k = 0; k < 100000; ++k) {
        int64_t x = scale * (g_rank + 1);
        const int rc = coll_allreduce(COLL_IN_PLACE, &x, 1, COLL_INT64, COLL_SUM, shared);
        if (rc != COLL_SUCCESS) {
          expect(rc == COLL_ERR_INVALID_ARG, "a racing call's error", rc, COLL_ERR_INVALID_ARG);
          ++errors;
          return;
        }
        if (x != scale * n * (n + 1) / 2) ++mispaired;
      }
    };
    std::thread a(racer, 1), b(racer, 1000);
    a.join();
    b.join();
    expect(errors.load() == 2, "threads that stopped with an error", errors.load(), 2);
    expect_failed_everywhere(shared, "after two threads' calls of 1 element");
    if (g_rank == 0)
      std::printf("threads_test: one communicator, two threads: failed on every rank; %d "
                  "mispaired calls completed before the first overlap at rank 0\n",
                  mispaired.load());
  }

  // The world is untouched. Checked before the failed communicators are
  // freed: over tcp a write that reaches a freed window fails the pair's
  // whole stream (issue 33), and a racing call's write may still be on its
  // way; the world's allreduce comes after it on the same stream.
  {
    int64_t x = g_rank + 1;
    ok(coll_allreduce(COLL_IN_PLACE, &x, 1, COLL_INT64, COLL_SUM, world), "world allreduce");
    expect(x == int64_t(n) * (n + 1) / 2, "world allreduce after the failed ones", long(x),
           long(int64_t(n) * (n + 1) / 2));
  }
  if (raced != COLL_COMM_NULL) ok(coll_comm_free(&raced), "free of the failed communicator");

  for (auto& c : comms) ok(coll_comm_free(&c), "free");
  ok(coll_finalize(), "finalize");
  if (g_rank == 0) std::printf("threads_test: %d threads x %d iterations at np %d: exact\n",
                               threads, iters, n);
  return 0;
}
