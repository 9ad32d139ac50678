// shm+tcp. The shm half owns the window arena and the region table, both in
// the rank's shared segment; the tcp half checks incoming writes against that
// same table. So one reg_write gives one rkey that is valid on both paths,
// and the Channel above never knows which path a peer takes.
//
// Ordering promise: each pair uses exactly one path, and each path keeps
// posting order (shm copies synchronously, tcp applies one stream in
// order), so a flag still lands after its data.
#include "transport/hybrid_transport.hpp"

#include <algorithm>
#include <map>
#include <utility>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "transport/shm_transport.hpp"
#include "transport/tcp_transport.hpp"

namespace coll {
namespace {

class HybridTransport final : public Transport {
 public:
  HybridTransport(Bootstrap& boot, const TransportOptions& opts,
                  const std::vector<std::string>& hosts)
      : rank_(boot.rank()), size_(boot.size()) {
    HostSplit split = split_by_host(rank_, size_, hosts, "shm+tcp");
    same_host_ = std::move(split.same_host);
    host_index_ = std::move(split.host_index);
    // Both halves run their bootstrap exchanges on every rank, in this
    // order, whatever this rank's mix of peers.
    shm_ = make_shm_transport_part(boot, opts, same_host_);
    tcp_ = make_tcp_transport_part(boot, opts, split.remote, shm_.regions);
  }

  const char* name() const override { return "shm+tcp"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Windows live in the shm half's arena, whose region table both paths
  // check: a peer on the host copies into them, tcp applies into them.
  // Committed whole: the tcp half applies its peers' writes by copying
  // into the arena, and a copy into an uncommitted page of a full
  // /dev/shm would be a SIGBUS in this process. So no writer has anything
  // to commit later: prepare_write is the contract's no-op here.
  void* alloc_window(size_t bytes, size_t /*eager_bytes*/) override {
    return shm_.transport->alloc_window(bytes, bytes);
  }
  void free_window(void* addr, size_t bytes) override {
    shm_.transport->free_window(addr, bytes);
  }
  bool needs_local_registration() const override { return false; }
  // Zero-copy writes into a host peer's buffer are CMA: where the job may
  // not use it, no call goes zero-copy (every rank agrees: cma_works).
  size_t default_zcopy_threshold() const override {
    return shm_.cma_works ? Transport::default_zcopy_threshold() : 0;
  }
  bool zero_copy_refused() const override { return !shm_.cma_works; }
  // Within a host a zero-copy write is CMA (the machine's cost); among
  // ranks on distinct hosts every write is tcp's, direct or not.
  bool direct_writes_like_window_among(const std::vector<int>& ranks) const override {
    return tcp_->direct_writes_like_window() && on_distinct_hosts(ranks, host_index_);
  }

  bool copies_into(int peer, const void* addr, size_t length) const override {
    return peer >= 0 && peer < size_ && same_host_[size_t(peer)] &&
           shm_.transport->copies_into(peer, addr, length);
  }
  MemoryRegion* reg_write(void* addr, size_t length) override {
    return shm_.transport->reg_write(addr, length);
  }
  int dereg(MemoryRegion* mr) override { return shm_.transport->dereg(mr); }
  // One table for both paths (the shm half's): closing it there closes it
  // for the tcp peers too.
  void set_writable(MemoryRegion* mr, bool writable) override {
    shm_.transport->set_writable(mr, writable);
  }

  int post_write(int peer, uint64_t context, const void* local_addr, size_t length,
                 MemoryRegion* mr, int flags, uint64_t remote_addr, uint32_t rkey) override {
    if (peer < 0 || peer >= size_) {
      errno = EINVAL;
      return -1;
    }
    return path(peer).post_write(peer, context, local_addr, length, mr, flags, remote_addr, rkey);
  }
  int post_message(int peer, const void* src, size_t length, uint64_t remote_addr, uint64_t flag,
                   uint64_t flag_addr, uint32_t rkey) override {
    if (peer < 0 || peer >= size_) {
      errno = EINVAL;
      return -1;
    }
    return path(peer).post_message(peer, src, length, remote_addr, flag, flag_addr, rkey);
  }

  // Line messages on both paths: tcp sends one as a frame of its own,
  // gathered whole at the target, each line's flag stored after its
  // payload (tcp_wire::kLinesFrame), so a small message across hosts is
  // one frame instead of data and flag.
  bool line_writes(int peer) const override { return peer >= 0 && peer < size_; }
  int post_lines(int peer, const void* src, size_t len, uint64_t flag, uint64_t remote_addr,
                 uint32_t rkey) override {
    if (!line_writes(peer)) {
      errno = EINVAL;
      return -1;
    }
    return path(peer).post_lines(peer, src, len, flag, remote_addr, rkey);
  }

  int poll(Completion* out, int max) override {
    int n = shm_.transport->poll(out, max);
    // Always: the tcp half applies incoming writes here, even when the shm
    // half filled `out`.
    n += tcp_->poll(out + n, max - n);
    return n;
  }

  // Only the peers on this host share memory, and CPUs.
  bool shares_cpu_placement() const override { return true; }
  void publish_cpu(int cpu) override { shm_.transport->publish_cpu(cpu); }
  bool other_rank_on_cpu(int cpu) const override {
    return shm_.transport->other_rank_on_cpu(cpu);
  }

  uint64_t network_bytes() const override { return tcp_->network_bytes(); }
  int connections() const override {
    return shm_.transport->connections() + tcp_->connections();
  }

  void check_peer(int peer) override {
    // A failure of the tcp half's transport (a protocol violation) fails
    // everything, whichever peer a waiter waits for; a lost remote peer
    // fails only the waiters for it (the tcp half throws for that peer
    // alone, and refuses writes to it at post, which post_write forwards);
    // shm watches its own peers' processes.
    tcp_->check_peer(peer);
    if (peer >= 0 && peer < size_ && same_host_[size_t(peer)]) shm_.transport->check_peer(peer);
  }

 private:
  Transport& path(int peer) { return same_host_[size_t(peer)] ? *shm_.transport : *tcp_; }

  int rank_;
  int size_;
  std::vector<bool> same_host_;
  std::vector<int> host_index_;  // HostSplit::host_index
  ShmPart shm_;
  std::unique_ptr<Transport> tcp_;  // declared after shm_: goes first
};

}  // namespace

HostSplit split_by_host(int rank, int size, const std::vector<std::string>& hosts,
                        const char* name) {
  if (hosts.size() != size_t(size))
    fail(COLL_ERR_INTERNAL, "%s: %zu host identities for %d ranks", name, hosts.size(), size);
  HostSplit split;
  split.same_host.resize(size_t(size));
  split.remote.resize(size_t(size));
  split.host_index.resize(size_t(size));
  std::map<std::string, int> index;
  for (int r = 0; r < size; ++r) {
    split.same_host[size_t(r)] = hosts[size_t(r)] == hosts[size_t(rank)];
    split.remote[size_t(r)] = !split.same_host[size_t(r)];
    split.host_index[size_t(r)] =
        index.try_emplace(hosts[size_t(r)], int(index.size())).first->second;
  }
  return split;
}

bool on_distinct_hosts(const std::vector<int>& ranks, const std::vector<int>& host_index) {
  std::vector<int> seen;
  seen.reserve(ranks.size());
  for (int r : ranks) {
    if (r < 0 || size_t(r) >= host_index.size()) return false;
    seen.push_back(host_index[size_t(r)]);
  }
  std::sort(seen.begin(), seen.end());
  return std::adjacent_find(seen.begin(), seen.end()) == seen.end();
}

std::unique_ptr<Transport> make_hybrid_transport(Bootstrap& boot, const TransportOptions& opts,
                                                 const std::vector<std::string>& hosts) {
  return std::make_unique<HybridTransport>(boot, opts, hosts);
}

}  // namespace coll
