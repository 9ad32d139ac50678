// Threads (COLL_THREAD_MULTIPLE): every thread drives its own communicator
// (a dup of the world), all at once, and every result is exact; two threads
// entering the same communicator at once are detected (COLL_ERR_INVALID_ARG
// on one of them), never a silently wrong result. Built also with
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

  // Two threads on ONE communicator at once: erroneous, detected. Both
  // threads enter it as fast as they can with calls that move nothing
  // (count 0: no rank needs to match them), until one is refused; on two
  // or more cores that happens within microseconds, and the loop is
  // bounded (a million calls each).
  {
    coll_comm_t shared = comms[0];
    std::atomic<int> refused{0}, ran{0};
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
          ++ran;
        }
      }
    };
    std::thread a(hammer), b(hammer);
    a.join();
    b.join();
    expect(refused.load() > 0, "two threads on one communicator were never refused", 0, 1);
  }

  for (auto& c : comms) ok(coll_comm_free(&c), "free");
  ok(coll_finalize(), "finalize");
  if (g_rank == 0) std::printf("threads_test: %d threads x %d iterations at np %d: exact\n",
                               threads, iters, n);
  return 0;
}
