#include "transport/transport.hpp"

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "transport/hybrid_transport.hpp"
#include "transport/tcp_transport.hpp"

#include <sys/mman.h>

namespace coll {

void* Transport::alloc_window(size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail_errno(COLL_ERR_NO_RESOURCES, errno, "window of %zu bytes", bytes);
  return p;
}
void Transport::free_window(void* addr, size_t bytes) { munmap(addr, bytes); }

#ifndef COLL_HAVE_RDMA
bool rdma_device_available() { return false; }

std::unique_ptr<Transport> make_rdma_transport(Bootstrap&, const TransportOptions&) {
  fail(COLL_ERR_INVALID_ARG,
       "COLL_TRANSPORT=rdma: this libcoll was built without RDMA support "
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
  if (name.empty() || name == "auto" || name == "shm+tcp") {
    // Each peer pair uses the best path it has: shared memory on one host;
    // between hosts RDMA when every rank has a device, else TCP.
    if (boot.size() == 1 && name != "shm+tcp") return make_shm_transport(boot, opts);
    bool one_host = true;
    for (const std::string& h : hosts) one_host = one_host && h == hosts.front();
    if (one_host && name != "shm+tcp") return make_shm_transport(boot, opts);
    if (name != "shm+tcp") {
      // Every rank sees the same host list, so all take this branch together.
      // RDMA then carries every pair, also those on one host: one rkey space
      // for shm and verbs is future work (a hybrid like shm+tcp).
      const auto devices = boot.allgather(rdma_device_available() ? "1" : "0", opts.timeout_s);
      bool everywhere = true;
      for (const std::string& d : devices) everywhere = everywhere && d == "1";
      if (everywhere) return make_rdma_transport(boot, opts);
    }
    return make_hybrid_transport(boot, opts, hosts);
  }
  fail(COLL_ERR_INVALID_ARG,
       "COLL_TRANSPORT=%s: unknown transport (valid: auto, shm, tcp, shm+tcp, rdma)", name.c_str());
}

}  // namespace coll
