// The placement math of --map-by, --bind-to and --report-bindings
// (cpu_placement.hpp) on made-up machines: which CPUs each rank gets and
// the line Open MPI's mpirun would print for it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cpu_placement.hpp"

namespace collrun {
namespace {

cpu_set_t cpus(std::initializer_list<int> list) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : list) CPU_SET(cpu, &set);
  return set;
}

cpu_set_t cpu_range(int first, int count) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu = first; cpu < first + count; ++cpu) CPU_SET(cpu, &set);
  return set;
}

// packages x NUMA nodes a package x cores a NUMA node, one CPU a core,
// numbered in that order (core c is CPU c).
HostTopology machine(int packages, int numa_per_package, int cores_per_numa) {
  HostTopology host;
  int cores_per_package = numa_per_package * cores_per_numa;
  for (int p = 0; p < packages; ++p)
    host.packages.push_back(cpu_range(p * cores_per_package, cores_per_package));
  for (int n = 0; n < packages * numa_per_package; ++n)
    host.numa_nodes.push_back(cpu_range(n * cores_per_numa, cores_per_numa));
  for (int c = 0; c < packages * cores_per_package; ++c) host.cores.push_back(cpus({c}));
  return host;
}

std::vector<int> ranks_up_to(int count) {
  std::vector<int> ranks;
  for (int rank = 0; rank < count; ++rank) ranks.push_back(rank);
  return ranks;
}

// Each rank's CPUs, "-" where it is not bound.
std::vector<std::string> cpus_of(const HostPlacement& placement) {
  std::vector<std::string> sets;
  for (const RankCpus& rank : placement.ranks)
    sets.push_back(rank.cpus ? describe_cpu_set(*rank.cpus) : "-");
  return sets;
}

using Strings = std::vector<std::string>;

const HostTopology kBig = machine(2, 2, 4);  // 2 packages x 2 NUMA nodes x 4 cores

TEST(CpuPlacement, MapByCoreTakesTheCoresInOrder) {
  HostPlacement p = place_on_host(kBig, ranks_up_to(3), MapBy::core, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0", "1", "2"}));
  EXPECT_TRUE(p.notes.empty());
  EXPECT_EQ(p.ranks[0].report,
            "MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/././././././.][./././././././.]");
  EXPECT_EQ(p.ranks[2].report,
            "MCW rank 2 bound to socket 0[core 2[hwt 0]]: [././B/././././.][./././././././.]");
  // The default, slot, and node place the ranks of one host the same way.
  for (MapBy map_by : {MapBy::slot, MapBy::node})
    EXPECT_EQ(cpus_of(place_on_host(kBig, ranks_up_to(3), map_by, BindTo::core)),
              (Strings{"0", "1", "2"}));
}

TEST(CpuPlacement, MapByNumaGoesRoundTheNumaNodesThenTheirCores) {
  HostPlacement p = place_on_host(kBig, ranks_up_to(6), MapBy::numa, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0", "4", "8", "12", "1", "5"}));
  EXPECT_EQ(p.ranks[3].report,
            "MCW rank 3 bound to socket 1[core 12[hwt 0]]: [./././././././.][././././B/././.]");
}

TEST(CpuPlacement, MapByPackageGoesRoundThePackagesThenTheirCores) {
  HostPlacement p = place_on_host(kBig, ranks_up_to(5), MapBy::package, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0", "8", "1", "9", "2"}));
}

TEST(CpuPlacement, BindToNumaOrPackageGivesTheWholeObjectOfTheCore) {
  HostPlacement numa = place_on_host(kBig, ranks_up_to(3), MapBy::core, BindTo::numa);
  EXPECT_EQ(cpus_of(numa), (Strings{"0-3", "0-3", "0-3"}));
  EXPECT_EQ(numa.ranks[0].report,
            "MCW rank 0 bound to socket 0[core 0[hwt 0]], socket 0[core 1[hwt 0]], socket 0[core "
            "2[hwt 0]], socket 0[core 3[hwt 0]]: [B/B/B/B/./././.][./././././././.]");
  EXPECT_EQ(cpus_of(place_on_host(kBig, ranks_up_to(4), MapBy::numa, BindTo::numa)),
            (Strings{"0-3", "4-7", "8-11", "12-15"}));
  EXPECT_EQ(cpus_of(place_on_host(kBig, ranks_up_to(3), MapBy::numa, BindTo::package)),
            (Strings{"0-7", "0-7", "8-15"}));
  HostPlacement package = place_on_host(kBig, ranks_up_to(2), MapBy::package, BindTo::package);
  EXPECT_EQ(cpus_of(package), (Strings{"0-7", "8-15"}));
  EXPECT_TRUE(package.ranks[1].report.starts_with(
      "MCW rank 1 bound to socket 1[core 8[hwt 0]], socket 1[core 9[hwt 0]], "))
      << package.ranks[1].report;
  EXPECT_TRUE(package.ranks[1].report.ends_with(": [./././././././.][B/B/B/B/B/B/B/B]"))
      << package.ranks[1].report;
}

TEST(CpuPlacement, MoreRanksThanCoresGoRoundAgain) {
  // This test machine's shape: one package, one NUMA node, two cores.
  HostTopology two = machine(1, 1, 2);
  HostPlacement p = place_on_host(two, ranks_up_to(3), MapBy::core, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0", "1", "0"}));
  EXPECT_EQ(p.ranks[0].report, "MCW rank 0 bound to socket 0[core 0[hwt 0]]: [B/.]");
  EXPECT_EQ(p.ranks[1].report, "MCW rank 1 bound to socket 0[core 1[hwt 0]]: [./B]");
  EXPECT_EQ(p.ranks[2].report, "MCW rank 2 bound to socket 0[core 0[hwt 0]]: [B/.]");
  // Every core is taken once before any twice, also by NUMA node.
  EXPECT_EQ(cpus_of(place_on_host(kBig, ranks_up_to(18), MapBy::numa, BindTo::core)),
            (Strings{"0", "4", "8", "12", "1", "5", "9", "13", "2", "6", "10", "14", "3", "7", "11",
                     "15", "0", "4"}));
}

TEST(CpuPlacement, ABindingToEveryCpuIsReportedAsNotBound) {
  // As Open MPI does: a rank that may run everywhere is not bound, though
  // collrun set its mask (to what it had anyway).
  HostTopology one = machine(1, 1, 1);
  HostPlacement p = place_on_host(one, ranks_up_to(3), MapBy::core, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0", "0", "0"}));
  EXPECT_EQ(p.ranks[1].report, "MCW rank 1 is not bound (or bound to all available processors)");
  EXPECT_EQ(place_on_host(machine(1, 1, 2), {0}, MapBy::core, BindTo::package).ranks[0].report,
            "MCW rank 0 is not bound (or bound to all available processors)");
}

TEST(CpuPlacement, BindToNoneBindsNothing) {
  HostPlacement p = place_on_host(kBig, {4, 7}, MapBy::numa, BindTo::none);
  EXPECT_EQ(cpus_of(p), (Strings{"-", "-"}));
  EXPECT_EQ(p.ranks[0].rank, 4);
  EXPECT_EQ(p.ranks[1].report, "MCW rank 7 is not bound (or bound to all available processors)");
}

TEST(CpuPlacement, RanksKeepTheirNumbersInTheJob) {
  // --map-by node across hosts: this host runs ranks 1, 3 and 5.
  HostPlacement p = place_on_host(machine(1, 1, 2), {1, 3, 5}, MapBy::node, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0", "1", "0"}));
  EXPECT_EQ(p.ranks[2].rank, 5);
  EXPECT_EQ(p.ranks[2].report, "MCW rank 5 bound to socket 0[core 0[hwt 0]]: [B/.]");
}

TEST(CpuPlacement, HardwareThreadsOfACore) {
  // Two cores of two threads, numbered as Linux numbers Intel's: the first
  // thread of every core, then the second.
  HostTopology ht;
  ht.cores = {cpus({0, 2}), cpus({1, 3})};
  ht.numa_nodes = {cpus({0, 1, 2, 3})};
  ht.packages = ht.numa_nodes;
  HostPlacement p = place_on_host(ht, ranks_up_to(2), MapBy::core, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0,2", "1,3"}));
  EXPECT_EQ(p.ranks[0].report, "MCW rank 0 bound to socket 0[core 0[hwt 0-1]]: [BB/..]");
  EXPECT_EQ(p.ranks[1].report, "MCW rank 1 bound to socket 0[core 1[hwt 0-1]]: [../BB]");
}

TEST(CpuPlacement, NoNumaOrPackageInfoMakesTheMachineOneAndSaysSoOnce) {
  HostTopology flat;
  flat.cores = {cpus({0}), cpus({1}), cpus({2})};
  flat.without_hwloc = "collrun is built without hwloc";
  HostPlacement p = place_on_host(flat, ranks_up_to(4), MapBy::numa, BindTo::numa);
  EXPECT_EQ(cpus_of(p), (Strings{"0-2", "0-2", "0-2", "0-2"}));
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0],
            "no NUMA node known on this host (collrun is built without hwloc): the whole "
            "machine counts as one NUMA node");
  EXPECT_EQ(p.ranks[0].report, "MCW rank 0 is not bound (or bound to all available processors)");

  HostPlacement by_package = place_on_host(flat, ranks_up_to(2), MapBy::package, BindTo::core);
  EXPECT_EQ(cpus_of(by_package), (Strings{"0", "1"}));
  EXPECT_EQ(by_package.ranks[1].report, "MCW rank 1 bound to socket 0[core 1[hwt 0]]: [./B/.]");
  ASSERT_EQ(by_package.notes.size(), 1u);
  EXPECT_NE(by_package.notes[0].find(
                "no package known on this host (collrun is built without hwloc): the "
                "whole machine counts as one package"),
            std::string::npos)
      << by_package.notes[0];

  flat.without_hwloc.clear();  // hwloc read the host and found none
  HostPlacement hwloc = place_on_host(flat, ranks_up_to(1), MapBy::core, BindTo::numa);
  ASSERT_EQ(hwloc.notes.size(), 1u);
  EXPECT_EQ(hwloc.notes[0],
            "hwloc shows no NUMA node on this host: the whole machine counts as one NUMA node");
  // What the options do not name is not noted.
  EXPECT_TRUE(place_on_host(flat, ranks_up_to(2), MapBy::core, BindTo::core).notes.empty());
}

TEST(CpuPlacement, UnevenAndOddTopologiesAreHandled) {
  HostTopology odd;
  odd.cores = {cpus({0}), cpus({1}), cpus({2}), cpus({3}), cpus({4})};
  // A NUMA node of three cores, one of one, one without CPUs collrun may
  // use (left out), and core 4 in none (a contradiction: a group of its own).
  odd.numa_nodes = {cpus({0, 1, 2}), cpus({}), cpus({3})};
  HostPlacement p = place_on_host(odd, ranks_up_to(6), MapBy::numa, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"0", "3", "4", "1", "2", "0"}));
  EXPECT_EQ(cpus_of(place_on_host(odd, ranks_up_to(3), MapBy::numa, BindTo::numa)),
            (Strings{"0-2", "3", "4"}));
}

TEST(CpuPlacement, NoCoresBindsNothingAndNeverFails) {
  HostPlacement p = place_on_host(HostTopology{}, ranks_up_to(2), MapBy::numa, BindTo::core);
  EXPECT_EQ(cpus_of(p), (Strings{"-", "-"}));
  EXPECT_TRUE(p.notes.empty());  // collrun says why there are no cores
  EXPECT_TRUE(place_on_host(kBig, {}, MapBy::core, BindTo::core).ranks.empty());
}

}  // namespace
}  // namespace collrun
