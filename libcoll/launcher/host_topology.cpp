#include "host_topology.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#ifdef COLLRUN_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#endif

namespace collrun {
namespace {

#ifdef COLLRUN_HAVE_HWLOC
struct TopologyDeleter {
  void operator()(hwloc_topology* topology) const { hwloc_topology_destroy(topology); }
};
struct BitmapDeleter {
  void operator()(hwloc_bitmap_s* bitmap) const { hwloc_bitmap_free(bitmap); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;
using Bitmap = std::unique_ptr<hwloc_bitmap_s, BitmapDeleter>;

// The CPUs of every object of `type` that collrun may use (`usable`), as
// glibc CPU sets; objects without such a CPU are left out.
std::vector<cpu_set_t> usable_cpus_of(hwloc_topology_t topology, hwloc_obj_type_t type,
                                      hwloc_const_bitmap_t usable) {
  std::vector<cpu_set_t> sets;
  Bitmap both(hwloc_bitmap_alloc());
  int count = hwloc_get_nbobjs_by_type(topology, type);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t object = hwloc_get_obj_by_type(topology, type, static_cast<unsigned>(i));
    if (!object || !object->cpuset) continue;
    hwloc_bitmap_and(both.get(), object->cpuset, usable);
    if (hwloc_bitmap_iszero(both.get())) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (hwloc_cpuset_to_glibc_sched_affinity(topology, both.get(), &set, sizeof set) == 0 &&
        CPU_COUNT(&set) > 0)
      sets.push_back(set);
  }
  return sets;
}

std::optional<HostTopology> hwloc_topology_of_this_host(std::string* note) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) {
    *note = "hwloc_topology_init failed";
    return std::nullopt;
  }
  Topology topology(raw);
  if (hwloc_topology_load(raw) != 0) {
    *note = "hwloc_topology_load failed";
    return std::nullopt;
  }
  // The topology holds the PUs of collrun's cgroup; its own affinity mask
  // (taskset, a batch system's binding) may be narrower, and ranks stay in
  // it.
  Bitmap usable(hwloc_bitmap_alloc());
  if (hwloc_get_cpubind(raw, usable.get(), HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(usable.get(), hwloc_topology_get_allowed_cpuset(raw));
  HostTopology host;
  // A machine whose cores hwloc cannot tell apart still has PUs.
  hwloc_obj_type_t core =
      hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE) > 0 ? HWLOC_OBJ_CORE : HWLOC_OBJ_PU;
  host.cores = usable_cpus_of(raw, core, usable.get());
  host.numa_nodes = usable_cpus_of(raw, HWLOC_OBJ_NUMANODE, usable.get());
  host.packages = usable_cpus_of(raw, HWLOC_OBJ_PACKAGE, usable.get());
  if (host.cores.empty()) {
    *note = "hwloc found no cores";
    return std::nullopt;
  }
  return host;
}
#endif

// Without hwloc: every CPU in collrun's own affinity mask counts as a core.
HostTopology affinity_cpus(std::string* note) {
  HostTopology host;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    *note = std::string("sched_getaffinity: ") + std::strerror(errno);
    return host;
  }
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    host.cores.push_back(one);
  }
  if (host.cores.empty()) *note = "no CPU in collrun's affinity mask";
  return host;
}

}  // namespace

HostTopology discover_host_topology(std::string* note) {
  std::string reason;
#ifdef COLLRUN_HAVE_HWLOC
  if (std::optional<HostTopology> host = hwloc_topology_of_this_host(&reason)) return *host;
#endif
#ifdef COLLRUN_HAVE_HWLOC
  std::string without_hwloc = reason;
#else
  std::string without_hwloc = "collrun is built without hwloc";
#endif
  HostTopology fallback = affinity_cpus(&reason);
  fallback.without_hwloc = without_hwloc;
  if (fallback.cores.empty() && note) *note = reason;
  return fallback;
}

}  // namespace collrun
