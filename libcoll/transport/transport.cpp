#include "transport/transport.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "transport/hybrid_transport.hpp"
#include "transport/tcp_transport.hpp"

namespace coll {

size_t default_window_arena_bytes(size_t world_window_bytes, size_t floor_scale) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t cap = SIZE_MAX / 32;  // no overflow below, whatever the caller asks
  const size_t sixteen = 16 * std::min(world_window_bytes, cap);
  const size_t floor = kMinWindowArenaBytes * std::clamp<size_t>(floor_scale, 1, 64);
  return (std::max(floor, sixteen) + page - 1) / page * page;
}

#ifndef COLL_HAVE_RDMA
bool rdma_device_available() { return false; }

std::unique_ptr<Transport> make_rdma_transport(Bootstrap&, const TransportOptions&) {
  fail(COLL_ERR_INVALID_ARG,
       "COLL_TRANSPORT=rdma: this libcoll was built without RDMA support "
       "(install libibverbs-dev and librdmacm-dev, then rebuild)");
}

std::unique_ptr<Transport> make_shm_rdma_transport(Bootstrap&, const TransportOptions&,
                                                   const std::vector<std::string>&) {
  fail(COLL_ERR_INVALID_ARG,
       "COLL_TRANSPORT=shm+rdma: this libcoll was built without RDMA support "
       "(install libibverbs-dev and librdmacm-dev, then rebuild)");
}
#endif

std::unique_ptr<Transport> make_transport(const std::string& name, Bootstrap& boot,
                                          const TransportOptions& opts,
                                          const std::vector<std::string>& hosts) {
  if (name == "shm") return make_shm_transport(boot, opts);
  if (name == "rdma") return make_rdma_transport(boot, opts);
  // Every pair over TCP, also on one host (that is how CI tests tcp).
  if (name == "tcp") return make_tcp_transport(boot, opts);
  if (name == "shm+rdma") return make_shm_rdma_transport(boot, opts, hosts);
  if (name.empty() || name == "auto" || name == "shm+tcp") {
    // Each peer pair uses the best path it has: shared memory on one host;
    // between hosts RDMA when every rank has a device, else TCP.
    if (boot.size() == 1 && name != "shm+tcp") return make_shm_transport(boot, opts);
    bool one_host = true;
    for (const std::string& h : hosts) one_host = one_host && h == hosts.front();
    if (one_host && name != "shm+tcp") return make_shm_transport(boot, opts);
    if (name != "shm+tcp") {
      // Every rank sees the same host list, so all take this branch together.
      const auto devices = boot.allgather(rdma_device_available() ? "1" : "0", opts.timeout_s);
      bool everywhere = true;
      for (const std::string& d : devices) everywhere = everywhere && d == "1";
      if (everywhere) return make_shm_rdma_transport(boot, opts, hosts);
    }
    return make_hybrid_transport(boot, opts, hosts);
  }
  fail(COLL_ERR_INVALID_ARG,
       "COLL_TRANSPORT=%s: unknown transport (valid: auto, shm, tcp, shm+tcp, rdma, "
       "shm+rdma)", name.c_str());
}

}  // namespace coll
