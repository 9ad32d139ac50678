#include "cpu_binding.hpp"

#include <cerrno>
#include <cstring>

#ifdef COLLRUN_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#endif

namespace collrun {
namespace {

std::vector<cpu_set_t> round_robin(const std::vector<cpu_set_t>& cores, int num_ranks) {
  std::vector<cpu_set_t> plan;
  if (cores.empty()) return plan;
  for (int rank = 0; rank < num_ranks; ++rank)
    plan.push_back(cores[static_cast<size_t>(rank) % cores.size()]);
  return plan;
}

#ifdef COLLRUN_HAVE_HWLOC
// The cores hwloc sees (by default its topology holds only the processing
// units this process may use), as glibc CPU sets.
std::vector<cpu_set_t> hwloc_cores(std::string* note) {
  std::vector<cpu_set_t> cores;
  hwloc_topology_t topology;
  if (hwloc_topology_init(&topology) != 0) {
    *note = "hwloc_topology_init failed";
    return cores;
  }
  if (hwloc_topology_load(topology) != 0) {
    *note = "hwloc_topology_load failed";
    hwloc_topology_destroy(topology);
    return cores;
  }
  // The topology holds the PUs of collrun's cgroup; its own affinity mask
  // (taskset, a batch system's binding) may be narrower, and ranks stay in
  // it.
  hwloc_bitmap_t bound = hwloc_bitmap_alloc();
  hwloc_bitmap_t usable = hwloc_bitmap_alloc();
  if (hwloc_get_cpubind(topology, bound, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(bound, hwloc_topology_get_allowed_cpuset(topology));
  hwloc_obj_type_t type = HWLOC_OBJ_CORE;
  if (hwloc_get_nbobjs_by_type(topology, type) <= 0) type = HWLOC_OBJ_PU;
  int count = hwloc_get_nbobjs_by_type(topology, type);
  for (int i = 0; i < count; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(topology, type, static_cast<unsigned>(i));
    if (!core || !core->cpuset) continue;
    hwloc_bitmap_and(usable, core->cpuset, bound);
    if (hwloc_bitmap_iszero(usable)) continue;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (hwloc_cpuset_to_glibc_sched_affinity(topology, usable, &set, sizeof set) == 0 &&
        CPU_COUNT(&set) > 0)
      cores.push_back(set);
  }
  hwloc_bitmap_free(usable);
  hwloc_bitmap_free(bound);
  hwloc_topology_destroy(topology);
  if (cores.empty()) *note = "hwloc found no cores";
  return cores;
}
#endif

// Without hwloc: every CPU in collrun's own affinity mask counts as a core.
std::vector<cpu_set_t> affinity_cpus(std::string* note) {
  std::vector<cpu_set_t> cpus;
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    *note = std::string("sched_getaffinity: ") + std::strerror(errno);
    return cpus;
  }
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    cpus.push_back(one);
  }
  if (cpus.empty()) *note = "no CPU in collrun's affinity mask";
  return cpus;
}

}  // namespace

std::vector<cpu_set_t> plan_core_binding(int num_ranks, std::string* note) {
  std::string reason;
#ifdef COLLRUN_HAVE_HWLOC
  std::vector<cpu_set_t> plan = round_robin(hwloc_cores(&reason), num_ranks);
  if (!plan.empty()) return plan;
#endif
  std::vector<cpu_set_t> fallback = round_robin(affinity_cpus(&reason), num_ranks);
  if (fallback.empty() && note) *note = reason;
  return fallback;
}

std::string describe_cpu_set(const cpu_set_t& set) {
  std::string text;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &set)) continue;
    int last = cpu;
    while (last + 1 < CPU_SETSIZE && CPU_ISSET(last + 1, &set)) ++last;
    if (!text.empty()) text += ',';
    text += std::to_string(cpu);
    // append(), not "-" + std::to_string(): GCC 12 at -O3 warns
    // (-Wrestrict, a false positive) inside that operator+.
    if (last > cpu) text.append("-").append(std::to_string(last));
    cpu = last;
  }
  return text;
}

}  // namespace collrun
