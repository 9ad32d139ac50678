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
//    out again (see Validation below).
#pragma once

#include <coll/coll.h>
#include <sys/resource.h>

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
#include "transport/transport.hpp"

namespace coll {

// hits, misses, registrations, deregistrations, evictions, invalidations,
// bytes_pinned: the public struct, so the C API hands it out as it is.
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

  // How a cached range is known to still describe the application's memory.
  //
  // The danger: the application frees a registered buffer and allocates a new
  // one at the same virtual address. glibc reuses addresses; a large buffer
  // comes from mmap, and the same address can come back mapped to different
  // physical pages. The old registration still pins the OLD pages, so using it
  // would send or receive through memory the application no longer owns.
  //
  // Intercepting free/munmap is fragile (glibc's free unmaps through an
  // internal call no interposer sees; other allocators differ), so the cache
  // checks the pages themselves: at registration it records the page frame
  // number (PFN) of every page from /proc/self/pagemap, and a hit is a hit
  // only if every page of the cached range (not only the request's) still
  // maps the same frame: the range is handed out, and any address in it may
  // be used with it. That check is exact, not a heuristic: while
  // registered, the old frames are pinned and cannot be handed to a new
  // mapping, so the same PFN means the same memory. Its cost is one pread
  // of 8 bytes per page of the cached range, small next to moving those
  // pages (a small request inside a much larger cached range pays for the
  // whole range). Reading PFNs needs CAP_SYS_ADMIN (the kernel shows 0
  // otherwise).
  enum class Validation {
    kAuto,          // kPageFrames where PFNs are readable, else kNoReuse
    kPageFrames,    // compare PFNs on every hit (falls back to kNoReuse
                    // where PFNs are not readable: see validation())
    kNoReuse,       // safe without PFNs: a range is shared by concurrent
                    // users but deregistered when its last user releases it
    kExplicitOnly,  // trust the application to call invalidate()
                    // (coll_mem_invalidate) before it frees registered memory
  };

  // max_pinned_bytes 0: derive it from RLIMIT_MEMLOCK (default_max_pinned_bytes).
  // enabled == false: every acquire registers, every last release deregisters.
  RegistrationCache(RegisterFn reg, DeregisterFn dereg, size_t max_pinned_bytes, bool enabled,
                    Validation validation = Validation::kAuto);
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

  RegcacheStats stats() const;
  size_t max_pinned_bytes() const { return max_pinned_bytes_; }
  // The mode in force (kAuto resolved).
  Validation validation() const { return validation_; }

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
    std::vector<uint64_t> page_frames;  // kPageFrames: one per page
    bool listed_unused = false;         // in unused_, at lru_position
    std::vector<uint64_t> owners;       // communicators that acquired it
    std::list<Region*>::iterator lru_position;
    size_t bytes() const { return end - begin; }
  };

  Region* find_containing(uintptr_t begin, uintptr_t end) const;
  bool pages_unchanged(const Region& region, uintptr_t begin, uintptr_t end) const;
  std::vector<uint64_t> read_page_frames(uintptr_t begin, uintptr_t end) const;
  Region* register_range(uintptr_t begin, uintptr_t end);
  MemoryRegion* register_with_retry(uintptr_t begin, uintptr_t end);
  void make_room(size_t bytes);
  size_t evict_all_unused();
  void uncache(Region* region);
  void unlist_unused(Region* region);
  void deregister(Region* region);

  RegisterFn register_;
  DeregisterFn deregister_;
  size_t max_pinned_bytes_;
  bool enabled_;
  Validation validation_;
  int pagemap_fd_ = -1;
  size_t page_size_;

  mutable std::mutex mutex_;
  // Every registered range, owned here, found by the region handed out.
  std::unordered_map<const MemoryRegion*, std::unique_ptr<Region>> regions_;
  // The ranges acquire() may hand out, by first address.
  std::multimap<uintptr_t, Region*> by_begin_;
  size_t longest_cached_ = 0;  // bounds the backward search in find_containing
  // Unused cached ranges, most recently released first.
  std::list<Region*> unused_;
  RegcacheStats stats_{};
};

}  // namespace coll
