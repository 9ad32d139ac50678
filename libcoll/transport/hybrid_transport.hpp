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
// host_index[r]: rank r's host as a number, alike on every rank (the
// hosts in order of their first rank).
struct HostSplit {
  std::vector<bool> same_host;
  std::vector<bool> remote;
  std::vector<int> host_index;
};
HostSplit split_by_host(int rank, int size, const std::vector<std::string>& hosts,
                        const char* name);

// Whether no two of `ranks` share a host (host_index from HostSplit): then
// every write among them takes a hybrid's network half.
bool on_distinct_hosts(const std::vector<int>& ranks, const std::vector<int>& host_index);

// hosts[r]: rank r's host_identity() (gather_host_map). Every rank
// must pass the same list.
std::unique_ptr<Transport> make_hybrid_transport(Bootstrap& boot, const TransportOptions& opts,
                                                 const std::vector<std::string>& hosts);
// shm+rdma (shm_rdma_transport.cpp): needs an RDMA device on every host;
// a build without RDMA throws COLL_ERR_INVALID_ARG.
std::unique_ptr<Transport> make_shm_rdma_transport(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<std::string>& hosts);

}  // namespace coll
