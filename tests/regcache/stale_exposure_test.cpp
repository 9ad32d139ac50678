// No write through a stale exposure (issue 11, point 3), on the real
// transports: rank 0 exposes a user buffer through the registration cache
// (with the memory monitor, as coll_init sets it up), rank 1 writes into it
// (it lands), rank 0's operation ends, rank 0 replaces the buffer with new
// memory at the same address; rank 1 then writes again with the old {addr,
// rkey}: the write must fail (shm: refused at post, as a bad rkey is; tcp:
// the target refuses the frame; rdma: the NIC reports a remote access
// error), and the new memory keeps every byte. On shm a late write into a
// buffer that is still alive but whose operation has ended is refused too
// (the cache closes cached ranges between uses).
//
// Forked ranks on a FileBootstrap; rdma runs where a device is (the
// Soft-RoCE VM: tests/rdma/run-rdma-suite.sh), skipped elsewhere.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "memory_monitor.hpp"
#include "regcache.hpp"
#include "tests/rdma/forked_ranks.hpp"
#include "transport/tcp_transport.hpp"
#include "transport/transport.hpp"

namespace coll {
namespace {

using test::FileBootstrap;

constexpr double kTimeout = 60;
constexpr size_t kBytes = 64 * 1024;
constexpr uint8_t kNewMemory = 0x55;

enum class Kind { kShm, kTcp, kRdma };
const char* const kNames[] = {"Shm", "Tcp", "Rdma"};

std::unique_ptr<Transport> make(Kind kind, FileBootstrap& boot) {
  TransportOptions opts;
  opts.timeout_s = kTimeout;
  switch (kind) {
    case Kind::kShm: return make_shm_transport(boot, opts);
    case Kind::kTcp: return make_tcp_transport(boot, opts);
    case Kind::kRdma: break;
  }
  return make_rdma_transport(boot, opts);
}

// The cache as coll_init builds it (libcoll/context.cpp).
std::unique_ptr<RegistrationCache> make_cache(Transport& t) {
  std::string why;
  auto monitor = MemoryMonitor::start(&why);
  if (!monitor) return nullptr;
  auto cache = std::make_unique<RegistrationCache>(
      [&t](void* addr, size_t len) { return t.reg_write(addr, len); },
      [&t](MemoryRegion* mr) { return t.dereg(mr); },
      t.needs_local_registration() ? 0 : size_t(1) << 30, true,
      RegistrationCache::Validation::kAuto, std::move(monitor));
  if (!t.needs_local_registration())
    cache->set_writable_fn([&t](MemoryRegion* mr, bool w) { t.set_writable(mr, w); });
  return cache;
}

// Polls (as a wait loop does: monitor reports first) until a signaled write
// completes; returns its status, or -1 after the bound.
int wait_completion(Transport& t, RegistrationCache& cache) {
  const auto deadline = test::deadline_after(kTimeout);
  while (std::chrono::steady_clock::now() < deadline) {
    cache.apply_monitor_reports();
    Completion wc[4];
    int n = 0;
    try {
      n = t.poll(wc, 4);
    } catch (const Error& e) {
      return e.status();
    }
    if (n > 0) return wc[0].status;
    std::this_thread::yield();
  }
  return -1;
}

// Polls (monitor reports first) until the transport fails or `until`
// passes; true when it failed.
bool poll_until_failed(Transport& t, RegistrationCache& cache, double seconds) {
  const auto deadline = test::deadline_after(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    cache.apply_monitor_reports();
    try {
      Completion wc[4];
      const int n = t.poll(wc, 4);
      for (int i = 0; i < n; ++i)
        if (wc[i].status != 0) return true;
      t.check_peer(1);
    } catch (const Error&) {
      return true;
    }
    std::this_thread::yield();
  }
  return false;
}

int first_changed(const uint8_t* p, size_t n, uint8_t want) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != want) return int(i);
  return -1;
}

// Asked in a child: librdmacm opens the devices on first use and keeps them,
// and descriptors a forked rank inherits from this process are refused
// (uverbs checks that the opener's credentials are the caller's: EACCES).
bool rdma_device_in_child() {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) _exit(rdma_device_available() ? 0 : 1);
  int status = 0;
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

class StaleExposure : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override {
    std::string why;
    if (!MemoryMonitor::start(&why)) GTEST_SKIP() << "no memory monitor: " << why;
    if (GetParam() == Kind::kRdma && !rdma_device_in_child()) {
      const char* require = std::getenv("COLL_RDMA_TEST_REQUIRE");
      if (require && std::string(require) == "1") FAIL() << "no RDMA device, and COLL_RDMA_TEST_REQUIRE=1";
      GTEST_SKIP() << "no RDMA device (runs in the Soft-RoCE VM: tests/rdma)";
    }
  }
};

TEST_P(StaleExposure, AWriteAimedAtAFreedBufferNeverLandsInTheNewOne) {
  const Kind kind = GetParam();
  test::expect_all_succeeded(test::run_forked_ranks(
      "stale-exposure", 2,
      [kind](FileBootstrap& boot, const std::string&) -> int {
        const int me = boot.rank();
        auto t = make(kind, boot);
        auto cache = make_cache(*t);
        CHILD_CHECK(cache != nullptr, "no monitor in the rank");
        CHILD_CHECK(std::string(cache->monitor_name()) == "userfaultfd", "monitor %s",
                    cache->monitor_name());

        // Rank 1's source: registered where the transport needs it.
        alignas(64) static uint64_t source[8];
        for (auto& w : source) w = 0xdeadbeefcafef00dull;
        MemoryRegion* source_mr = t->needs_local_registration() ? t->reg_write(source, sizeof source)
                                                                : nullptr;

        // Round 1: a legitimate exposure, a write that lands.
        uint8_t* buf = nullptr;
        const MemoryRegion* mr = nullptr;
        if (me == 0) {
          buf = static_cast<uint8_t*>(mmap(nullptr, kBytes, PROT_READ | PROT_WRITE,
                                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
          CHILD_CHECK(buf != MAP_FAILED, "mmap");
          std::memset(buf, 0x11, kBytes);
          mr = cache->acquire(buf, kBytes);
        }
        const std::vector<RemoteRegion> regions = test::exchange_regions(boot, mr, kTimeout);
        const RemoteRegion exposure = regions[0];
        if (me == 1) {
          CHILD_CHECK(t->post_write(0, 1, source, sizeof source, source_mr, kWriteSignaled,
                                    exposure.addr + 128, exposure.rkey) == 0,
                      "legitimate write: %s", std::strerror(errno));
          CHILD_CHECK(wait_completion(*t, *cache) == 0, "legitimate write failed");
        } else {
          // tcp applies it in poll: poll until it is there.
          const auto deadline = test::deadline_after(kTimeout);
          while (std::memcmp(buf + 128, source, sizeof source) != 0 &&
                 std::chrono::steady_clock::now() < deadline) {
            Completion wc[4];
            t->poll(wc, 4);
          }
        }
        boot.barrier(kTimeout);
        if (me == 0) {
          uint64_t expect[8];
          for (auto& w : expect) w = 0xdeadbeefcafef00dull;
          CHILD_CHECK(std::memcmp(buf + 128, expect, sizeof expect) == 0,
                      "the legitimate write did not land");
          cache->release(mr);  // the operation is over
        }
        boot.barrier(kTimeout);

        // Round 1b (shm): the buffer is alive, its operation is over: a late
        // write is refused and nothing changes. (tcp would refuse it too,
        // but a refused frame ends the connection, and rdma has no switch.)
        if (kind == Kind::kShm) {
          if (me == 1) {
            errno = 0;
            const int rc = t->post_write(0, 0, source, sizeof source, nullptr, 0,
                                         exposure.addr + 1024, exposure.rkey);
            CHILD_CHECK(rc == -1 && errno == ESTALE, "late write to a closed exposure: rc %d %s",
                        rc, std::strerror(errno));
          }
          boot.barrier(kTimeout);
          if (me == 0)
            CHILD_CHECK(first_changed(buf + 1024, sizeof source, 0x11) < 0,
                        "a late write landed in a buffer whose operation had ended");
        }

        // Round 2: rank 0 frees the buffer and maps new memory at the same
        // address, then goes on with libcoll (here: polls, as every wait
        // does). Rank 1 writes with the old {addr, rkey}.
        // New memory replaces the old in one mmap(MAP_FIXED): the kernel
        // unmaps the old pages (the monitor gets the same UNMAP event as
        // for munmap) and there is never a hole that another thread's mmap
        // could take (under ASan its allocator maps 64 KiB pieces from its
        // own threads, and took it once in CI between a munmap and ours).
        if (me == 0) {
          auto* again = static_cast<uint8_t*>(mmap(buf, kBytes, PROT_READ | PROT_WRITE,
                                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
          CHILD_CHECK(again == buf, "new memory at %p, not at the old address %p: %s",
                      static_cast<void*>(again), static_cast<void*>(buf), std::strerror(errno));
          std::memset(buf, kNewMemory, kBytes);
          cache->apply_monitor_reports();
          const RegcacheStats s = cache->stats();
          CHILD_CHECK(s.invalidations == 1 && s.deregistrations == 1,
                      "after the free: %llu invalidations, %llu deregistrations",
                      (unsigned long long)s.invalidations, (unsigned long long)s.deregistrations);
        }
        boot.barrier(kTimeout);
        if (me == 1) {
          errno = 0;
          const int rc = t->post_write(0, 2, source, sizeof source, source_mr, kWriteSignaled,
                                       exposure.addr + 128, exposure.rkey);
          if (kind == Kind::kShm) {
            CHILD_CHECK(rc == -1 && errno == EACCES, "stale shm write: rc %d %s", rc,
                        std::strerror(errno));
          } else if (rc == 0) {
            // tcp: the target refuses the frame and closes; rdma: the NIC
            // answers with a remote access error.
            CHILD_CHECK(poll_until_failed(*t, *cache, kTimeout), "the stale write did not fail");
          }
        } else if (kind != Kind::kShm) {
          CHILD_CHECK(poll_until_failed(*t, *cache, kind == Kind::kTcp ? kTimeout : 2.0) ||
                          kind == Kind::kRdma,
                      "rank 0 did not refuse the stale write");
        }
        boot.barrier(kTimeout);
        if (me == 0) {
          const int at = first_changed(buf, kBytes, kNewMemory);
          CHILD_CHECK(at < 0, "a write aimed at the old exposure landed in the new memory (byte %d)",
                      at);
          std::printf("%s: stale write refused, new memory intact\n", kNames[int(kind)]);
          munmap(buf, kBytes);
        }
        if (kind == Kind::kShm && source_mr) t->dereg(source_mr);
        return 0;
      },
      120));
}

INSTANTIATE_TEST_SUITE_P(Transports, StaleExposure,
                         ::testing::Values(Kind::kShm, Kind::kTcp, Kind::kRdma),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(kNames[int(info.param)]);
                         });

}  // namespace
}  // namespace coll
