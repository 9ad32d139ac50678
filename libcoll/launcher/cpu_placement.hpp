// Which CPUs each rank on this host gets, and how --report-bindings says
// so. --map-by orders the host's cores (one after the other, or round-robin
// over its NUMA nodes or packages); rank i of the host takes the i-th core
// of that order, round-robin again past the last one (oversubscription, as
// mpirun wraps); --bind-to then binds it to that core, or to the NUMA node
// or package that holds the core.
//
// Pure: the topology comes in as data (host_topology.hpp discovers it, with
// hwloc when collrun is built with it), so that the math is tested on
// made-up machines (tests/collrun/cpu_placement_test.cpp).
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <vector>

#include "launch_options.hpp"

namespace collrun {

// This host as collrun may use it: only CPUs in collrun's own affinity
// mask count, so cores, NUMA nodes and packages are numbered among those
// that hold at least one such CPU (all of them, unless collrun itself was
// started bound: taskset, a batch system).
struct HostTopology {
  // Each core's usable hardware threads, in hwloc's logical order. Without
  // hwloc: one CPU a core.
  std::vector<cpu_set_t> cores;
  // Empty when not known: the whole host then counts as one.
  std::vector<cpu_set_t> numa_nodes;
  std::vector<cpu_set_t> packages;
  // Why hwloc did not describe the host ("collrun is built without
  // hwloc"), for the note that NUMA nodes or packages are not known; empty
  // when it did.
  std::string without_hwloc;
};

struct RankCpus {
  int rank = 0;                   // in the job
  std::optional<cpu_set_t> cpus;  // unset: not bound
  // Open MPI's line without its "[host:pid] " prefix: "MCW rank 0 bound to
  // socket 0[core 0[hwt 0]]: [B/.]", or "MCW rank 0 is not bound (or bound
  // to all available processors)".
  std::string report;
};

struct HostPlacement {
  std::vector<RankCpus> ranks;     // in the order of `ranks` given
  std::vector<std::string> notes;  // each to be said once (a missing object type)
};

// `ranks`: the job's ranks that run on this host, in their local order.
// `topology` may have no cores only when `bind_to` is none.
HostPlacement place_on_host(const HostTopology& topology, const std::vector<int>& ranks,
                            MapBy map_by, BindTo bind_to);

// "0-1,4" style list of the CPUs in `set`, for messages and tests.
std::string describe_cpu_set(const cpu_set_t& set);

}  // namespace collrun
