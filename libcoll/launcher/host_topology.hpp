// This host's cores, NUMA nodes and packages, as --map-by and --bind-to
// see them (cpu_placement.hpp does the placing).
#pragma once

#include <string>

#include "cpu_placement.hpp"

namespace collrun {

// From hwloc when collrun is built with it (and hwloc can read this
// host), else one core per CPU of collrun's affinity mask and no NUMA
// nodes or packages. No cores when neither works; `note` then says why.
HostTopology discover_host_topology(std::string* note);

}  // namespace collrun
