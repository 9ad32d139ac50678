// RegionTable: the registered regions of one rank, as the writers check
// them. rdma_reg_write(3) hands out an rkey that a peer must present with
// every write; a write whose rkey is unknown (never registered, or
// deregistered since) or whose range leaves the region fails and never
// lands. Every software backend keeps that promise with this table:
//  - shm keeps it in the rank's shared segment, where peers read it before
//    they copy;
//  - tcp keeps it in private memory, and the target checks every incoming
//    frame against it before applying it;
//  - shm+tcp keeps one table in the segment that both paths check, so one
//    reg_write gives one rkey valid for every peer.
//
// An rkey is (generation << kRegionIndexBits) | index: a deregistered entry
// that is reused gets a new generation, so a stale rkey never matches it.
// shm+rdma tables the NIC's rkeys instead (add_with_key), so that one rkey
// names a region to its peers on the host and across the network alike.
// Such a key lives at its home entry (its low kRegionIndexBits bits, as a
// generated key always does) or at most kRegionProbe - 1 entries past it:
// a lookup looks at that many entries and never stops early, so removing
// an entry (rkey 0) never hides another, and needs no tombstone. The NIC
// never hands out a live rkey twice; a stale one matches nothing once its
// entry is removed.
//
// A registered region can also be closed (set_open(mr, false)) without being
// deregistered: writes into it are refused until it is opened again. The
// registration cache closes a user buffer's region when the last operation
// using it ends, so an exposure {addr, rkey} is good for the operation that
// made it only: a late or replayed write aimed at it afterwards is refused,
// whether the buffer still holds the application's data or was freed and
// its address reused. (RDMA has no such switch short of memory windows; its
// registration pins the old pages, so a late write lands there, never in
// new memory, until the deregistration makes the NIC refuse it.)
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/transport.hpp"

namespace coll {

inline constexpr uint32_t kRegionIndexBits = 10;
inline constexpr uint32_t kMaxRegions = 1u << kRegionIndexBits;
inline constexpr uint32_t kRegionProbe = 16;

// How a peer on the same host reaches the region (tcp ignores it: the
// target writes into its own memory).
enum RegionKind : uint32_t {
  kRegionInSegment = 1,      // inside the owner's shared segment: a copy
  kRegionProcessMemory = 2,  // elsewhere in the owner: process_vm_writev
};

// One entry, laid out for shared memory (no pointers, fixed size). rkey 0
// means free. The owner fills kind/addr/length, then publishes rkey with a
// release store; a reader loads rkey (acquire), the range, and rkey again.
struct RegionEntry {
  std::atomic<uint32_t> rkey;
  uint32_t kind;
  uint64_t addr;  // in the owner's address space
  uint64_t length;
  std::atomic<uint32_t> closed;  // 1: registered, but refuses writes
  uint32_t reserved;
};
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "region entries are shared between processes");

// What a writer learns from the table: a copy, taken consistently.
struct RegionGrant {
  uint32_t kind = 0;
  uint64_t addr = 0;
  uint64_t length = 0;
};

// Why a write was refused (for messages that name the problem).
enum class RegionCheck { kOk, kUnknownRkey, kOutOfRange, kClosed };

// The writer's check: does `rkey` name a live region of the table at
// `entries` that covers [remote_addr, remote_addr + length)? Fills *grant
// when it does, and with the region it is outside of when the range is
// out of it (kOutOfRange: for the message). Never writes to the table.
RegionCheck check_region(const RegionEntry* entries, uint32_t rkey, uint64_t remote_addr,
                         uint64_t length, RegionGrant* grant);

// True while `rkey` still names a live, open entry (a write that spans
// several progress calls re-checks before each piece: dereg() may come
// between).
bool region_alive(const RegionEntry* entries, uint32_t rkey);

// Lands a checked write in memory this process maps (its own, or a peer's
// segment). An 8-byte write to an 8-byte aligned address is one release
// store: the contract's promise for flags and credits, which readers poll
// with acquire loads.
inline void apply_write(void* dst, const void* src, size_t length) {
  if (length == 8 && (reinterpret_cast<uintptr_t>(dst) & 7) == 0) {
    uint64_t v;
    std::memcpy(&v, src, 8);
    __atomic_store_n(static_cast<uint64_t*>(dst), v, __ATOMIC_RELEASE);
  } else if (length > 0) {
    std::memcpy(dst, src, length);
  }
}

// The owner's side: hands out entries and MemoryRegion handles. The
// entries live where the caller puts them (kMaxRegions of them); the table
// clears them at construction.
class RegionTable {
 public:
  RegionTable(RegionEntry* entries, const char* transport_name);
  RegionTable(const RegionTable&) = delete;
  RegionTable& operator=(const RegionTable&) = delete;

  const RegionEntry* entries() const { return entries_; }

  // Throws Error(COLL_ERR_NO_RESOURCES) when every entry is in use.
  MemoryRegion* add(void* addr, size_t length, RegionKind kind);
  // The same under a key chosen elsewhere (the NIC's rkey of the same
  // memory: shm+rdma), placed near its home entry (see above). Throws
  // Error(COLL_ERR_NO_RESOURCES) when the entries near its home are all in
  // use (the registration cache evicts and retries), COLL_ERR_INTERNAL for
  // key 0 or a key that is already live.
  MemoryRegion* add_with_key(void* addr, size_t length, RegionKind kind, uint32_t rkey);
  // 0, or -1 with errno EINVAL when mr is not one of ours. After it, the
  // rkey fails every check.
  int remove(MemoryRegion* mr);
  // Opens or closes mr (see above); a region is open when added. Ignores a
  // handle that is not one of ours (the caller's bug shows at dereg).
  void set_open(MemoryRegion* mr, bool open);

 private:
  MemoryRegion* fill(uint32_t idx, void* addr, size_t length, RegionKind kind, uint32_t rkey);
  // The entry index of a handle of ours, or kMaxRegions.
  uint32_t index_of_handle(const MemoryRegion* mr) const;

  RegionEntry* entries_;
  const char* transport_name_;
  std::vector<std::unique_ptr<MemoryRegion>> handles_;  // by entry index
  uint32_t next_index_ = 0;
  uint32_t generation_ = 0;
};

}  // namespace coll
