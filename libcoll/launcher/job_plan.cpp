#include "job_plan.hpp"

#include <algorithm>

#include "host_list.hpp"
#include "rank_placement.hpp"

namespace collrun {

bool JobPlan::any_remote() const {
  return std::any_of(hosts.begin(), hosts.end(), [](const PlannedHost& h) { return !h.local; });
}

JobPlan plan_job(const LaunchOptions& options, const ThisHostFacts& facts) {
  JobPlan plan;
  if (options.host_list.empty() && !options.hostfile) {
    plan.num_ranks = options.num_ranks;
    plan.hosts.push_back(PlannedHost{"localhost", true, options.num_ranks});
    plan.host_of_rank.assign(size_t(options.num_ranks), 0);
    for (int rank = 0; rank < options.num_ranks; ++rank) plan.local_rank.push_back(rank);
    return plan;
  }

  std::vector<HostSlots> hosts =
      options.hostfile ? load_hostfile(*options.hostfile) : parse_host_list(options.host_list);
  plan.hosts_given = true;
  plan.num_ranks = options.num_ranks > 0 ? options.num_ranks : total_slots(hosts);
  if (plan.num_ranks > kMaxRanks)
    throw UsageError("the hosts have " + std::to_string(plan.num_ranks) +
                     " slots: collrun starts at most " + std::to_string(kMaxRanks) +
                     " ranks (give -np)");
  RankPlacement placement =
      place_ranks(hosts, plan.num_ranks, options.oversubscribe, options.map_by);

  // Hosts without ranks take no part; the others keep their order.
  std::vector<int> planned_index(hosts.size(), -1);
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (placement.ranks_on_host[h] == 0) continue;
    planned_index[h] = static_cast<int>(plan.hosts.size());
    plan.hosts.push_back(PlannedHost{hosts[h].name, is_local_host(hosts[h].name, facts),
                                     placement.ranks_on_host[h]});
  }
  for (int host : placement.host_of_rank) plan.host_of_rank.push_back(planned_index[size_t(host)]);
  plan.local_rank = placement.local_rank;
  return plan;
}

}  // namespace collrun
