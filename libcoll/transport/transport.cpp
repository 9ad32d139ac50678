#include "transport/transport.hpp"

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"

namespace coll {

#ifndef COLL_HAVE_RDMA
std::unique_ptr<Transport> make_rdma_transport(Bootstrap&, const TransportOptions&) {
  fail(COLL_ERR_INVALID_ARG,
       "COLL_TRANSPORT=rdma: this libcoll was built without RDMA support "
       "(install libibverbs-dev and librdmacm-dev, then rebuild)");
}
#endif

std::unique_ptr<Transport> make_transport(const std::string& name, Bootstrap& boot,
                                          const TransportOptions& opts) {
  // Until several-host launch exists every job runs on one host, where
  // shared memory is the fastest path.
  if (name.empty() || name == "shm") return make_shm_transport(boot, opts);
  if (name == "rdma") return make_rdma_transport(boot, opts);
  fail(COLL_ERR_INVALID_ARG, "COLL_TRANSPORT=%s: unknown transport (valid: shm, rdma, auto)",
       name.c_str());
}

}  // namespace coll
