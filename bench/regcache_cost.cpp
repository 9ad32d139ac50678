// regcache_cost: what a registration costs and what a cache hit costs, by
// buffer size, on one transport (one process, a singleton bootstrap).
//
//   COLL_TRANSPORT=rdma build/bench/regcache_cost [max_bytes] [repeats]
//
// Per size (4 KiB, x4, up to max_bytes, default 256 MiB): the median over
// `repeats` (default 5) rounds of
//   register  reg_write + dereg of a touched buffer (what every call paid
//             without the cache: ibv_reg_mr pins every page), per pair;
//   hit       acquire + release of the same buffer through the registration
//             cache with the memory monitor (what a call pays now), per pair;
//   pagemap   (root only: page frames are readable with CAP_SYS_ADMIN) the
//             same hit through a cache that validates by page frame numbers
//             instead, the method the monitor replaced;
// and register / hit. A monitor hit does no per-page work, so its cost does
// not grow with the size. Then what the monitor costs the application: an
// munmap of a 64 KiB range it watches (the unmapping thread waits until the
// monitor thread has read the event) against one it does not. Prints
// markdown tables.
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "memory_monitor.hpp"
#include "regcache.hpp"
#include "transport/transport.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double seconds_per(int n, F f) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double>(Clock::now() - t0).count() / n;
}

std::string human(size_t bytes) {
  if (bytes >= (size_t(1) << 20)) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes >> 10) + " KiB";
}

}  // namespace

int main(int argc, char** argv) {
  const size_t max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 0) : size_t(256) << 20;
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const char* env = std::getenv("COLL_TRANSPORT");
  const std::string name = env && *env ? env : "shm";
  try {
    auto boot = coll::make_singleton_bootstrap();
    coll::TransportOptions opts;
    auto t = coll::make_transport(name, *boot, opts, {"localhost"});
    std::string why;
    auto monitor = coll::MemoryMonitor::start(&why);
    if (!monitor) std::fprintf(stderr, "regcache_cost: no memory monitor (%s)\n", why.c_str());
    coll::Transport& tr = *t;
    coll::RegistrationCache cache(
        [&tr](void* a, size_t l) { return tr.reg_write(a, l); },
        [&tr](coll::MemoryRegion* mr) { return tr.dereg(mr); }, max_bytes * 2, true,
        coll::RegistrationCache::Validation::kAuto, std::move(monitor));
    if (!tr.needs_local_registration())
      cache.set_writable_fn([&tr](coll::MemoryRegion* mr, bool w) { tr.set_writable(mr, w); });
    std::printf("transport %s (%s), cache monitor %s, median of %d rounds\n\n", tr.name(),
                tr.describe().c_str(), cache.monitor_name(), repeats);
    const bool frames = coll::RegistrationCache::page_frames_readable();
    coll::RegistrationCache by_frames(
        [&tr](void* a, size_t l) { return tr.reg_write(a, l); },
        [&tr](coll::MemoryRegion* mr) { return tr.dereg(mr); }, max_bytes * 2, true,
        coll::RegistrationCache::Validation::kPageFrames);
    std::printf("| size | register + deregister (us) | hit, monitor (us) | register / hit |%s\n",
                frames ? " hit, pagemap (us) |" : "");
    std::printf("| ---: | ---: | ---: | ---: |%s\n", frames ? " ---: |" : "");
    for (size_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      void* buf = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (buf == MAP_FAILED) {
        std::perror("mmap");
        return 1;
      }
      std::memset(buf, 1, bytes);
      // Fewer registrations of large buffers: each pins every page.
      const int reg_n = int(std::clamp<size_t>((size_t(64) << 20) / bytes, 2, 200));
      const int hit_n = 20000;
      std::vector<double> reg, hit, pfn;
      cache.release(cache.acquire(buf, bytes));  // cached from here on
      if (frames) by_frames.release(by_frames.acquire(buf, bytes));
      for (int r = 0; r < repeats; ++r) {
        reg.push_back(seconds_per(reg_n, [&] {
          coll::MemoryRegion* mr = tr.reg_write(buf, bytes);
          tr.dereg(mr);
        }));
        hit.push_back(seconds_per(hit_n, [&] { cache.release(cache.acquire(buf, bytes)); }));
        if (frames)
          pfn.push_back(seconds_per(std::max(2, int((size_t(256) << 20) / bytes)),
                                    [&] { by_frames.release(by_frames.acquire(buf, bytes)); }));
      }
      const double rg = median(reg) * 1e6, ht = median(hit) * 1e6;
      std::printf("| %s | %.2f | %.3f | %.0f |", human(bytes).c_str(), rg, ht, rg / ht);
      if (frames) std::printf(" %.2f |", median(pfn) * 1e6);
      std::printf("\n");
      std::fflush(stdout);
      cache.invalidate(buf, bytes);
      by_frames.invalidate(buf, bytes);
      munmap(buf, bytes);
    }
    // What the monitor costs the application: munmap of a watched range.
    const size_t small = 64 * 1024;
    std::vector<double> watched, plain;
    for (int r = 0; r < repeats; ++r) {
      for (int watch = 0; watch < 2; ++watch) {
        double total = 0;
        const int n = 500;
        for (int i = 0; i < n; ++i) {
          void* p = mmap(nullptr, small, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
          std::memset(p, 1, small);
          if (watch) cache.release(cache.acquire(p, small));
          const auto t0 = Clock::now();
          munmap(p, small);
          total += std::chrono::duration<double>(Clock::now() - t0).count();
        }
        (watch ? watched : plain).push_back(total / n);
      }
    }
    std::printf("\n| munmap of 64 KiB | us |\n| --- | ---: |\n| not watched | %.2f |\n"
                "| watched by the monitor | %.2f |\n",
                median(plain) * 1e6, median(watched) * 1e6);
    const coll::RegcacheStats s = cache.stats();
    std::printf("\ncache: %llu hits, %llu misses, %llu registrations\n",
                (unsigned long long)s.hits, (unsigned long long)s.misses,
                (unsigned long long)s.registrations);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "regcache_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
