// MPI_Alloc_mem / MPI_Free_mem (issue 32 item 4): while libcoll serves the
// program, MPI_Alloc_mem's memory comes from coll_mem_alloc, so that an MPI
// program that allocates its buffers this way has its peers on the host
// write into them in place (coll_mem_alloc(3)), unchanged. Where libcoll
// cannot give it (inactive, the arena or /dev/shm full, 0 bytes) MPI's own
// does, as before. MPI_Free_mem knows which is whose by the address.
#include <mpi.h>

#include <mutex>
#include <unordered_set>

#include "coll/coll.h"
#include "shim.hpp"

namespace {

std::mutex g_mutex;
std::unordered_set<void*> g_ours;  // coll_mem_alloc's, not yet freed

}  // namespace

extern "C" int MPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  if (shim::g_active.load() && size > 0 && baseptr != nullptr) {
    void* p = nullptr;
    if (coll_mem_alloc(static_cast<size_t>(size), &p) == COLL_SUCCESS) {
      std::lock_guard<std::mutex> l(g_mutex);
      g_ours.insert(p);
      *static_cast<void**>(baseptr) = p;
      return MPI_SUCCESS;
    }
  }
  return PMPI_Alloc_mem(size, info, baseptr);
}

extern "C" int MPI_Free_mem(void* base) {
  {
    std::lock_guard<std::mutex> l(g_mutex);
    if (g_ours.erase(base) == 0) return PMPI_Free_mem(base);
  }
  const int rc = coll_mem_free(base);
  // After libcoll's finalize the memory is ordinary memory (coll_mem_alloc(3)):
  // nothing is left to free.
  if (rc == COLL_SUCCESS || rc == COLL_ERR_NOT_INITIALIZED) return MPI_SUCCESS;
  std::lock_guard<std::mutex> l(g_mutex);
  g_ours.insert(base);  // still ours: in use by a collective
  return MPI_ERR_BASE;
}
