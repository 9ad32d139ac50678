#include "transport/rdma_device_choice.hpp"

#ifdef COLL_HAVE_HWLOC
#include <hwloc.h>
#include <hwloc/glibc-sched.h>
#endif

namespace coll {

size_t choose_nearest_device(const std::vector<DeviceLocality>& devices, const cpu_set_t& mine,
                             int rank) {
  int best = 0;
  std::vector<size_t> tied;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!devices[i].known) continue;
    cpu_set_t both;
    CPU_AND(&both, &mine, &devices[i].near_cpus);
    const int shared = CPU_COUNT(&both);
    if (shared == 0 || shared < best) continue;
    if (shared > best) tied.clear();
    best = shared;
    tied.push_back(i);
  }
  if (tied.empty()) return 0;
  return tied[static_cast<size_t>(rank < 0 ? 0 : rank) % tied.size()];
}

void locate_devices(std::vector<DeviceLocality>* devices) {
#ifdef COLL_HAVE_HWLOC
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) return;
  // I/O objects are left out by default: keep the important ones (PCI
  // devices and their OS devices, among them the OpenFabrics ones).
  if (hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) != 0) {
    hwloc_topology_destroy(topology);
    return;
  }
#if HWLOC_API_VERSION >= 0x00020100
  // Without the libpciaccess component: on Linux the sysfs one still finds
  // every PCI device and where it sits, which is all a placement needs;
  // libpciaccess adds only vendor names, costs a parse of pci.ids at
  // every init and leaks those names (LeakSanitizer shows them).
  (void)hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
#endif
  if (hwloc_topology_load(topology) != 0) {
    hwloc_topology_destroy(topology);
    return;
  }
  for (hwloc_obj_t os = hwloc_get_next_osdev(topology, nullptr); os != nullptr;
       os = hwloc_get_next_osdev(topology, os)) {
    if (os->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || os->name == nullptr) continue;
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topology, os);
    if (near == nullptr || near->cpuset == nullptr) continue;
    for (DeviceLocality& d : *devices) {
      if (d.device != os->name) continue;
      CPU_ZERO(&d.near_cpus);
      d.known = hwloc_cpuset_to_glibc_sched_affinity(topology, near->cpuset, &d.near_cpus,
                                                     sizeof d.near_cpus) == 0;
    }
  }
  hwloc_topology_destroy(topology);
#else
  (void)devices;
#endif
}

}  // namespace coll
