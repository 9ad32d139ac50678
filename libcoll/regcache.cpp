#include "regcache.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "error.hpp"

namespace coll {

namespace {

// /proc/self/pagemap: one 64-bit entry per virtual page (see the kernel's
// Documentation/admin-guide/mm/pagemap.rst).
constexpr uint64_t kPagePresent = uint64_t{1} << 63;
constexpr uint64_t kFrameNumberMask = (uint64_t{1} << 55) - 1;

}  // namespace

size_t RegistrationCache::default_max_pinned_bytes() {
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return size_t{64} << 20;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_MEMLOCK, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY) {
    long pages = sysconf(_SC_PHYS_PAGES);
    long page_size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page_size <= 0) return size_t{1} << 30;
    return static_cast<size_t>(pages) * static_cast<size_t>(page_size) / 2;
  }
  return static_cast<size_t>(limit.rlim_cur) / 4 * 3;
}

bool RegistrationCache::page_frames_readable() {
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  // A page that is surely present: the one holding this variable, written.
  volatile uint64_t probe = 1;
  probe = probe + 1;
  auto address = reinterpret_cast<uintptr_t>(&probe);
  auto page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uint64_t entry = 0;
  ssize_t got =
      pread(fd, &entry, sizeof entry, static_cast<off_t>(address / page_size * sizeof entry));
  close(fd);
  return got == sizeof entry && (entry & kPagePresent) && (entry & kFrameNumberMask) != 0;
}

RegistrationCache::RegistrationCache(RegisterFn reg, DeregisterFn dereg, size_t max_pinned_bytes,
                                     bool enabled, Validation validation,
                                     std::unique_ptr<MemoryMonitor> monitor, bool verify)
    : register_(std::move(reg)),
      deregister_(std::move(dereg)),
      max_pinned_bytes_(max_pinned_bytes ? max_pinned_bytes : default_max_pinned_bytes()),
      enabled_(enabled),
      validation_(validation),
      monitor_(std::move(monitor)),
      page_size_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
  if (validation_ == Validation::kAuto) {
    validation_ = monitor_ ? Validation::kMonitor : Validation::kPageFrames;
  }
  if (validation_ == Validation::kMonitor && !monitor_) validation_ = Validation::kPageFrames;
  if (validation_ != Validation::kMonitor) monitor_.reset();
  const bool want_frames =
      validation_ == Validation::kPageFrames || (validation_ == Validation::kMonitor && verify);
  if (want_frames && page_frames_readable())
    pagemap_fd_ = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (validation_ == Validation::kPageFrames && pagemap_fd_ < 0) validation_ = Validation::kNoReuse;
  verify_ = validation_ == Validation::kMonitor && pagemap_fd_ >= 0;
  switch (validation_) {
    case Validation::kMonitor:
      monitor_name_ = verify_ ? "userfaultfd+pagemap" : MemoryMonitor::kName;
      reports_.reserve(256);
      break;
    case Validation::kPageFrames: monitor_name_ = "pagemap"; break;
    case Validation::kExplicitOnly: monitor_name_ = "explicit"; break;
    default: monitor_name_ = "none"; break;
  }
}

RegistrationCache::~RegistrationCache() {
  // The communicator is going away: nothing may stay pinned, referenced or
  // not. Deregistration errors cannot be reported from a destructor.
  for (auto& [mr, region] : regions_) deregister_(region->mr);
  if (pagemap_fd_ >= 0) close(pagemap_fd_);
  // monitor_ goes after this body: closing its fd drops every watch.
}

namespace {
void add_owner(std::vector<uint64_t>& owners, uint64_t owner) {
  if (owner && std::find(owners.begin(), owners.end(), owner) == owners.end())
    owners.push_back(owner);
}
}  // namespace

const MemoryRegion* RegistrationCache::acquire(const void* addr, size_t len, uint64_t owner) {
  auto address = reinterpret_cast<uintptr_t>(addr);
  uintptr_t begin = address / page_size_ * page_size_;
  uintptr_t last = address + std::max<size_t>(len, 1) - 1;
  uintptr_t end = (last / page_size_ + 1) * page_size_;

  std::lock_guard<std::mutex> lock(mutex_);
  if (enabled_) {
    apply_monitor_reports_locked();
    if (Region* found = find_containing(begin, end)) {
      if (found->stale) {
        fail(COLL_ERR_INVALID_ARG,
             "the buffer %p (%zu bytes) lies in the range %p registered with "
             "coll_mem_register, which was unmapped or emptied (free, munmap, madvise) since: "
             "call coll_mem_deregister before freeing registered memory",
             addr, len, reinterpret_cast<void*>(found->user_addr));
      }
      // The whole range, not only the request: the caller may look up any
      // address of the region it gets (Channel::pinned finds the first
      // pinned region that contains a send's source), so a region with
      // some pages replaced since it was registered must not be handed out
      // at all. (A ring allgather sends from recvbuf after a hit on a
      // larger, older range around sendbuf: the NIC read the old pages.)
      if (found->explicit_range || pages_unchanged(*found, found->begin, found->end)) {
        ++stats_.hits;
        if (found->refcount++ == 0) {
          unlist_unused(found);
          if (writable_ && !found->explicit_range) writable_(found->mr, true);
        }
        add_owner(found->owners, owner);
        return found->mr;
      }
      // Same addresses, other memory: the application freed the buffer.
      ++stats_.invalidations;
      uncache(found);
      if (found->refcount == 0) deregister(found);
    }
  }
  ++stats_.misses;
  Region* region = register_range(begin, end);
  region->refcount = 1;
  add_owner(region->owners, owner);
  return region->mr;
}

void RegistrationCache::release_owner(uint64_t owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Region*> orphaned;
  for (auto& [mr, region] : regions_) {
    if (region->explicit_range) continue;  // the application's, until coll_mem_deregister
    auto& o = region->owners;
    auto it = std::find(o.begin(), o.end(), owner);
    if (it == o.end()) continue;
    o.erase(it);
    if (o.empty() && region->refcount == 0) orphaned.push_back(region.get());
  }
  for (Region* region : orphaned) {
    uncache(region);
    deregister(region);
  }
}

void RegistrationCache::release(const MemoryRegion* mr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = regions_.find(mr);
  if (it == regions_.end() || it->second->refcount <= 0) {
    fail(COLL_ERR_INVALID_ARG,
         "registration cache: release of a memory region (%p) that is not acquired",
         static_cast<const void*>(mr));
  }
  Region* region = it->second.get();
  if (--region->refcount > 0) return;
  if (region->explicit_range) return;  // stays until coll_mem_deregister
  if (!region->cached || validation_ == Validation::kNoReuse) {
    if (region->cached) uncache(region);
    deregister(region);
    return;
  }
  // Cached for the next use, closed until then: a late write aimed at the
  // exposure of the operation that just ended is refused.
  if (writable_) writable_(region->mr, false);
  unused_.push_front(region);
  region->lru_position = unused_.begin();
  region->listed_unused = true;
  make_room(0);
}

void RegistrationCache::invalidate(const void* addr, size_t len) {
  auto begin = reinterpret_cast<uintptr_t>(addr);
  uintptr_t end = begin + std::max<size_t>(len, 1);
  std::lock_guard<std::mutex> lock(mutex_);
  invalidate_locked(begin, end);
}

void RegistrationCache::invalidate_locked(uintptr_t begin, uintptr_t end) {
  std::vector<Region*> overlapping;
  for (auto it = by_begin_.lower_bound(begin > longest_cached_ ? begin - longest_cached_ : 0);
       it != by_begin_.end() && it->first < end; ++it) {
    if (it->second->end > begin) overlapping.push_back(it->second);
  }
  for (Region* region : overlapping) {
    if (region->explicit_range) {
      // Kept until coll_mem_deregister, as promised; requests inside it fail.
      mark_stale(region);
      continue;
    }
    ++stats_.invalidations;
    uncache(region);
    // In use: the user still holds it (a persistent request: its next start
    // fails, see check_held); it goes at its last release.
    if (region->refcount == 0)
      deregister(region);
    else
      mark_stale(region);
  }
}

void RegistrationCache::invalidate_everything_locked() {
  std::vector<Region*> all;
  for (auto& [begin, region] : by_begin_) all.push_back(region);
  for (Region* region : all) invalidate_locked(region->begin, region->end);
}

void RegistrationCache::apply_monitor_reports_slow() {
  std::lock_guard<std::mutex> lock(mutex_);
  apply_monitor_reports_locked();
}

void RegistrationCache::apply_monitor_reports_locked() {
  if (!monitor_ || !monitor_->maybe_pending()) return;
  for (;;) {
    reports_.clear();
    const bool complete = monitor_->drain(&reports_);
    if (!complete) {
      // Reports were lost (or this is a forked child, where nothing is
      // watched): nothing cached can be trusted.
      invalidate_everything_locked();
      if (monitor_->forked()) enabled_ = false;
    }
    for (const MemoryMonitor::Range& r : reports_) invalidate_locked(r.begin, r.end);
    if (reports_.size() < reports_.capacity()) return;
  }
}

void RegistrationCache::mark_stale(Region* region) {
  if (region->stale) return;
  region->stale = true;
  stale_regions_.fetch_add(1, std::memory_order_release);
}

void RegistrationCache::check_held(const std::vector<const MemoryRegion*>& held,
                                   const char* what) {
  // Every coll_start: no lock and no lookup unless some registration is
  // stale or a report is pending (two loads).
  if (held.empty() || (stale_regions_.load(std::memory_order_acquire) == 0 &&
                       !(monitor_ && monitor_->maybe_pending())))
    return;
  std::lock_guard<std::mutex> lock(mutex_);
  apply_monitor_reports_locked();
  for (const MemoryRegion* mr : held) {
    auto it = regions_.find(mr);
    if (it != regions_.end() && it->second->stale) {
      fail(COLL_ERR_INVALID_ARG,
           "%s: a buffer of this persistent request (in %p..%p%s) was unmapped or emptied "
           "(free, munmap, madvise) after its init: free the request before its buffers",
           what, reinterpret_cast<void*>(it->second->begin),
           reinterpret_cast<void*>(it->second->end),
           it->second->explicit_range ? ", registered with coll_mem_register" : "");
    }
  }
}

void RegistrationCache::register_explicit(const void* addr, size_t len) {
  if (addr == nullptr || len == 0)
    fail(COLL_ERR_INVALID_ARG, "coll_mem_register: %s", addr ? "0 bytes" : "NULL address");
  auto address = reinterpret_cast<uintptr_t>(addr);
  if (len > UINTPTR_MAX - address)
    fail(COLL_ERR_INVALID_ARG, "coll_mem_register: %p + %zu bytes wraps around", addr, len);
  uintptr_t begin = address / page_size_ * page_size_;
  uintptr_t end = ((address + len - 1) / page_size_ + 1) * page_size_;
  std::lock_guard<std::mutex> lock(mutex_);
  apply_monitor_reports_locked();
  if (explicit_.count(address))
    fail(COLL_ERR_INVALID_ARG, "coll_mem_register: %p is registered already", addr);
  // Not bounded by the cache's pinned-bytes budget (the application asked),
  // but unused cached ranges make room first.
  make_room(end - begin);
  Region* region = new_region(begin, end);
  region->explicit_range = true;
  region->user_addr = address;
  cache_region(region);
  if (monitor_) region->watched = monitor_->watch(begin, end);
  explicit_.emplace(address, region);
}

void RegistrationCache::deregister_explicit(const void* addr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = explicit_.find(reinterpret_cast<uintptr_t>(addr));
  if (it == explicit_.end())
    fail(COLL_ERR_INVALID_ARG, "coll_mem_deregister: %p was not registered with coll_mem_register",
         addr);
  Region* region = it->second;
  if (region->refcount > 0)
    fail(COLL_ERR_INVALID_ARG,
         "coll_mem_deregister: %p is in use by %d operation(s) (in flight, or a persistent "
         "request not yet freed)",
         addr, region->refcount);
  explicit_.erase(it);
  uncache(region);
  deregister(region);
}

void RegistrationCache::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!unused_.empty()) {
    Region* region = unused_.back();
    uncache(region);
    deregister(region);
  }
}

RegcacheStats RegistrationCache::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  apply_monitor_reports_locked();  // counts what was unmapped until now
  RegcacheStats s = stats_;
  s.monitor = monitor_name_;
  return s;
}

RegistrationCache::Region* RegistrationCache::find_containing(uintptr_t begin,
                                                              uintptr_t end) const {
  // Ranges may overlap, so the range that starts closest below `begin` need
  // not be the one that contains the request: walk down until no range can
  // reach `end` any more.
  auto it = by_begin_.upper_bound(begin);
  while (it != by_begin_.begin()) {
    --it;
    if (it->first + longest_cached_ < end) break;
    if (it->second->end >= end) return it->second;
  }
  return nullptr;
}

std::vector<uint64_t> RegistrationCache::read_page_frames(uintptr_t begin, uintptr_t end) const {
  size_t pages = (end - begin) / page_size_;
  std::vector<uint64_t> entries(pages);
  size_t done = 0;
  while (done < pages) {
    ssize_t got = pread(pagemap_fd_, entries.data() + done, (pages - done) * sizeof(uint64_t),
                        static_cast<off_t>((begin / page_size_ + done) * sizeof(uint64_t)));
    if (got <= 0) {
      // Unreadable: record "not present", which never matches, so the range
      // is re-registered rather than trusted.
      std::fill(entries.begin() + static_cast<ptrdiff_t>(done), entries.end(), 0);
      break;
    }
    done += static_cast<size_t>(got) / sizeof(uint64_t);
  }
  for (uint64_t& entry : entries) {
    entry = (entry & kPagePresent) ? (entry & kFrameNumberMask) : 0;
  }
  return entries;
}

bool RegistrationCache::pages_unchanged(const Region& region, uintptr_t begin,
                                        uintptr_t end) const {
  if (validation_ != Validation::kPageFrames && !verify_) return true;
  std::vector<uint64_t> now = read_page_frames(begin, end);
  size_t first = (begin - region.begin) / page_size_;
  for (size_t i = 0; i < now.size(); ++i) {
    // 0: not present now (or at registration): not the pinned memory.
    if (now[i] == 0 || now[i] != region.page_frames[first + i]) return false;
  }
  return true;
}

RegistrationCache::Region* RegistrationCache::new_region(uintptr_t begin, uintptr_t end) {
  MemoryRegion* mr = register_with_retry(begin, end);
  auto owned = std::make_unique<Region>();
  Region* region = owned.get();
  region->begin = begin;
  region->end = end;
  region->mr = mr;
  ++stats_.registrations;
  stats_.bytes_pinned += region->bytes();
  regions_.emplace(mr, std::move(owned));
  return region;
}

void RegistrationCache::cache_region(Region* region) {
  by_begin_.emplace(region->begin, region);
  region->cached = true;
  longest_cached_ = std::max(longest_cached_, region->bytes());
}

RegistrationCache::Region* RegistrationCache::register_range(uintptr_t begin, uintptr_t end) {
  if (enabled_) make_room(end - begin);
  Region* region = new_region(begin, end);
  if (enabled_ && pagemap_fd_ >= 0) {
    // After registration: the pages are pinned and present now.
    region->page_frames = read_page_frames(begin, end);
  }
  // Reused only where a change would be seen: with the monitor, only a range
  // it watches (the kernel refuses file-backed mappings, for one).
  if (enabled_ && monitor_) region->watched = monitor_->watch(begin, end);
  if (enabled_ && (!monitor_ || region->watched)) cache_region(region);
  return region;
}

MemoryRegion* RegistrationCache::register_with_retry(uintptr_t begin, uintptr_t end) {
  void* addr = reinterpret_cast<void*>(begin);
  size_t len = end - begin;
  MemoryRegion* mr = nullptr;
  try {
    mr = register_(addr, len);
  } catch (const Error& first) {
    if (first.status() != COLL_ERR_NO_RESOURCES) throw;
    // Out of locked memory: give back every range nobody uses, then retry.
    size_t freed = evict_all_unused();
    std::string reason = first.what();
    if (freed > 0) {
      try {
        mr = register_(addr, len);
      } catch (const Error& second) {
        if (second.status() != COLL_ERR_NO_RESOURCES) throw;
        reason = second.what();
      }
    }
    if (mr == nullptr) {
      fail(COLL_ERR_NO_RESOURCES,
           "registration cache: cannot register %zu bytes at %p, even after "
           "deregistering every unused region (%zu bytes freed; %llu bytes stay "
           "registered for operations in flight): %s. Hint: %s",
           len, addr, freed, static_cast<unsigned long long>(stats_.bytes_pinned), reason.c_str(),
           describe_memlock_limit().c_str());
    }
  }
  if (mr == nullptr) {
    fail(COLL_ERR_INTERNAL, "registration cache: the register function returned no region");
  }
  return mr;
}

void RegistrationCache::make_room(size_t bytes) {
  while (!unused_.empty() && stats_.bytes_pinned + bytes > max_pinned_bytes_) {
    Region* oldest = unused_.back();
    ++stats_.evictions;
    uncache(oldest);
    deregister(oldest);
  }
}

size_t RegistrationCache::evict_all_unused() {
  size_t freed = 0;
  while (!unused_.empty()) {
    Region* oldest = unused_.back();
    freed += oldest->bytes();
    ++stats_.evictions;
    uncache(oldest);
    deregister(oldest);
  }
  return freed;
}

void RegistrationCache::unwatch(Region* region) {
  // Only the parts no other watched range covers: ranges may overlap.
  std::vector<std::pair<uintptr_t, uintptr_t>> kept;
  const uintptr_t from = region->begin > longest_cached_ ? region->begin - longest_cached_ : 0;
  for (auto it = by_begin_.lower_bound(from); it != by_begin_.end() && it->first < region->end;
       ++it) {
    const Region* other = it->second;
    if (other != region && other->watched && other->end > region->begin)
      kept.emplace_back(std::max(other->begin, region->begin), std::min(other->end, region->end));
  }
  std::sort(kept.begin(), kept.end());
  uintptr_t at = region->begin;
  for (auto [b, e] : kept) {
    if (b > at) monitor_->unwatch(at, b);
    at = std::max(at, e);
  }
  if (at < region->end) monitor_->unwatch(at, region->end);
  region->watched = false;
}

void RegistrationCache::uncache(Region* region) {
  if (!region->cached) return;
  auto [first, last] = by_begin_.equal_range(region->begin);
  for (auto it = first; it != last; ++it) {
    if (it->second == region) {
      by_begin_.erase(it);
      break;
    }
  }
  region->cached = false;
  unlist_unused(region);
}

void RegistrationCache::unlist_unused(Region* region) {
  if (!region->listed_unused) return;
  unused_.erase(region->lru_position);
  region->listed_unused = false;
}

void RegistrationCache::deregister(Region* region) {
  if (region->stale) stale_regions_.fetch_sub(1, std::memory_order_relaxed);
  // The caller has uncached it: only the owner map still knows it.
  if (region->watched) unwatch(region);
  MemoryRegion* mr = region->mr;
  size_t bytes = region->bytes();
  regions_.erase(mr);
  ++stats_.deregistrations;
  stats_.bytes_pinned -= bytes;
  if (deregister_(mr) != 0) {
    int err = errno;
    fail_errno(COLL_ERR_TRANSPORT, err, "registration cache: deregistering %zu bytes failed",
               bytes);
  }
}

}  // namespace coll
