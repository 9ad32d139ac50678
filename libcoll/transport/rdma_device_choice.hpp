// Which RDMA device a rank uses when the user does not say
// (COLL_RDMA_ADDR, COLL_RDMA_DEVICE): the one nearest the CPUs it may run
// on, as hwloc places the devices (issue 14). A NIC on the other package
// costs every write a trip over the inter-socket link, and a NIC per
// package (or per NUMA node: rails) is how multi-rail nodes are built.
// The choice is pure (unit-tested on made-up topologies); reading hwloc is
// separate.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace coll {

// One RDMA device and the CPUs hwloc says are near it (its non-I/O
// ancestor's cpuset). known is false where hwloc does not place the device
// (software devices such as rxe, no PCI parent; or no hwloc).
struct DeviceLocality {
  std::string device;
  bool known = false;
  cpu_set_t near_cpus{};
};

// Index into `devices` (distinct names, in the order the addresses were
// found) of the device for a rank whose affinity is `mine`: the one whose
// near CPUs hold most of the rank's CPUs; ties among them go round-robin
// by `rank`, so the ranks of a package spread over its rails. Devices whose
// place is unknown are chosen only when no known device holds any of the
// rank's CPUs, and then the first of all: what the transport did before
// (every rank on the first device).
size_t choose_nearest_device(const std::vector<DeviceLocality>& devices, const cpu_set_t& mine,
                             int rank);

// Fills in `known` and `near_cpus` from hwloc (I/O objects of type
// OpenFabrics, by name); leaves them unknown in a build without hwloc or
// where hwloc cannot read the host.
void locate_devices(std::vector<DeviceLocality>* devices);

}  // namespace coll
