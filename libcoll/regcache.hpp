// RegistrationCache: makes repeated registration of the same user buffer
// free. An ordered map of page-aligned, refcounted registered ranges (shaped
// on NCCL's net_ib/reg.cc and UCX's ucs/memory/rcache.c):
//  - a request contained in a registered range is a hit;
//  - a range is refcounted while writes from or into it are in flight and is
//    never evicted or deregistered while referenced;
//  - unused ranges stay registered (pinned) until the pinned-bytes bound
//    needs room: least recently used first;
//  - when registration fails for lack of locked memory (ENOMEM, reported by
//    the RegisterFn as COLL_ERR_NO_RESOURCES), every unused range is evicted
//    and the registration retried once before the error reaches the caller,
//    naming `ulimit -l`;
//  - a range whose memory the application freed or unmapped is never handed
//    out again (see Validation below);
//  - ranges the application registers itself (coll_mem_register) are never
//    evicted or invalidated until it deregisters them.
#pragma once

#include <coll/coll.h>
#include <sys/resource.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "error.hpp"
#include "memory_monitor.hpp"
#include "transport/transport.hpp"

namespace coll {

// hits, misses, registrations, deregistrations, evictions, invalidations,
// bytes_pinned, monitor: the public struct, so the C API hands it out as it is.
using RegcacheStats = coll_regcache_stats_t;

// "... RLIMIT_MEMLOCK, now 8388608 bytes (soft) / ... raise it with
// `ulimit -l` ...": the hint every locked-memory failure carries. Inline, so
// that transports use it without linking the cache.
inline std::string describe_memlock_limit() {
  auto text = [](rlim_t limit) {
    return limit == RLIM_INFINITY ? std::string("unlimited")
                                  : strfmt("%llu bytes", static_cast<unsigned long long>(limit));
  };
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) {
    return "registered memory counts against the locked-memory limit: raise it "
           "with `ulimit -l` (e.g. `ulimit -l unlimited`)";
  }
  return strfmt(
      "registered memory counts against the locked-memory limit "
      "RLIMIT_MEMLOCK, now %s (soft) / %s (hard): raise it with `ulimit -l` "
      "(e.g. `ulimit -l unlimited`, or memlock in /etc/security/limits.conf)",
      text(limit.rlim_cur).c_str(), text(limit.rlim_max).c_str());
}

class RegistrationCache {
 public:
  using RegisterFn = std::function<MemoryRegion*(void* addr, size_t len)>;  // throws coll::Error
  using DeregisterFn = std::function<int(MemoryRegion*)>;
  // Closes (false) or reopens (true) a region to peers' writes
  // (Transport::set_writable).
  using WritableFn = std::function<void(MemoryRegion*, bool)>;

  // How a cached range is known to still describe the application's memory.
  //
  // The danger: the application frees a registered buffer and allocates a new
  // one at the same virtual address. glibc reuses addresses; a large buffer
  // comes from mmap, and the same address can come back mapped to different
  // physical pages. The old registration still pins the OLD pages, so using it
  // would send or receive through memory the application no longer owns.
  //
  //  - kMonitor: the memory monitor (memory_monitor.hpp, userfaultfd) reports
  //    every unmap, move and removal of pages in a cached range; the cache
  //    drains its reports before every lookup, so a hit costs the same for 4
  //    KiB and 1 GiB (no per-page work). Ranges the monitor cannot watch
  //    (file-backed mappings, ...) are not reused.
  //  - kPageFrames: at registration the cache records the page frame number
  //    (PFN) of every page from /proc/self/pagemap, and a hit is a hit only if
  //    every page of the cached range (not only the request's: the range is
  //    handed out, and any address in it may be used with it) still maps the
  //    same frame. Exact (pinned frames cannot be handed to a new mapping),
  //    but it costs one pread of 8 bytes per page of the range on every hit,
  //    and the kernel shows PFNs only with CAP_SYS_ADMIN. With the monitor it
  //    is the optional verifier (COLL_REGCACHE_VERIFY=1: both must agree).
  //  - kNoReuse: neither is available. A range is shared by concurrent users
  //    but deregistered when its last user releases it.
  //  - kExplicitOnly: trust the application to call invalidate()
  //    (coll_mem_invalidate) before it frees registered memory (unit tests).
  enum class Validation {
    kAuto,  // kMonitor with a monitor, else kPageFrames where PFNs are readable, else kNoReuse
    kMonitor,
    kPageFrames,  // falls back to kNoReuse where PFNs are not readable
    kNoReuse,
    kExplicitOnly,
  };

  // max_pinned_bytes 0: derive it from RLIMIT_MEMLOCK (default_max_pinned_bytes).
  // enabled == false: every acquire registers, every last release deregisters.
  // monitor: reports unmaps (kAuto then means kMonitor); owned from now on.
  // verify (COLL_REGCACHE_VERIFY=1): with kMonitor, check the page frames on
  // every hit too, where they are readable.
  RegistrationCache(RegisterFn reg, DeregisterFn dereg, size_t max_pinned_bytes, bool enabled,
                    Validation validation = Validation::kAuto,
                    std::unique_ptr<MemoryMonitor> monitor = nullptr, bool verify = false);
  ~RegistrationCache();  // deregisters everything still registered
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // A registered range containing [addr, addr + len) (len 0 counts as 1),
  // referenced until release(). owner (a communicator id, 0: none) is
  // remembered as a user of the range, for release_owner(). Throws
  // coll::Error.
  const MemoryRegion* acquire(const void* addr, size_t len, uint64_t owner = 0);
  // The owner (a communicator being freed) is gone: it no longer counts as
  // a user of any range, and every unused range that no other owner has
  // used is deregistered now. Ranges still referenced stay (a persistent
  // request of another communicator, say).
  void release_owner(uint64_t owner);
  // Drops one reference. Throws Error(COLL_ERR_INVALID_ARG) for a region this
  // cache did not hand out.
  void release(const MemoryRegion* mr);
  // The application freed or will reuse [addr, addr + len): every range that
  // overlaps it is deregistered now, or when its last user releases it.
  void invalidate(const void* addr, size_t len);
  // Deregisters every unused range.
  void clear();
  // From now on an unused cached range is closed to peers' writes while it
  // waits for its next use, and reopened by the acquire that hits it: an
  // exposure is good for the operations that hold the range only.
  void set_writable_fn(WritableFn fn) { writable_ = std::move(fn); }

  // Explicit registration (coll_mem_register): [addr, addr + len) stays
  // registered, and every request inside it hits, until
  // deregister_explicit(addr); it is never evicted, and an unmap of it
  // makes later requests inside it fail with COLL_ERR_INVALID_ARG (the
  // application broke the contract) instead of being silently replaced.
  // Throws COLL_ERR_INVALID_ARG for a NULL or empty range and for an addr
  // registered already.
  void register_explicit(const void* addr, size_t len);
  // Throws COLL_ERR_INVALID_ARG for an addr that register_explicit did not
  // get, and for a range a collective is using now (acquired: an operation
  // in flight, a persistent request).
  void deregister_explicit(const void* addr);

  // Throws COLL_ERR_INVALID_ARG when one of the held regions (a persistent
  // request's, acquired at its init) was unmapped or replaced since: its
  // registration no longer describes the application's buffer. No lookup:
  // the regions are the caller's. Applies the monitor's reports first.
  void check_held(const std::vector<const MemoryRegion*>& held, const char* what);

  // Applies what the monitor reported, if anything (a load or two when
  // nothing): the progress loop calls it before it polls the transport, so
  // that a range the application unmapped is deregistered before a late
  // write aimed at it is applied (tcp applies writes in poll).
  void apply_monitor_reports() {
    if (monitor_ && monitor_->maybe_pending()) apply_monitor_reports_slow();
  }

  RegcacheStats stats();
  size_t max_pinned_bytes() const { return max_pinned_bytes_; }
  // The mode in force (kAuto resolved).
  Validation validation() const { return validation_; }
  // How freed memory is detected, for the stats and COLL_DEBUG:
  // "userfaultfd" (+ "+pagemap" with the verifier), "pagemap", "none"
  // (no reuse), "explicit" (kExplicitOnly).
  const char* monitor_name() const { return monitor_name_; }

  // From RLIMIT_MEMLOCK, after raising the soft limit to the hard one where
  // allowed: 3/4 of it (the communicator's windows are registered outside the
  // cache and need the rest); unlimited: half of physical memory.
  static size_t default_max_pinned_bytes();
  // True when /proc/self/pagemap shows page frame numbers to this process.
  static bool page_frames_readable();

 private:
  struct Region {
    uintptr_t begin = 0;  // page aligned
    uintptr_t end = 0;    // page aligned, exclusive
    MemoryRegion* mr = nullptr;
    int refcount = 0;
    bool cached = false;                // findable by acquire(): in by_begin_
    bool watched = false;               // the monitor watches [begin, end)
    bool explicit_range = false;        // coll_mem_register; user_addr is its key
    bool stale = false;                 // unmapped or replaced while held or explicit
    uintptr_t user_addr = 0;
    std::vector<uint64_t> page_frames;  // kPageFrames: one per page
    bool listed_unused = false;         // in unused_, at lru_position
    std::vector<uint64_t> owners;       // communicators that acquired it
    std::list<Region*>::iterator lru_position;
    size_t bytes() const { return end - begin; }
  };

  Region* find_containing(uintptr_t begin, uintptr_t end) const;
  void apply_monitor_reports_slow();
  void apply_monitor_reports_locked();
  void invalidate_locked(uintptr_t begin, uintptr_t end);
  void invalidate_everything_locked();
  void mark_stale(Region* region);
  void unwatch(Region* region);
  bool pages_unchanged(const Region& region, uintptr_t begin, uintptr_t end) const;
  std::vector<uint64_t> read_page_frames(uintptr_t begin, uintptr_t end) const;
  Region* register_range(uintptr_t begin, uintptr_t end);
  // Registered and owned (regions_, stats), not yet findable.
  Region* new_region(uintptr_t begin, uintptr_t end);
  // Findable by acquire() from now on.
  void cache_region(Region* region);
  MemoryRegion* register_with_retry(uintptr_t begin, uintptr_t end);
  void make_room(size_t bytes);
  size_t evict_all_unused();
  void uncache(Region* region);
  void unlist_unused(Region* region);
  void deregister(Region* region);

  RegisterFn register_;
  DeregisterFn deregister_;
  WritableFn writable_;  // may be empty
  size_t max_pinned_bytes_;
  bool enabled_;
  Validation validation_;
  std::unique_ptr<MemoryMonitor> monitor_;
  bool verify_ = false;  // kMonitor, and the page frames checked too
  const char* monitor_name_ = "none";
  std::vector<MemoryMonitor::Range> reports_;  // reserved: drain() must not allocate
  int pagemap_fd_ = -1;
  size_t page_size_;

  mutable std::mutex mutex_;
  // Every registered range, owned here, found by the region handed out.
  std::unordered_map<const MemoryRegion*, std::unique_ptr<Region>> regions_;
  // The ranges acquire() may hand out, by first address.
  std::multimap<uintptr_t, Region*> by_begin_;
  size_t longest_cached_ = 0;  // bounds the backward search in find_containing
  // coll_mem_register'ed ranges, by the address the application gave.
  std::map<uintptr_t, Region*> explicit_;
  // Unused cached ranges, most recently released first.
  std::list<Region*> unused_;
  RegcacheStats stats_{};
  // Regions marked stale and still registered (held, or explicit): while 0,
  // check_held has nothing to find.
  std::atomic<size_t> stale_regions_{0};
};

}  // namespace coll
