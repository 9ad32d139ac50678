// --bind-to core: which CPUs each rank may run on.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace collrun {

// One CPU set per rank: rank i gets core i (round-robin when there are more
// ranks than cores), i.e. every hardware thread of that core that collrun
// itself may use. Uses hwloc's topology when collrun is built with it,
// else one allowed CPU per rank. Empty when no plan could be made; `note`
// then says why.
std::vector<cpu_set_t> plan_core_binding(int num_ranks, std::string* note);

// "0-1,4" style list of the CPUs in `set`, for messages and tests.
std::string describe_cpu_set(const cpu_set_t& set);

}  // namespace collrun
