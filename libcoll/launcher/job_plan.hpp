// Where each rank of a job runs: the hosts of -H or --hostfile, slots
// filled in order or round-robin (rank_placement.hpp), and which of those
// hosts is this machine (this_host.hpp).
#pragma once

#include <string>
#include <vector>

#include "launch_options.hpp"
#include "this_host.hpp"

namespace collrun {

struct PlannedHost {
  std::string name;   // as given; the ranks' COLL_HOST_ID
  bool local = true;  // forked here, not started through the launch agent
  int ranks = 0;
};

struct JobPlan {
  int num_ranks = 0;
  // -H or --hostfile was given: every rank gets COLL_HOST_ID=<its host>.
  bool hosts_given = false;
  std::vector<PlannedHost> hosts;  // the hosts that run at least one rank
  std::vector<int> host_of_rank;   // index into hosts
  std::vector<int> local_rank;     // index among the ranks of its host

  bool any_remote() const;
  const PlannedHost& host_of(int rank) const { return hosts[size_t(host_of_rank[size_t(rank)])]; }
};

// Without hosts: every rank on this host. Throws UsageError (a hostfile
// that cannot be read or parsed, too many ranks for the slots).
JobPlan plan_job(const LaunchOptions& options, const ThisHostFacts& facts);

}  // namespace collrun
