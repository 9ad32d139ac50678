// The RDMA backend as one half of the shm+rdma transport
// (shm_rdma_transport.cpp). make_rdma_transport (transport.hpp) is the
// whole backend, every pair over verbs.
#pragma once

#include <memory>
#include <vector>

#include "transport/transport.hpp"

namespace coll {

// The rdma half, with what shm+rdma needs beyond the contract: its windows
// live in the shm half's arena, and are registered in part all the same.
class RdmaPart : public Transport {
 public:
  // reg_write of [addr, addr + bytes), memory the other half allocated as a
  // window, registers only its first eager_bytes, as for a window of
  // alloc_window(bytes, eager_bytes); its writers' slot areas are
  // registered on their request (prepare_write). Until window_freed(addr).
  virtual void register_in_part(void* addr, size_t bytes, size_t eager_bytes) = 0;
  virtual void window_freed(void* addr) = 0;
};

// Connects a queue pair only to the ranks marked in reach (the other
// hosts' ranks); writes to the others fail with EINVAL, check_peer ignores
// them. Runs the same bootstrap exchanges as make_rdma_transport on every
// rank, so ranks with no peer to reach take part too.
std::unique_ptr<RdmaPart> make_rdma_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<bool>& reach);

}  // namespace coll
