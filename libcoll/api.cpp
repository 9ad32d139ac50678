// The C API: argument checks live in Communicator; here every call is
// wrapped so that no exception crosses into C, and the message of a failure
// is kept on the communicator (coll_comm_last_error).
#include <coll/coll.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>

#include "bootstrap/bootstrap.hpp"
#include "communicator.hpp"
#include "datatype.hpp"
#include "env.hpp"
#include "error.hpp"

struct coll_comm {
  std::unique_ptr<coll::Communicator> impl;
  std::string last_error;
};

namespace {

std::mutex g_mutex;             // guards init / finalize
coll_comm* g_world = nullptr;   // non-null between init and finalize
std::string g_init_error;       // last failure of coll_init / coll_finalize

// Runs body, turning exceptions into a status and a stored message.
template <class Body>
int guarded(std::string& message, Body body) {
  try {
    body();
    return COLL_SUCCESS;
  } catch (const coll::Error& e) {
    message = e.what();
    return e.status();
  } catch (const std::bad_alloc&) {
    message = "out of memory";
    return COLL_ERR_NO_RESOURCES;
  } catch (const std::exception& e) {
    message = std::string("internal error: ") + e.what();
    return COLL_ERR_INTERNAL;
  } catch (...) {
    message = "internal error: unknown exception";
    return COLL_ERR_INTERNAL;
  }
}

// C callers may pass any int as a coll_datatype_t or coll_op_t, and loading
// an out-of-range value as the C++ enum is undefined behaviour: read the
// bits as an int instead, and let the communicator reject bad values.
template <class Enum>
int raw_enum(const Enum& e) {
  static_assert(sizeof(int) == sizeof(Enum));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Checks the communicator handle, then runs body on it.
template <class Body>
int on_comm(coll_comm_t comm, Body body) {
  if (!g_world) return COLL_ERR_NOT_INITIALIZED;
  if (!comm) {
    g_init_error = "NULL communicator";
    return COLL_ERR_INVALID_ARG;
  }
  return guarded(comm->last_error, [&] { body(*comm->impl); });
}

}  // namespace

extern "C" {

int coll_init(int* /*argc*/, char*** /*argv*/) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_world) {
    g_init_error = "coll_init called twice";
    return COLL_ERR_INVALID_ARG;
  }
  return guarded(g_init_error, [&] {
    coll::Config config = coll::load_config();
    auto boot = coll::make_bootstrap_from_environment(config.timeout_s);
    auto world = std::make_unique<coll_comm>();
    world->impl = std::make_unique<coll::Communicator>(std::move(boot), config);
    g_world = world.release();
    g_init_error.clear();
  });
}

int coll_finalize(void) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_world) return COLL_ERR_NOT_INITIALIZED;
  int status = guarded(g_init_error, [&] { delete g_world; });
  g_world = nullptr;
  return status;
}

int coll_initialized(int* flag) {
  if (!flag) return COLL_ERR_INVALID_ARG;
  *flag = g_world != nullptr;
  return COLL_SUCCESS;
}

coll_comm_t coll_comm_world(void) { return g_world; }

int coll_comm_rank(coll_comm_t comm, int* rank) {
  return on_comm(comm, [&](coll::Communicator& c) {
    if (!rank) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_rank: NULL rank");
    *rank = c.rank();
  });
}

int coll_comm_size(coll_comm_t comm, int* size) {
  return on_comm(comm, [&](coll::Communicator& c) {
    if (!size) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_size: NULL size");
    *size = c.size();
  });
}

int coll_allreduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                   coll_op_t op, coll_comm_t comm) {
  return on_comm(comm, [&](coll::Communicator& c) {
    c.allreduce(sendbuf, recvbuf, count, raw_enum(datatype), raw_enum(op));
  });
}

int coll_bcast(void* buf, size_t count, coll_datatype_t datatype, int root, coll_comm_t comm) {
  return on_comm(comm, [&](coll::Communicator& c) { c.bcast(buf, count, raw_enum(datatype), root); });
}

int coll_barrier(coll_comm_t comm) {
  return on_comm(comm, [&](coll::Communicator& c) { c.barrier(); });
}

const char* coll_strerror(int status) {
  switch (status) {
    case COLL_SUCCESS: return "COLL_SUCCESS: no error";
    case COLL_ERR_INVALID_ARG: return "COLL_ERR_INVALID_ARG: invalid argument";
    case COLL_ERR_NOT_INITIALIZED: return "COLL_ERR_NOT_INITIALIZED: coll_init has not been called";
    case COLL_ERR_TIMEOUT: return "COLL_ERR_TIMEOUT: a wait passed COLL_TIMEOUT";
    case COLL_ERR_PEER_LOST: return "COLL_ERR_PEER_LOST: a peer process is gone";
    case COLL_ERR_NO_RESOURCES: return "COLL_ERR_NO_RESOURCES: out of resources";
    case COLL_ERR_TRANSPORT: return "COLL_ERR_TRANSPORT: transport error";
    case COLL_ERR_INTERNAL: return "COLL_ERR_INTERNAL: internal error";
    default: return "unknown libcoll status code";
  }
}

const char* coll_comm_last_error(coll_comm_t comm) {
  return comm ? comm->last_error.c_str() : g_init_error.c_str();
}

const char* coll_comm_transport_name(coll_comm_t comm) {
  return comm ? comm->impl->transport_name() : "";
}

const char* coll_comm_bootstrap_name(coll_comm_t comm) {
  return comm ? comm->impl->bootstrap_name() : "";
}

const char* coll_comm_last_algorithm(coll_comm_t comm, const char* collective) {
  return comm && collective ? comm->impl->last_algorithm(collective) : "";
}

size_t coll_datatype_size(coll_datatype_t datatype) {
  return coll::datatype_size(raw_enum(datatype));
}

int coll_comm_regcache_stats(coll_comm_t comm, coll_regcache_stats_t* stats) {
  return on_comm(comm, [&](coll::Communicator& c) {
    if (!stats) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_regcache_stats: NULL stats");
    const coll::RegcacheStats s = c.regcache_stats();
    *stats = {s.hits, s.misses, s.registrations, s.deregistrations, s.evictions,
              s.invalidations, s.bytes_pinned};
  });
}

int coll_mem_invalidate(void* addr, size_t len) {
  if (!g_world) return COLL_ERR_NOT_INITIALIZED;
  return on_comm(g_world, [&](coll::Communicator& c) { c.invalidate(addr, len); });
}

}  // extern "C"
