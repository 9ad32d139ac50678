// A communicator: its bootstrap, its transport, its registered window, the
// registration cache of user buffers, and the channel the algorithms run
// on. Owns them in that order, so they are torn down in reverse: channel,
// cache (deregistering every user buffer), window registration, transport
// (its protection domain), bootstrap.
#pragma once

#include <initializer_list>
#include <memory>
#include <utility>
#include <string>

#include "algorithms.hpp"
#include "bootstrap/bootstrap.hpp"
#include "channel.hpp"
#include "env.hpp"
#include "regcache.hpp"
#include "transport/transport.hpp"

namespace coll {

class Communicator {
 public:
  Communicator(std::unique_ptr<Bootstrap> boot, const Config& config);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return boot_->rank(); }
  int size() const { return boot_->size(); }
  const char* transport_name() const { return transport_->name(); }
  const char* bootstrap_name() const { return boot_->name(); }
  // "" before the first call of that collective.
  const char* last_algorithm(const std::string& collective) const;

  // Arguments are checked before anything is written; a bad one throws
  // Error(COLL_ERR_INVALID_ARG) and leaves the communicator usable. A
  // failure during the exchange is sticky: every later call throws it.
  void allreduce(const void* sendbuf, void* recvbuf, size_t count, int datatype, int op);
  void bcast(void* buf, size_t count, int datatype, int root);
  void barrier();

  RegcacheStats regcache_stats() const { return cache_->stats(); }
  void invalidate(const void* addr, size_t len) { cache_->invalidate(addr, len); }

 private:
  template <class Body>
  void run(std::initializer_list<std::pair<const void*, size_t>> buffers, Body body);

  Config config_;
  std::unique_ptr<Bootstrap> boot_;
  std::unique_ptr<Transport> transport_;
  MemoryRegion* window_mr_ = nullptr;
  std::unique_ptr<RegistrationCache> cache_;
  std::unique_ptr<Channel> channel_;
  const AllreduceAlgorithm* forced_allreduce_ = nullptr;
  const BcastAlgorithm* forced_bcast_ = nullptr;
  const char* last_allreduce_ = "";
  const char* last_bcast_ = "";
  int failed_status_ = 0;
  std::string failed_message_;
};

}  // namespace coll
