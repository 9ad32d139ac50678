#include "cpu_placement.hpp"

namespace collrun {
namespace {

cpu_set_t no_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return set;
}

bool intersects(const cpu_set_t& a, const cpu_set_t& b) {
  cpu_set_t both;
  CPU_AND(&both, &a, &b);
  return CPU_COUNT(&both) > 0;
}

// A NUMA node or a package with the cores it holds.
struct CoreGroup {
  cpu_set_t cpus = no_cpus();  // its cores' CPUs: the object's CPUs collrun may use
  std::vector<int> cores;      // indices into HostTopology::cores, ascending
};

struct Grouping {
  std::vector<CoreGroup> groups;  // numbered as reported ("socket 1")
  std::vector<int> group_of_core;
};

// Each core goes to the first object it shares a CPU with (hwloc's objects
// nest: a core lies in one NUMA node and in one package). Objects without
// a usable core are left out, so the numbers count those that have one.
// Cores that no object holds (a topology that contradicts itself) form one
// group more rather than be lost; no objects at all make the whole host one
// group.
Grouping group_cores(const std::vector<cpu_set_t>& cores, const std::vector<cpu_set_t>& objects) {
  std::vector<CoreGroup> all(objects.size() + 1);  // the last: cores of no object
  for (size_t c = 0; c < cores.size(); ++c) {
    size_t g = 0;
    while (g < objects.size() && !intersects(cores[c], objects[g])) ++g;
    all[g].cores.push_back(static_cast<int>(c));
    CPU_OR(&all[g].cpus, &all[g].cpus, &cores[c]);
  }
  Grouping grouping;
  grouping.group_of_core.resize(cores.size());
  for (const CoreGroup& group : all) {
    if (group.cores.empty()) continue;
    for (int core : group.cores)
      grouping.group_of_core[size_t(core)] = static_cast<int>(grouping.groups.size());
    grouping.groups.push_back(group);
  }
  return grouping;
}

// The first core of each group, then the second of each, ...: consecutive
// ranks go round-robin over the groups while they have cores left, and
// every core is taken once before any is taken twice.
std::vector<int> round_robin_order(const Grouping& grouping) {
  std::vector<int> order;
  for (size_t k = 0;; ++k) {
    size_t taken = order.size();
    for (const CoreGroup& group : grouping.groups)
      if (k < group.cores.size()) order.push_back(group.cores[k]);
    if (order.size() == taken) return order;
  }
}

// Each core's CPUs in ascending order (its hardware threads 0, 1, ...),
// listed once, so that a report line costs the host's CPUs, not
// CPU_SETSIZE a core.
std::vector<std::vector<int>> cpus_of_cores(const std::vector<cpu_set_t>& cores) {
  std::vector<std::vector<int>> lists;
  for (const cpu_set_t& core : cores) {
    std::vector<int>& list = lists.emplace_back();
    for (int cpu = 0; cpu < CPU_SETSIZE && int(list.size()) < CPU_COUNT(&core); ++cpu)
      if (CPU_ISSET(cpu, &core)) list.push_back(cpu);
  }
  return lists;
}

std::string not_bound_line(int rank) {
  return "MCW rank " + std::to_string(rank) +
         " is not bound (or bound to all available processors)";
}

// Open MPI's --report-bindings line in the form of its releases 1.8 to 4.1
// (orte/mca/odls/base/odls_base_default_fns.c, from opal_hwloc_base_cset2str
// and opal_hwloc_base_cset2mapstr in opal/mca/hwloc/base/hwloc_base_util.c),
// the form scripts and people parse: each core the set touches as
// "socket S[core C[hwt H]]" (C counts the host's cores, H the core's
// hardware threads in the set), then a map with one [...] a package, '/'
// between its cores, a B for each hardware thread in the set and a '.' for
// each other. A set that holds every CPU collrun may use is reported, as
// Open MPI does, as not bound: it binds nothing.
std::string report_line(int rank, const cpu_set_t& set,
                        const std::vector<std::vector<int>>& cpus_of_core, const Grouping& packages,
                        const cpu_set_t& usable) {
  cpu_set_t outside;
  CPU_XOR(&outside, &set, &usable);
  if (CPU_COUNT(&set) == 0 || CPU_COUNT(&outside) == 0) return not_bound_line(rank);
  std::string cores_text, map;
  for (size_t p = 0; p < packages.groups.size(); ++p) {
    map += '[';
    for (int core : packages.groups[p].cores) {
      if (core != packages.groups[p].cores.front()) map += '/';
      cpu_set_t threads;  // positions within the core, for describe_cpu_set
      CPU_ZERO(&threads);
      const std::vector<int>& cpus = cpus_of_core[size_t(core)];
      for (size_t thread = 0; thread < cpus.size(); ++thread) {
        bool in = CPU_ISSET(cpus[thread], &set);
        map += in ? 'B' : '.';
        if (in) CPU_SET(thread, &threads);
      }
      if (CPU_COUNT(&threads) == 0) continue;
      if (!cores_text.empty()) cores_text += ", ";
      cores_text.append("socket ")
          .append(std::to_string(p))
          .append("[core ")
          .append(std::to_string(core))
          .append("[hwt ")
          .append(describe_cpu_set(threads))
          .append("]]");
    }
    map += ']';
  }
  return "MCW rank " + std::to_string(rank) + " bound to " + cores_text + ": " + map;
}

// Said once when an object type that the options name is not known here.
void note_missing(const char* what, bool asked, const std::vector<cpu_set_t>& objects,
                  const HostTopology& topology, std::vector<std::string>* notes) {
  if (!asked || !objects.empty() || topology.cores.empty()) return;
  std::string why =
      topology.without_hwloc.empty()
          ? std::string("hwloc shows no ") + what + " on this host"
          : std::string("no ") + what + " known on this host (" + topology.without_hwloc + ")";
  notes->push_back(why + ": the whole machine counts as one " + what);
}

}  // namespace

HostPlacement place_on_host(const HostTopology& topology, const std::vector<int>& ranks,
                            MapBy map_by, BindTo bind_to) {
  HostPlacement placement;
  note_missing("NUMA node", map_by == MapBy::numa || bind_to == BindTo::numa, topology.numa_nodes,
               topology, &placement.notes);
  note_missing("package", map_by == MapBy::package || bind_to == BindTo::package, topology.packages,
               topology, &placement.notes);

  const Grouping whole = group_cores(topology.cores, {});
  const Grouping numa = group_cores(topology.cores, topology.numa_nodes);
  const Grouping packages = group_cores(topology.cores, topology.packages);
  const std::vector<int> order = round_robin_order(map_by == MapBy::numa      ? numa
                                                   : map_by == MapBy::package ? packages
                                                                              : whole);
  const cpu_set_t usable = whole.groups.empty() ? no_cpus() : whole.groups[0].cpus;
  const std::vector<std::vector<int>> cpus_of_core = cpus_of_cores(topology.cores);

  for (size_t i = 0; i < ranks.size(); ++i) {
    RankCpus rank;
    rank.rank = ranks[i];
    if (bind_to == BindTo::none || order.empty()) {
      rank.report = not_bound_line(rank.rank);
      placement.ranks.push_back(rank);
      continue;
    }
    const size_t core = size_t(order[i % order.size()]);  // past the last core: round again
    if (bind_to == BindTo::core)
      rank.cpus = topology.cores[core];
    else if (bind_to == BindTo::numa)
      rank.cpus = numa.groups[size_t(numa.group_of_core[core])].cpus;
    else
      rank.cpus = packages.groups[size_t(packages.group_of_core[core])].cpus;
    rank.report = report_line(rank.rank, *rank.cpus, cpus_of_core, packages, usable);
    placement.ranks.push_back(rank);
  }
  return placement;
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
