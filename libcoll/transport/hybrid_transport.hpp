// shm+tcp and shm+rdma: every peer pair uses the best path it has -
// shared memory between ranks on one host, TCP or RDMA between hosts -
// behind one Transport.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace coll {

// Each hybrid's two halves' reach: same_host[r] (this rank included) for
// the shm half, remote[r] for the network half. hosts[r]: rank r's
// host_identity(); `name` for the message when the list is the wrong size.
struct HostSplit {
  std::vector<bool> same_host;
  std::vector<bool> remote;
};
HostSplit split_by_host(int rank, int size, const std::vector<std::string>& hosts,
                        const char* name);

// hosts[r]: rank r's host_identity() (gather_host_map). Every rank
// must pass the same list.
std::unique_ptr<Transport> make_hybrid_transport(Bootstrap& boot, const TransportOptions& opts,
                                                 const std::vector<std::string>& hosts);
// shm+rdma (shm_rdma_transport.cpp): needs an RDMA device on every host;
// a build without RDMA throws COLL_ERR_INVALID_ARG.
std::unique_ptr<Transport> make_shm_rdma_transport(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<std::string>& hosts);

}  // namespace coll
