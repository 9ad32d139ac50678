// shm+rdma: shared memory between the ranks of one host, RDMA between
// hosts, behind one Transport (issue 14). What flat rdma did before: every
// pair over verbs, a pair on one host through the NIC's loopback (a PCIe
// round trip, or rxe's software path) where a copy through a mapping is
// what the memory bus does best.
//
// One key space. A Channel trades one {addr, rkey} per window and per
// exposure and never knows which path a peer takes, so one rkey must be
// good on both:
//  - reg_write registers the memory with the NIC first (rdma_reg_write on
//    the rdma half's PD) and then tables the same range in the shm half's
//    region table under the NIC's rkey (RegionTable::add_with_key). A peer
//    across hosts presents the rkey to the NIC; a peer on the host finds
//    the same rkey in the owner's table, checked exactly as shm checks its
//    own keys.
//  - dereg takes the table entry out first, so that a writer on the host is
//    refused from then on, then deregisters with the NIC.
//  - set_writable closes the table entry; the NIC has no such switch (the
//    contract's RDMA no-op), so late writes across hosts land in the
//    registration's pinned pages, as under flat rdma.
//
// Windows live in the shm half's arena, where peers on the host copy into
// them through their mapping, and are registered with the NIC like any
// memory (ibv_reg_mr pins shared file pages as it pins anonymous ones).
// Committed and pinned in part, as each half does alone: the headers at
// allocation and registration; a writer's slots when it first writes
// there (prepare_write), a writer on the host committing them through its
// mapping (the shm half), one across hosts having the owner register them
// (the rdma half's register_in_part; the registration commits the pages,
// and a page that /dev/shm could not give fails it, clearly, instead of
// faulting later). The NIC's area rkeys are not in the shm table: writers
// on the host write under the window's rkey, which covers all of it there.
//
// Local registration: the rdma half needs the sources of its writes
// registered, so this transport says it does (needs_local_registration):
// the layers above then pin user buffers and bounce unpinnable sends, as
// for rdma. The shm half ignores the handle.
//
// Ordering promise: each pair uses exactly one path, and each keeps posting
// order (shm copies synchronously; one RC queue pair places writes in
// order), so a flag still lands after its data.
#include <cerrno>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "transport/hybrid_transport.hpp"
#include "transport/rdma_transport.hpp"
#include "transport/shm_transport.hpp"

namespace coll {
namespace {

// What reg_write hands out: the NIC's keys, and both halves' handles.
struct PairedRegion : MemoryRegion {
  MemoryRegion* nic = nullptr;    // the rdma half's
  MemoryRegion* table = nullptr;  // the shm half's, under nic->rkey
};

class ShmRdmaTransport final : public Transport {
 public:
  ShmRdmaTransport(Bootstrap& boot, const TransportOptions& opts,
                   const std::vector<std::string>& hosts)
      : rank_(boot.rank()), size_(boot.size()) {
    HostSplit split = split_by_host(rank_, size_, hosts, "shm+rdma");
    same_host_ = std::move(split.same_host);
    host_index_ = std::move(split.host_index);
    // Both halves run their bootstrap exchanges on every rank, in this
    // order, whatever this rank's mix of peers.
    shm_ = make_shm_transport_part(boot, opts, same_host_);
    rdma_ = make_rdma_transport_part(boot, opts, split.remote);
  }

  const char* name() const override { return "shm+rdma"; }
  std::string describe() const override { return "shm+" + rdma_->describe(); }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void* alloc_window(size_t bytes, size_t eager_bytes) override {
    void* window = shm_.transport->alloc_window(bytes, eager_bytes);
    rdma_->register_in_part(window, bytes, eager_bytes);
    return window;
  }
  void free_window(void* addr, size_t bytes) override {
    shm_.transport->free_window(addr, bytes);  // throws for a bad range: nothing changed
    rdma_->window_freed(addr);
  }

  MemoryRegion* reg_write(void* addr, size_t length) override {
    MemoryRegion* nic = rdma_->reg_write(addr, length);  // throws: nothing to undo
    MemoryRegion* table = nullptr;
    try {
      table = shm_.reg_write_with_key(addr, length, nic->rkey);
    } catch (...) {
      rdma_->dereg(nic);  // NO_RESOURCES from a full table: the cache evicts and retries
      throw;
    }
    auto pair = std::make_unique<PairedRegion>();
    pair->addr = addr;
    pair->length = length;
    pair->lkey = nic->lkey;
    pair->rkey = nic->rkey;
    pair->nic = nic;
    pair->table = table;
    MemoryRegion* handle = pair.get();
    regions_.emplace(handle, std::move(pair));
    return handle;
  }

  int dereg(MemoryRegion* mr) override {
    auto it = regions_.find(mr);
    if (it == regions_.end()) {
      errno = EINVAL;
      return -1;
    }
    PairedRegion& pair = *it->second;
    // The table first: from here a writer on the host is refused, as the
    // NIC refuses writers across hosts once its dereg returns.
    if (pair.table != nullptr && shm_.transport->dereg(pair.table) != 0) return -1;
    pair.table = nullptr;
    if (rdma_->dereg(pair.nic) != 0) return -1;  // errno set; the NIC still has it
    regions_.erase(it);
    return 0;
  }

  void set_writable(MemoryRegion* mr, bool writable) override {
    auto it = regions_.find(mr);
    if (it != regions_.end() && it->second->table != nullptr)
      shm_.transport->set_writable(it->second->table, writable);
  }

  int post_write(int peer, uint64_t context, const void* local_addr, size_t length,
                 MemoryRegion* mr, int flags, uint64_t remote_addr, uint32_t rkey) override {
    if (peer < 0 || peer >= size_) {
      errno = EINVAL;
      return -1;
    }
    if (same_host_[size_t(peer)])
      return shm_.transport->post_write(peer, context, local_addr, length, nullptr, flags,
                                        remote_addr, rkey);
    MemoryRegion* nic = nullptr;
    if (mr != nullptr) {
      auto it = regions_.find(mr);
      if (it == regions_.end()) {
        errno = EINVAL;  // not a registration of ours
        return -1;
      }
      nic = it->second->nic;
    }
    return rdma_->post_write(peer, context, local_addr, length, nic, flags, remote_addr, rkey);
  }

  // Line messages on the host only: the rdma half has none (RDMA places
  // the bytes of one write in no promised order, so a line's flag could
  // land before its payload).
  bool line_writes(int peer) const override {
    return peer >= 0 && peer < size_ && same_host_[size_t(peer)];
  }
  int post_lines(int peer, const void* src, size_t len, uint64_t flag, uint64_t remote_addr,
                 uint32_t rkey) override {
    if (!line_writes(peer)) {
      errno = EINVAL;
      return -1;
    }
    return shm_.transport->post_lines(peer, src, len, flag, remote_addr, rkey);
  }

  int poll(Completion* out, int max) override {
    int n = shm_.transport->poll(out, max);
    if (n < max) n += rdma_->poll(out + n, max - n);
    return n;
  }

  bool needs_local_registration() const override { return true; }
  // Zero-copy on the host is CMA: off for every call where the job may not
  // use it (every rank agrees: cma_works).
  size_t default_zcopy_threshold() const override {
    return shm_.cma_works ? rdma_->default_zcopy_threshold() : 0;
  }
  bool zero_copy_refused() const override { return !shm_.cma_works; }
  // Within a host a zero-copy write is CMA (the machine's cost); among
  // ranks on distinct hosts every write is an RDMA write, direct or not.
  bool direct_writes_like_window_among(const std::vector<int>& ranks) const override {
    return on_distinct_hosts(ranks, host_index_);
  }
  bool copies_into(int peer, const void* addr, size_t length) const override {
    return peer >= 0 && peer < size_ && same_host_[size_t(peer)] &&
           shm_.transport->copies_into(peer, addr, length);
  }

  void check_peer(int peer) override {
    // A failure of the rdma half (an error completion, a lost QP) fails
    // everything, whichever peer a waiter waits for; shm watches its own
    // peers' processes.
    rdma_->check_peer(peer);
    if (peer >= 0 && peer < size_ && same_host_[size_t(peer)]) shm_.transport->check_peer(peer);
  }

  int connections() const override {
    return shm_.transport->connections() + rdma_->connections();
  }
  uint64_t network_bytes() const override { return rdma_->network_bytes(); }
  // Each peer's path commits (shm) or has registered (rdma) its slots.
  int prepare_write(int peer, uint64_t remote_addr, size_t length, uint32_t rkey,
                    uint64_t area_addr, size_t area_length) override {
    Transport& path =
        (peer >= 0 && peer < size_ && same_host_[size_t(peer)]) ? *shm_.transport : *rdma_;
    return path.prepare_write(peer, remote_addr, length, rkey, area_addr, area_length);
  }
  void forget_window(int peer, uint32_t rkey) override { rdma_->forget_window(peer, rkey); }
  // The rdma half's control block and slot areas.
  uint64_t internal_registrations() const override { return rdma_->internal_registrations(); }
  uint64_t pinned_bytes() const override { return rdma_->pinned_bytes(); }

  bool shares_cpu_placement() const override { return true; }
  void publish_cpu(int cpu) override { shm_.transport->publish_cpu(cpu); }
  bool other_rank_on_cpu(int cpu) const override {
    return shm_.transport->other_rank_on_cpu(cpu);
  }

 private:
  int rank_;
  int size_;
  std::vector<bool> same_host_;
  std::vector<int> host_index_;  // HostSplit::host_index
  // Declared so that they go in this order: the pairs, then the rdma half
  // (its destructor deregisters what is still registered, then its QPs and
  // PD), then the shm half (the segment those MRs pinned).
  ShmPart shm_;
  std::unique_ptr<RdmaPart> rdma_;
  std::unordered_map<const MemoryRegion*, std::unique_ptr<PairedRegion>> regions_;
};

}  // namespace

std::unique_ptr<Transport> make_shm_rdma_transport(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<std::string>& hosts) {
  return std::make_unique<ShmRdmaTransport>(boot, opts, hosts);
}

}  // namespace coll
