// The shared-memory backend as one half of the shm+tcp and shm+rdma
// transports (hybrid_transport.cpp, shm_rdma_transport.cpp).
// make_shm_transport (transport.hpp) is the whole backend, for jobs on one
// host.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "transport/region_table.hpp"
#include "transport/transport.hpp"

namespace coll {

struct ShmPart {
  std::unique_ptr<Transport> transport;
  // Its region table, in its shared segment: valid while transport lives.
  // The tcp half checks incoming writes against it, so that one reg_write
  // gives one rkey for every peer.
  const RegionEntry* regions = nullptr;
  // reg_write under a key chosen by the caller (shm+rdma: the NIC's rkey
  // for the same memory, so that one rkey serves both paths): see
  // RegionTable::add_with_key. Valid while transport lives; dereg and
  // set_writable of the transport take what it returns.
  std::function<MemoryRegion*(void* addr, size_t length, uint32_t rkey)> reg_write_with_key;
  // Whether every rank of the job may write into its host peers' memory
  // (process_vm_writev, the shm path of zero-copy): a hybrid turns
  // zero-copy off where not (Yama ptrace_scope, seccomp).
  bool cma_works = false;
};

// Maps only the segments of the ranks marked in same_host (and our own);
// writes to the others fail with EINVAL, check_peer ignores them. Runs the
// same bootstrap exchanges as make_shm_transport on every rank.
ShmPart make_shm_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                const std::vector<bool>& same_host);

}  // namespace coll
