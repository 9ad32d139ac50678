// Windows (Transport::alloc_window / free_window) on shm, tcp and shm+tcp,
// with real processes: ranks are forked children that trade setup data
// through FileBootstrap (tests/rdma/file_bootstrap.hpp), real shared-memory
// segments in /dev/shm, real sockets over 127.0.0.1. shm+tcp runs four
// ranks that pretend to live on two hosts {0,1} and {2,3}, so both of its
// paths are crossed.
//
// Children report through their exit status and stderr: gtest assertions
// live in the parent only. Every wait is bounded; no test asserts a time.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "env.hpp"
#include "error.hpp"
#include "tests/rdma/file_bootstrap.hpp"
#include "tests/rdma/forked_ranks.hpp"
#include "transport/hybrid_transport.hpp"
#include "transport/tcp_transport.hpp"
#include "transport/transport.hpp"
#include "transport/window_arena.hpp"

namespace coll {
namespace {

using test::deadline_after;
using test::exchange_regions;
using test::expect_all_succeeded;
using test::FileBootstrap;
using test::pattern;
using Clock = std::chrono::steady_clock;

constexpr double kTimeout = 60;  // bound of every wait in a rank, seconds
constexpr int kSkipped = 77;     // a rank's exit status: the case cannot run here

const size_t kPage = size_t(sysconf(_SC_PAGESIZE));

size_t page_round(size_t n) { return (n + kPage - 1) / kPage * kPage; }

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ------------------------------------------------------------ the three kinds

enum class Kind { kShm, kTcp, kHybrid };
const char* const kKindNames[] = {"Shm", "Tcp", "ShmTcp"};

int ranks_of(Kind kind) { return kind == Kind::kHybrid ? 4 : 2; }

// Whether rank a reaches rank b through shared memory.
bool same_host(Kind kind, int a, int b) {
  if (kind == Kind::kShm) return true;
  if (kind == Kind::kTcp) return false;
  return a / 2 == b / 2;
}

TransportOptions options(size_t arena_bytes = kMinWindowArenaBytes) {
  TransportOptions o;
  o.window_arena_bytes = arena_bytes;
  o.timeout_s = kTimeout;
  return o;
}

std::unique_ptr<Transport> make(Kind kind, FileBootstrap& boot,
                                const TransportOptions& opts = options()) {
  switch (kind) {
    case Kind::kShm:
      return make_shm_transport(boot, opts);
    case Kind::kTcp:
      return make_tcp_transport(boot, opts);
    case Kind::kHybrid:
      break;
  }
  const std::vector<std::string> hosts = {"hostA", "hostA", "hostB", "hostB"};
  return make_hybrid_transport(boot, opts, hosts);
}

std::vector<int> run_ranks(int size, const test::ForkedBody& body, double bound_s = 120) {
  return test::run_forked_ranks("window", size, body, bound_s);
}

// Polls until ready() (tcp applies incoming writes in poll), and asks
// check_peer now and then. False on an error completion, a throw or the
// bound; `error` says which.
struct Waiter {
  explicit Waiter(Transport& transport) : t(transport) {}

  Transport& t;
  int status = 0;     // of an error completion, or of check_peer's Error
  std::string error;  // check_peer's message

  template <class Ready>
  bool until(Ready ready, int peer) {
    const auto deadline = deadline_after(kTimeout);
    for (uint64_t spin = 0;; ++spin) {
      Completion wc[16];
      const int n = t.poll(wc, 16);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != 0) {
          status = wc[i].status;
          capture(peer);
          return false;
        }
      }
      if (ready()) return true;
      if (spin % 1024 == 1023) {
        if (!capture(peer) || Clock::now() > deadline) return false;
        std::this_thread::yield();
      }
    }
  }

  // Waits for the transport to fail; true when it did with `want`.
  bool fails_with(int want, int peer) {
    if (until([] { return false; }, peer)) return false;
    if (error.empty()) capture(peer);
    return status == want;
  }

  bool capture(int peer) {
    try {
      t.check_peer(peer);
      return true;
    } catch (const Error& e) {
      status = e.status();
      error = e.what();
      return false;
    }
  }
};

// The first byte of [p, p + n) that is not zero, or -1.
long first_nonzero(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != 0) return long(i);
  return -1;
}

// Runs f, which must throw coll::Error with `status`; the message, or why
// not.
template <class F>
std::optional<std::string> throws_status(int status, F f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.status() == status) return std::string(e.what());
    std::fprintf(stderr, "rank %d: status %d instead of %d: %s\n", test::g_child_rank,
                 e.status(), status, e.what());
    return std::nullopt;
  }
  std::fprintf(stderr, "rank %d: no throw\n", test::g_child_rank);
  return std::nullopt;
}

// ------------------------------------------------------------ /proc helpers

int open_fd_count() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir))
      if (e->d_name[0] != '.') ++count;
    closedir(dir);
  }
  return count;
}

// The descriptor of this rank's own segment, which the shm transport keeps
// open (its name is unlinked after setup); -1 when there is none.
int own_segment_fd(const FileBootstrap& boot) {
  const std::string want =
      "/dev/shm/coll-" + boot.job_id() + "-" + std::to_string(boot.rank()) + " (deleted)";
  int found = -1;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(dir)) {
      if (e->d_name[0] == '.') continue;
      char target[512] = {};
      const std::string link = std::string("/proc/self/fd/") + e->d_name;
      const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
      if (n > 0 && want == target) found = std::atoi(e->d_name);
    }
    closedir(dir);
  }
  return found;
}

// Bytes of /dev/shm that the segment holds (its allocated blocks).
long long segment_bytes(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return -1;
  return static_cast<long long>(st.st_blocks) * 512;
}

// Whether no page of [p, p + n) is mapped any more (mincore: ENOMEM).
bool unmapped(const void* p, size_t n) {
  std::vector<unsigned char> pages(page_round(n) / kPage);
  return mincore(const_cast<void*>(p), page_round(n), pages.data()) != 0 && errno == ENOMEM;
}

// ------------------------------------------------------------ two windows

class Windows : public ::testing::TestWithParam<Kind> {};

// Sizes of the two windows of a rank: not multiples of a page.
constexpr size_t kSmall = 3 * 4096 + 100;  // each peer writes 512 bytes at 512 x its rank
constexpr size_t kLarge = 64 * 1024 + 8;   // 4096 bytes at 4096 x its rank; flags at kFlags
constexpr size_t kFlags = 32 * 1024;       // 8 bytes per peer, in the large window
constexpr size_t kLines = 48 * 1024;       // a line message per shm peer (64 bytes each)

struct TwoWindows {
  uint8_t* small = nullptr;
  uint8_t* large = nullptr;
  MemoryRegion* small_mr = nullptr;
  MemoryRegion* large_mr = nullptr;
  std::vector<RemoteRegion> remote_small, remote_large;
};

// Allocates and checks both windows, registers them and trades them.
int open_two_windows(Transport& t, FileBootstrap& boot, TwoWindows* w) {
  w->small = static_cast<uint8_t*>(t.alloc_window(kSmall));
  w->large = static_cast<uint8_t*>(t.alloc_window(kLarge));
  CHILD_CHECK(w->small && w->large, "null window");
  for (uint8_t* p : {w->small, w->large})
    CHILD_CHECK(reinterpret_cast<uintptr_t>(p) % kPage == 0, "window %p not page aligned",
                static_cast<void*>(p));
  const auto s = reinterpret_cast<uintptr_t>(w->small), l = reinterpret_cast<uintptr_t>(w->large);
  CHILD_CHECK(s + page_round(kSmall) <= l || l + page_round(kLarge) <= s, "windows overlap");
  // Zeroed, up to the page rounding (which is the caller's too).
  CHILD_CHECK(first_nonzero(w->small, page_round(kSmall)) < 0, "small window not zeroed");
  CHILD_CHECK(first_nonzero(w->large, page_round(kLarge)) < 0, "large window not zeroed");
  w->small_mr = t.reg_write(w->small, kSmall);
  w->large_mr = t.reg_write(w->large, kLarge);
  w->remote_small = exchange_regions(boot, w->small_mr, kTimeout);
  w->remote_large = exchange_regions(boot, w->large_mr, kTimeout);
  return 0;
}

// Every rank writes `round`'s pattern into both windows of every rank
// (itself included), then a flag `round`; waits for every peer's flag and
// checks what they wrote.
int write_both_windows(Kind kind, Transport& t, FileBootstrap& boot, const TwoWindows& w,
                       int round) {
  const int me = boot.rank(), n = boot.size();
  std::vector<uint8_t> a(512), b(4096);
  for (size_t i = 0; i < a.size(); ++i) a[i] = pattern(me, round, i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = pattern(me, round + 100, i);
  for (int peer = 0; peer < n; ++peer) {
    const RemoteRegion& rs = w.remote_small[size_t(peer)];
    const RemoteRegion& rl = w.remote_large[size_t(peer)];
    CHILD_CHECK(t.post_write(peer, 0, a.data(), a.size(), nullptr, 0, rs.addr + 512 * uint64_t(me),
                             rs.rkey) == 0,
                "small window of %d: %s", peer, std::strerror(errno));
    CHILD_CHECK(t.post_write(peer, 0, b.data(), b.size(), nullptr, 0,
                             rl.addr + 4096 * uint64_t(me), rl.rkey) == 0,
                "large window of %d: %s", peer, std::strerror(errno));
    if (same_host(kind, me, peer)) {
      // Line messages need the target's region inside its segment: the
      // window must be arena memory, not memory reached with CMA.
      CHILD_CHECK(t.line_writes(peer), "line writes to %d", peer);
      CHILD_CHECK(t.post_lines(peer, a.data(), 56, uint64_t(round), rl.addr + kLines + 64 * me,
                               rl.rkey) == 0,
                  "line message to %d: %s (is the window in the segment?)", peer,
                  std::strerror(errno));
    }
    const uint64_t flag = uint64_t(round);
    CHILD_CHECK(t.post_write(peer, 0, &flag, 8, nullptr, 0, rl.addr + kFlags + 8 * uint64_t(me),
                             rl.rkey) == 0,
                "flag to %d: %s", peer, std::strerror(errno));
  }
  Waiter wait{t};
  auto* flags = reinterpret_cast<uint64_t*>(w.large + kFlags);
  for (int peer = 0; peer < n; ++peer) {
    CHILD_CHECK(wait.until(
                    [&] {
                      return __atomic_load_n(&flags[peer], __ATOMIC_ACQUIRE) == uint64_t(round);
                    },
                    peer),
                "round %d: flag from %d: %s", round, peer, wait.error.c_str());
    for (size_t i = 0; i < 512; ++i)
      CHILD_CHECK(w.small[512 * size_t(peer) + i] == pattern(peer, round, i),
                  "round %d: small window byte %zu from %d", round, i, peer);
    for (size_t i = 0; i < 4096; ++i)
      CHILD_CHECK(w.large[4096 * size_t(peer) + i] == pattern(peer, round + 100, i),
                  "round %d: large window byte %zu from %d", round, i, peer);
    if (same_host(kind, me, peer)) {
      uint64_t line_flag;
      std::memcpy(&line_flag, w.large + kLines + 64 * size_t(peer), 8);
      CHILD_CHECK(line_flag == uint64_t(round) &&
                      std::memcmp(w.large + kLines + 64 * size_t(peer) + 8, w.small +
                                  512 * size_t(peer), 56) == 0,
                  "round %d: line message from %d", round, peer);
    }
  }
  return 0;
}

TEST_P(Windows, TwoWindowsTakeWritesFromEveryPeer) {
  const Kind kind = GetParam();
  expect_all_succeeded(run_ranks(ranks_of(kind), [kind](FileBootstrap& boot, const std::string&) {
    auto t = make(kind, boot);
    TwoWindows w;
    if (int rc = open_two_windows(*t, boot, &w)) return rc;
    if (int rc = write_both_windows(kind, *t, boot, w, 1)) return rc;
    boot.barrier(kTimeout);  // every write has landed everywhere
    CHILD_CHECK(t->dereg(w.small_mr) == 0 && t->dereg(w.large_mr) == 0, "dereg");
    t->free_window(w.small, kSmall);
    t->free_window(w.large, kLarge);
    boot.barrier(kTimeout);
    return 0;
  }));
}

// One window is freed (after its dereg) and allocated again: the memory is
// zeroed; misuse of free_window is refused and changes nothing; the new
// window takes writes; a write with the old rkey fails (shm: EACCES at the
// sender; tcp: the target refuses it and fails) and lands nowhere - on shm
// the new window is the old range of the arena (first fit), the very
// address the stale write aims at.
TEST_P(Windows, AFreedWindowComesBackZeroedAndItsOldRkeyIsDead) {
  const Kind kind = GetParam();
  expect_all_succeeded(run_ranks(ranks_of(kind), [kind](FileBootstrap& boot, const std::string&) {
    const int me = boot.rank(), n = boot.size();
    auto t = make(kind, boot);
    TwoWindows w;
    if (int rc = open_two_windows(*t, boot, &w)) return rc;
    if (int rc = write_both_windows(kind, *t, boot, w, 1)) return rc;
    const std::vector<RemoteRegion> old_small = w.remote_small;
    boot.barrier(kTimeout);  // nobody writes into the small windows any more

    // Misuse first: each is refused, and nothing changes.
    auto msg = throws_status(COLL_ERR_INVALID_ARG, [&] { t->free_window(w.small, kSmall); });
    CHILD_CHECK(msg && contains(*msg, "still registered"), "free of a registered window: %s",
                msg ? msg->c_str() : "");
    msg = throws_status(COLL_ERR_INVALID_ARG, [&] { t->free_window(w.large + kPage, 4096); });
    CHILD_CHECK(msg && contains(*msg, "not a window"), "free inside a window: %s",
                msg ? msg->c_str() : "");
    msg = throws_status(COLL_ERR_INVALID_ARG, [&] { t->free_window(w.small, 2 * kSmall); });
    CHILD_CHECK(msg, "free with the wrong size");
    CHILD_CHECK(throws_status(COLL_ERR_INVALID_ARG, [&] { t->alloc_window(0); }), "0 bytes");
    CHILD_CHECK(w.small[512 * size_t(me)] == pattern(me, 1, 0), "the refused free changed it");

    CHILD_CHECK(t->dereg(w.small_mr) == 0, "dereg");
    uint8_t* const old = w.small;
    t->free_window(old, kSmall);
    msg = throws_status(COLL_ERR_INVALID_ARG, [&] { t->free_window(old, kSmall); });
    CHILD_CHECK(msg && contains(*msg, "freed already"), "a second free: %s",
                msg ? msg->c_str() : "");

    w.small = static_cast<uint8_t*>(t->alloc_window(kSmall));
    CHILD_CHECK(first_nonzero(w.small, page_round(kSmall)) < 0,
                "the window allocated again is not zeroed: byte %ld",
                first_nonzero(w.small, page_round(kSmall)));
    if (kind != Kind::kTcp)
      CHILD_CHECK(w.small == old, "first fit: the freed range %p comes back, not %p",
                  static_cast<void*>(old), static_cast<void*>(w.small));
    // The large window kept its data through all of it.
    CHILD_CHECK(w.large[4096 * size_t(me)] == pattern(me, 101, 0), "large window changed");
    w.small_mr = t->reg_write(w.small, kSmall);
    w.remote_small = exchange_regions(boot, w.small_mr, kTimeout);
    if (int rc = write_both_windows(kind, *t, boot, w, 2)) return rc;
    boot.barrier(kTimeout);  // round 2 is complete everywhere

    // A stale {addr, rkey} of rank 0's old small window, from rank 1 (shm:
    // same host on shm and shm+tcp; tcp on tcp) and, on shm+tcp, from rank
    // 2 (tcp).
    const uint64_t poison = 0xbadbadbadbadbadull;
    const std::vector<uint8_t> before(w.small, w.small + page_round(kSmall));
    std::vector<int> writers = {1};
    if (kind == Kind::kHybrid) writers.push_back(2);
    const bool writer = std::find(writers.begin(), writers.end(), me) != writers.end();
    if (writer) {
      const RemoteRegion& stale = old_small[0];
      errno = 0;
      const int rc = t->post_write(0, 0, &poison, 8, nullptr, 0, stale.addr + 512, stale.rkey);
      if (same_host(kind, me, 0)) {
        CHILD_CHECK(rc == -1 && errno == EACCES, "stale shm write: rc %d errno %d", rc, errno);
      } else {
        CHILD_CHECK(rc == 0, "tcp posts it; the target refuses it");
        Waiter wait{*t};
        CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, 0), "rank %d told: %d %s", me, wait.status,
                    wait.error.c_str());
      }
    }
    if (me == 0 && kind != Kind::kShm) {
      Waiter wait{*t};
      const int from = kind == Kind::kTcp ? 1 : 2;
      CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, from), "rank 0: %d %s", wait.status,
                  wait.error.c_str());
      CHILD_CHECK(contains(wait.error, "from rank " + std::to_string(from)) &&
                      contains(wait.error, "names no registered region"),
                  "message: %s", wait.error.c_str());
    }
    boot.barrier(kTimeout);  // the stale writes are over
    if (me == 0) {
      CHILD_CHECK(std::memcmp(before.data(), w.small, before.size()) == 0,
                  "a stale write landed in the new window");
      for (int peer = 0; peer < n; ++peer)
        CHILD_CHECK(w.small[512 * size_t(peer)] == pattern(peer, 2, 0), "round 2 data");
    }
    if (kind == Kind::kShm) {  // nothing failed: tear down in order
      CHILD_CHECK(t->dereg(w.small_mr) == 0 && t->dereg(w.large_mr) == 0, "dereg");
      t->free_window(w.small, kSmall);
      t->free_window(w.large, kLarge);
    }
    boot.barrier(kTimeout);
    return 0;
  }));
}

// A thousand windows allocated, touched, registered, deregistered and freed
// (some held together, freed out of order) give everything back: the
// segment's pages in /dev/shm, descriptors; tcp unmaps each window; on shm
// the arena is one free range again (a window the size of the whole arena
// fits).
TEST_P(Windows, AThousandWindowsGiveEverythingBack) {
  const Kind kind = GetParam();
  expect_all_succeeded(run_ranks(ranks_of(kind), [kind](FileBootstrap& boot, const std::string&) {
    constexpr size_t kArena = 8u << 20;
    auto t = make(kind, boot, options(kArena));
    const bool shm = kind != Kind::kTcp;
    const int seg = shm ? own_segment_fd(boot) : -1;
    CHILD_CHECK(!shm || seg >= 0, "the segment's descriptor is not open");
    boot.barrier(kTimeout);  // every rank's setup is over (tcp: no more sockets)
    const int fds = open_fd_count();
    const long long blocks = shm ? segment_bytes(seg) : 0;

    // The measure works: a window's pages are reserved at alloc.
    {
      void* w = t->alloc_window(1u << 20);
      if (shm)
        CHILD_CHECK(segment_bytes(seg) >= blocks + (1 << 20), "1 MiB window: %lld -> %lld bytes",
                    blocks, segment_bytes(seg));
      t->free_window(w, 1u << 20);
      if (shm) CHILD_CHECK(segment_bytes(seg) == blocks, "after its free: %lld", segment_bytes(seg));
    }

    std::vector<std::pair<uint8_t*, size_t>> held;
    for (int i = 0; i < 1000; ++i) {
      const size_t bytes = size_t(i % 7 + 1) * 4096 + size_t(i % 13);
      auto* p = static_cast<uint8_t*>(t->alloc_window(bytes));
      CHILD_CHECK(first_nonzero(p, page_round(bytes)) < 0, "iteration %d: not zeroed", i);
      for (size_t off = 0; off < bytes; off += kPage) p[off] = uint8_t(i | 1);  // dirty every page
      p[bytes - 1] = 0xff;
      MemoryRegion* mr = t->reg_write(p, bytes);
      CHILD_CHECK(t->dereg(mr) == 0, "iteration %d: dereg", i);
      held.emplace_back(p, bytes);
      if (held.size() == 5 || i == 999) {
        // Out of order: middle, last, first, ...
        const size_t order[] = {2, 4, 0, 3, 1};
        for (size_t k : order) {
          if (k >= held.size()) continue;
          t->free_window(held[k].first, held[k].second);
          CHILD_CHECK(shm || unmapped(held[k].first, held[k].second),
                      "iteration %d: a freed tcp window is still mapped", i);
        }
        held.clear();
      }
    }
    CHILD_CHECK(open_fd_count() == fds, "descriptors: %d before, %d after", fds, open_fd_count());
    if (shm) {
      CHILD_CHECK(segment_bytes(seg) == blocks, "/dev/shm bytes of the segment: %lld before, "
                  "%lld after", blocks, segment_bytes(seg));
      void* all = t->alloc_window(kArena);  // the arena is one free range again
      CHILD_CHECK(all != nullptr && first_nonzero(all, kArena) < 0, "whole arena");
      t->free_window(all, kArena);
      CHILD_CHECK(segment_bytes(seg) == blocks, "after the whole arena: %lld",
                  segment_bytes(seg));
    }
    boot.barrier(kTimeout);
    return 0;
  }));
}

// Windows still allocated at teardown go with the transport: nothing is
// left mapped or open.
TEST_P(Windows, TheTransportFreesWhatIsLeftAtTeardown) {
  const Kind kind = GetParam();
  expect_all_succeeded(run_ranks(ranks_of(kind), [kind](FileBootstrap& boot, const std::string&) {
    boot.barrier(kTimeout);
    const int fds = open_fd_count();
    std::vector<std::pair<void*, size_t>> windows;
    {
      auto t = make(kind, boot);
      for (int i = 0; i < 10; ++i) {
        const size_t bytes = size_t(i + 1) << 16;
        windows.emplace_back(t->alloc_window(bytes), bytes);
      }
      windows.emplace_back(t->alloc_window(4096), 4096);
      t->reg_write(windows.back().first, 4096);  // still registered, too
      boot.barrier(kTimeout);
    }
    CHILD_CHECK(open_fd_count() == fds, "descriptors: %d before, %d after", fds, open_fd_count());
    for (const auto& [p, bytes] : windows)
      CHILD_CHECK(unmapped(p, bytes), "the window at %p is still mapped", p);
    boot.barrier(kTimeout);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Transports, Windows,
                         ::testing::Values(Kind::kShm, Kind::kTcp, Kind::kHybrid),
                         [](const auto& info) { return std::string(kKindNames[int(info.param)]); });

// ------------------------------------------------------------ running out

class ArenaLimits : public ::testing::TestWithParam<Kind> {};

// A full arena is COLL_ERR_NO_RESOURCES naming COLL_SHM_ARENA and the
// sizes; what is freed can be allocated again. The arena is virtual: a
// 64 GiB one costs nothing until windows are allocated in it.
TEST_P(ArenaLimits, AFullArenaIsNoResourcesNamingTheKnob) {
  const Kind kind = GetParam();
  expect_all_succeeded(run_ranks(ranks_of(kind), [kind](FileBootstrap& boot, const std::string&) {
    {
      auto big = make(kind, boot, options(size_t(64) << 30));
      void* w = big->alloc_window(1 << 20);
      big->free_window(w, 1 << 20);
      boot.barrier(kTimeout);
    }
    constexpr size_t kArena = 1u << 20;
    auto t = make(kind, boot, options(kArena));
    void* half = t->alloc_window(kArena / 2);
    void* quarter = t->alloc_window(kArena / 4);
    auto msg = throws_status(COLL_ERR_NO_RESOURCES, [&] { t->alloc_window(kArena / 2); });
    CHILD_CHECK(msg, "a window that does not fit");
    for (const char* part : {"COLL_SHM_ARENA", "524288", "1048576", "262144"})
      CHILD_CHECK(contains(*msg, part), "message lacks '%s': %s", part, msg->c_str());
    msg = throws_status(COLL_ERR_NO_RESOURCES, [&] { t->alloc_window(size_t(1) << 40); });
    CHILD_CHECK(msg && contains(*msg, "COLL_SHM_ARENA") && contains(*msg, "1099511627776"),
                "a window larger than the arena: %s", msg ? msg->c_str() : "");
    // The failures changed nothing: the last quarter still fits, and once
    // the half is back, half of the arena fits again.
    void* last = t->alloc_window(kArena / 4);
    t->free_window(half, kArena / 2);
    void* again = t->alloc_window(kArena / 2);
    CHILD_CHECK(again == half, "first fit: %p, not %p", again, half);
    for (void* p : {again, quarter, last}) t->free_window(p, p == again ? kArena / 2 : kArena / 4);
    boot.barrier(kTimeout);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Transports, ArenaLimits, ::testing::Values(Kind::kShm, Kind::kHybrid),
                         [](const auto& info) { return std::string(kKindNames[int(info.param)]); });

// This process (a forked rank) gets a mount namespace of its own with a
// 2 MiB tmpfs on /dev/shm; false (and why, on stderr) where it may not
// (root only).
bool private_dev_shm_of_2_mib() {
  if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=2m") != 0) {
    std::fprintf(stderr, "no private /dev/shm: %s\n", std::strerror(errno));
    return false;
  }
  return true;
}

// Three quarters of the 2 MiB /dev/shm in one window, every page written:
// what failed before left nothing behind.
void fill_three_quarters(Transport& t) {
  auto* w = static_cast<uint8_t*>(t.alloc_window(1536 << 10));
  std::memset(w, 2, 1536 << 10);
  t.free_window(w, 1536 << 10);
}

// The one rank's status: 0, or skipped where there is no private /dev/shm.
// A macro's worth of gtest: GTEST_SKIP returns from the function it is in.
#define EXPECT_PASSED_UNLESS_SKIPPED(statuses)                                              \
  do {                                                                                        \
    ASSERT_EQ((statuses).size(), 1u);                                                         \
    if ((statuses)[0] == kSkipped) GTEST_SKIP() << "needs root (a private mount namespace)"; \
    EXPECT_EQ((statuses)[0], 0);                                                              \
  } while (0)

// A /dev/shm too small for a window fails alloc_window with
// COLL_ERR_NO_RESOURCES naming /dev/shm - never a SIGBUS later. One rank,
// in its own mount namespace with a 2 MiB tmpfs on /dev/shm (root only:
// skipped elsewhere).
TEST(ShmWindows, AFullDevShmIsNoResourcesAtAllocNotASigbus) {
  const auto statuses = run_ranks(1, [](FileBootstrap& boot, const std::string&) {
    if (!private_dev_shm_of_2_mib()) return kSkipped;
    auto t = make(Kind::kShm, boot, options(size_t(1) << 30));  // far more than /dev/shm
    auto* fits = static_cast<uint8_t*>(t->alloc_window(1 << 20));
    std::memset(fits, 1, 1 << 20);
    auto msg = throws_status(COLL_ERR_NO_RESOURCES, [&] { t->alloc_window(4 << 20); });
    CHILD_CHECK(msg && contains(*msg, "/dev/shm") && contains(*msg, "4194304"), "message: %s",
                msg ? msg->c_str() : "");
    // The failed reservation left nothing behind: what was free still is.
    t->free_window(fits, 1 << 20);
    fill_three_quarters(*t);
    return 0;
  });
  EXPECT_PASSED_UNLESS_SKIPPED(statuses);
}

// Committed by its writers: in a window allocated with only its first
// page eager, a writer's prepare_write brings in the range it will write
// (and no more), and its data lands. One rank writing into its own window
// through its mapping of itself, as a peer would. (mincore counts pages in
// memory: the eager page is reserved in /dev/shm but not in memory until
// touched; the root test below counts /dev/shm's blocks.)
size_t resident_pages(void* addr, size_t bytes) {
  std::vector<unsigned char> v(page_round(bytes) / kPage);
  if (mincore(addr, bytes, v.data()) != 0) return size_t(-1);
  return size_t(std::count_if(v.begin(), v.end(), [](unsigned char c) { return c & 1; }));
}

TEST(ShmWindows, ALazyWindowIsCommittedByItsWritersRangeByRange) {
  expect_all_succeeded(run_ranks(1, [](FileBootstrap& boot, const std::string&) {
    auto t = make(Kind::kShm, boot, options(size_t(1) << 30));
    constexpr size_t kBytes = 8 << 20, kAt = 1 << 20, kLen = 300 << 10;
    auto* w = static_cast<uint8_t*>(t->alloc_window(kBytes, kPage));
    CHILD_CHECK(resident_pages(w, kBytes) <= 1, "%zu pages resident at allocation",
                resident_pages(w, kBytes));
    const size_t before = resident_pages(w, kBytes);
    MemoryRegion* mr = t->reg_write(w, kBytes);
    std::vector<uint8_t> data(kLen);
    for (size_t i = 0; i < kLen; ++i) data[i] = pattern(0, 7, i);
    const auto remote = reinterpret_cast<uint64_t>(w) + kAt;
    CHILD_CHECK(t->prepare_write(0, remote, kLen, mr->rkey, remote, kLen) == 0, "prepare_write: %s",
                std::strerror(errno));
    CHILD_CHECK(resident_pages(w, kBytes) == before + page_round(kLen) / kPage,
                "%zu pages resident after committing %zu bytes", resident_pages(w, kBytes), kLen);
    CHILD_CHECK(t->post_write(0, 0, data.data(), kLen, nullptr, 0, remote, mr->rkey) == 0,
                "post_write: %s", std::strerror(errno));
    CHILD_CHECK(std::memcmp(w + kAt, data.data(), kLen) == 0, "the data landed");
    // A range outside the region, or a wrong key: refused like a write.
    CHILD_CHECK(
        t->prepare_write(0, remote, kBytes, mr->rkey, remote, kBytes) == -1 && errno == EACCES,
        "a range past the region");
    CHILD_CHECK(
        t->prepare_write(0, remote, kLen, mr->rkey + 1, remote, kLen) == -1 && errno == EACCES,
        "a wrong rkey");
    CHILD_CHECK(t->dereg(mr) == 0, "dereg");
    t->free_window(w, kBytes);
    return 0;
  }));
}

// ... and where /dev/shm cannot hold what a writer commits, prepare_write
// fails with ENOMEM (the channel's COLL_ERR_NO_RESOURCES) instead of the
// copy taking a SIGBUS; what fits still works. Root only (a private mount
// namespace with a 2 MiB /dev/shm), as above.
TEST(ShmWindows, AFullDevShmIsEnomemAtCommitNotASigbus) {
  const auto statuses = run_ranks(1, [](FileBootstrap& boot, const std::string&) {
    if (!private_dev_shm_of_2_mib()) return kSkipped;
    auto t = make(Kind::kShm, boot, options(size_t(1) << 30));
    auto used_pages = [] {
      struct statvfs v {};
      return statvfs("/dev/shm", &v) == 0 ? size_t(v.f_blocks - v.f_bfree) * v.f_frsize / kPage
                                          : size_t(-1);
    };
    const size_t at_start = used_pages();
    constexpr size_t kBytes = 16 << 20;  // 8 x /dev/shm: allocated, since only a page is eager
    auto* w = static_cast<uint8_t*>(t->alloc_window(kBytes, kPage));
    CHILD_CHECK(used_pages() == at_start + 1, "%zu pages used, %zu before the window",
                used_pages(), at_start);
    MemoryRegion* mr = t->reg_write(w, kBytes);
    const auto base = reinterpret_cast<uint64_t>(w);
    CHILD_CHECK(t->prepare_write(0, base + kPage, 1 << 20, mr->rkey, base + kPage, 1 << 20) == 0,
                "1 MiB fits: %s", std::strerror(errno));
    CHILD_CHECK(used_pages() == at_start + 1 + (1 << 20) / kPage, "%zu pages used, %zu before",
                used_pages(), at_start);
    std::memset(w + kPage, 3, 1 << 20);
    CHILD_CHECK(
        t->prepare_write(0, base + (4 << 20), 4 << 20, mr->rkey, base + (4 << 20), 4 << 20) == -1 &&
            errno == ENOMEM,
        "4 MiB more into a 2 MiB /dev/shm: errno %d (%s)", errno, std::strerror(errno));
    CHILD_CHECK(t->dereg(mr) == 0, "dereg");
    t->free_window(w, kBytes);  // gives back what was committed, whoever did it
    fill_three_quarters(*t);
    return 0;
  });
  EXPECT_PASSED_UNLESS_SKIPPED(statuses);
}

// tcp windows are anonymous memory: when mmap fails (here: 128 TiB, more
// than a process's address space), alloc_window is COLL_ERR_NO_RESOURCES
// with the sizes.
TEST(TcpWindows, AFailedMmapIsNoResourcesWithTheSizes) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot, const std::string&) {
    auto t = make(Kind::kTcp, boot);
    auto msg = throws_status(COLL_ERR_NO_RESOURCES, [&] { t->alloc_window(size_t(1) << 47); });
    CHILD_CHECK(msg && contains(*msg, "140737488355328") && contains(*msg, "mmap"), "message: %s",
                msg ? msg->c_str() : "");
    void* w = t->alloc_window(1 << 20);  // what fits still does
    t->free_window(w, 1 << 20);
    boot.barrier(kTimeout);
    return 0;
  }));
}

// The tcp half of shm+tcp has no windows of its own.
TEST(HybridWindows, WindowsComeFromTheShmHalf) {
  expect_all_succeeded(run_ranks(4, [](FileBootstrap& boot, const std::string&) {
    auto t = make(Kind::kHybrid, boot);
    const int seg = own_segment_fd(boot);
    CHILD_CHECK(seg >= 0, "no segment");
    const long long before = segment_bytes(seg);
    void* w = t->alloc_window(256 << 10);
    CHILD_CHECK(segment_bytes(seg) >= before + (256 << 10), "not in the segment");
    t->free_window(w, 256 << 10);
    boot.barrier(kTimeout);
    return 0;
  }));
}

// ------------------------------------------------------------ units

TEST(WindowArena, FirstFitMergesOnFreeAndRefusesWhatItDidNotHandOut) {
  WindowArena a(100);
  EXPECT_EQ(a.take(0), std::nullopt);
  EXPECT_EQ(a.take(101), std::nullopt);
  EXPECT_EQ(a.take(10), 0u);
  EXPECT_EQ(a.take(20), 10u);
  EXPECT_EQ(a.take(30), 30u);
  EXPECT_EQ(a.free_bytes(), 40u);
  EXPECT_FALSE(a.give_back(10, 10));  // wrong size
  EXPECT_FALSE(a.give_back(11, 20));  // not an offset it handed out
  EXPECT_TRUE(a.in_use(10, 20));
  EXPECT_TRUE(a.give_back(10, 20));
  EXPECT_FALSE(a.give_back(10, 20));  // twice
  EXPECT_FALSE(a.in_use(10, 20));
  EXPECT_EQ(a.take(25), 60u);         // the hole at 10 holds only 20
  EXPECT_EQ(a.take(15), 10u);         // first fit: the hole
  EXPECT_EQ(a.largest_free(), 15u);   // [85, 100)
  EXPECT_EQ(a.free_ranges(), 2u);     // [25, 30) and [85, 100)
  EXPECT_TRUE(a.give_back(0, 10));
  EXPECT_TRUE(a.give_back(30, 30));
  EXPECT_TRUE(a.give_back(10, 15));   // merges [0, 60)
  EXPECT_EQ(a.free_ranges(), 2u);
  EXPECT_EQ(a.largest_free(), 60u);
  EXPECT_TRUE(a.give_back(60, 25));   // everything: one range
  EXPECT_EQ(a.free_ranges(), 1u);
  EXPECT_EQ(a.free_bytes(), 100u);
  EXPECT_EQ(a.ranges_in_use(), 0u);
  EXPECT_EQ(a.take(100), 0u);
}

TEST(WindowArenaSize, DefaultIsSixteenWorldWindowsAndAtLeast256MiB) {
  EXPECT_EQ(default_window_arena_bytes(0), size_t(256) << 20);
  EXPECT_EQ(default_window_arena_bytes(4 << 20), size_t(256) << 20);
  EXPECT_EQ(default_window_arena_bytes(100 << 20), size_t(1600) << 20);
  EXPECT_EQ(default_window_arena_bytes((100 << 20) + 1) % kPage, 0u);
  EXPECT_GE(default_window_arena_bytes(SIZE_MAX), size_t(256) << 20);  // no overflow
  // The floor scales with the slots (4x the default slot: 1 GiB), bounded.
  EXPECT_EQ(default_window_arena_bytes(4 << 20, 4), size_t(1024) << 20);
  EXPECT_EQ(default_window_arena_bytes(0, 0), size_t(256) << 20);
  EXPECT_EQ(default_window_arena_bytes(0, SIZE_MAX), size_t(256) << 26);
}

TEST(WindowArenaSize, CollShmArenaIsAByteCountWithSuffixes) {
  unsetenv("COLL_SHM_ARENA");
  EXPECT_FALSE(load_config().shm_arena_bytes.has_value());
  setenv("COLL_SHM_ARENA", "64M", 1);
  EXPECT_EQ(load_config().shm_arena_bytes, size_t(64) << 20);
  setenv("COLL_SHM_ARENA", "2g", 1);
  EXPECT_EQ(load_config().shm_arena_bytes, size_t(2) << 30);
  for (const char* bad : {"4k", "lots", "12Q"}) {
    setenv("COLL_SHM_ARENA", bad, 1);
    try {
      load_config();
      ADD_FAILURE() << "COLL_SHM_ARENA=" << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
      EXPECT_NE(std::string(e.what()).find("COLL_SHM_ARENA"), std::string::npos) << e.what();
    }
  }
  unsetenv("COLL_SHM_ARENA");
}

}  // namespace
}  // namespace coll
