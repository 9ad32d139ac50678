#include "transport/region_table.hpp"

#include <cerrno>

#include "error.hpp"

namespace coll {
namespace {

constexpr uint32_t kGenerationMask = (1u << (32 - kRegionIndexBits)) - 1;

uint32_t home_of(uint32_t rkey) { return rkey & (kMaxRegions - 1); }

// The live entry whose rkey is `rkey` (acquire: its range, written before
// the rkey was published, is then visible), or null. A generated key sits
// at its home, so the first probe finds it; a key of the NIC may sit a few
// entries past its home. rkey 0 is "free", never a match.
const RegionEntry* find_entry(const RegionEntry* entries, uint32_t rkey) {
  if (rkey == 0) return nullptr;
  for (uint32_t i = 0; i < kRegionProbe; ++i) {
    const RegionEntry& e = entries[(home_of(rkey) + i) % kMaxRegions];
    if (e.rkey.load(std::memory_order_acquire) == rkey) return &e;
  }
  return nullptr;
}

}  // namespace

RegionCheck check_region(const RegionEntry* entries, uint32_t rkey, uint64_t remote_addr,
                         uint64_t length, RegionGrant* grant) {
  const RegionEntry* found = find_entry(entries, rkey);
  if (found == nullptr) return RegionCheck::kUnknownRkey;
  const RegionEntry& e = *found;
  // The range may be read from another process while the owner reuses the
  // entry: read it, then make sure the rkey did not change meanwhile.
  RegionGrant g;
  g.kind = __atomic_load_n(&e.kind, __ATOMIC_RELAXED);
  g.addr = __atomic_load_n(&e.addr, __ATOMIC_RELAXED);
  g.length = __atomic_load_n(&e.length, __ATOMIC_RELAXED);
  const bool closed = e.closed.load(std::memory_order_relaxed) != 0;
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.rkey.load(std::memory_order_relaxed) != rkey) return RegionCheck::kUnknownRkey;
  if (grant) *grant = g;
  if (remote_addr < g.addr || length > g.length || remote_addr - g.addr > g.length - length)
    return RegionCheck::kOutOfRange;
  return closed ? RegionCheck::kClosed : RegionCheck::kOk;
}

bool region_alive(const RegionEntry* entries, uint32_t rkey) {
  const RegionEntry* e = find_entry(entries, rkey);
  return e != nullptr && e->closed.load(std::memory_order_acquire) == 0;
}

RegionTable::RegionTable(RegionEntry* entries, const char* transport_name)
    : entries_(entries), transport_name_(transport_name), handles_(kMaxRegions) {
  for (uint32_t i = 0; i < kMaxRegions; ++i) {
    entries_[i].rkey.store(0, std::memory_order_relaxed);
    entries_[i].kind = 0;
    entries_[i].addr = 0;
    entries_[i].length = 0;
    entries_[i].closed.store(0, std::memory_order_relaxed);
    entries_[i].reserved = 0;
  }
  std::atomic_thread_fence(std::memory_order_release);
}

MemoryRegion* RegionTable::add(void* addr, size_t length, RegionKind kind) {
  for (uint32_t i = 0; i < kMaxRegions; ++i) {
    const uint32_t idx = (next_index_ + i) % kMaxRegions;
    if (entries_[idx].rkey.load(std::memory_order_relaxed) != 0) continue;
    next_index_ = idx + 1;
    generation_ = (generation_ + 1) & kGenerationMask;
    if (generation_ == 0) generation_ = 1;  // rkey 0 means "free"
    return fill(idx, addr, length, kind, (generation_ << kRegionIndexBits) | idx);
  }
  fail(COLL_ERR_NO_RESOURCES, "%s transport: all %u region table entries are in use",
       transport_name_, kMaxRegions);
}

MemoryRegion* RegionTable::add_with_key(void* addr, size_t length, RegionKind kind,
                                        uint32_t rkey) {
  if (rkey == 0 || find_entry(entries_, rkey) != nullptr)
    fail(COLL_ERR_INTERNAL, "%s transport: rkey 0x%x cannot be tabled: %s", transport_name_,
         rkey, rkey == 0 ? "0 means a free entry" : "it is live already");
  for (uint32_t i = 0; i < kRegionProbe; ++i) {
    const uint32_t idx = (home_of(rkey) + i) % kMaxRegions;
    if (entries_[idx].rkey.load(std::memory_order_relaxed) == 0)
      return fill(idx, addr, length, kind, rkey);
  }
  fail(COLL_ERR_NO_RESOURCES,
       "%s transport: the %u region table entries that rkey 0x%x may use are all in use",
       transport_name_, kRegionProbe, rkey);
}

MemoryRegion* RegionTable::fill(uint32_t idx, void* addr, size_t length, RegionKind kind,
                                uint32_t rkey) {
  RegionEntry& e = entries_[idx];
  __atomic_store_n(&e.kind, static_cast<uint32_t>(kind), __ATOMIC_RELAXED);
  __atomic_store_n(&e.addr, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(addr)),
                   __ATOMIC_RELAXED);
  __atomic_store_n(&e.length, static_cast<uint64_t>(length), __ATOMIC_RELAXED);
  e.closed.store(0, std::memory_order_relaxed);
  e.rkey.store(rkey, std::memory_order_release);
  auto mr = std::make_unique<MemoryRegion>();
  mr->addr = addr;
  mr->length = length;
  mr->lkey = rkey;
  mr->rkey = rkey;
  handles_[idx] = std::move(mr);
  return handles_[idx].get();
}

uint32_t RegionTable::index_of_handle(const MemoryRegion* mr) const {
  // Found by pointer, never by reading *mr: a handle deregistered twice
  // (dangling) or one of another transport must be refused, not read.
  for (uint32_t idx = 0; mr != nullptr && idx < kMaxRegions; ++idx)
    if (handles_[idx].get() == mr) return idx;
  return kMaxRegions;
}

int RegionTable::remove(MemoryRegion* mr) {
  const uint32_t idx = index_of_handle(mr);
  if (idx == kMaxRegions) {
    errno = EINVAL;
    return -1;
  }
  entries_[idx].rkey.store(0, std::memory_order_release);
  handles_[idx].reset();
  return 0;
}

void RegionTable::set_open(MemoryRegion* mr, bool open) {
  // Called twice per operation on a cached buffer: looked up from the
  // rkey's home (a handle the caller holds is live), then confirmed by
  // pointer, as remove does.
  if (mr == nullptr) return;
  uint32_t idx = kMaxRegions;
  for (uint32_t i = 0; i < kRegionProbe && idx == kMaxRegions; ++i) {
    const uint32_t at = (home_of(mr->rkey) + i) % kMaxRegions;
    if (handles_[at].get() == mr) idx = at;
  }
  if (idx == kMaxRegions) return;
  // Release: a writer that sees the region open again also sees everything
  // the owner did before (it exposes the buffer only after this).
  entries_[idx].closed.store(open ? 0 : 1, std::memory_order_release);
}

}  // namespace coll
