// The RDMA backend as one half of the shm+rdma transport
// (shm_rdma_transport.cpp). make_rdma_transport (transport.hpp) is the
// whole backend, every pair over verbs.
#pragma once

#include <memory>
#include <vector>

#include "transport/transport.hpp"

namespace coll {

// Connects a queue pair only to the ranks marked in reach (the other
// hosts' ranks); writes to the others fail with EINVAL, check_peer ignores
// them. Runs the same bootstrap exchanges as make_rdma_transport on every
// rank, so ranks with no peer to reach take part too.
std::unique_ptr<Transport> make_rdma_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                                    const std::vector<bool>& reach);

}  // namespace coll
