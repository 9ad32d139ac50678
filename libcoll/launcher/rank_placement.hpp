// Which host each rank runs on, as Open MPI maps ranks to hosts. By slot
// (the default, and --map-by core, numa or package, which place ranks
// within a host): the first host's slots take ranks 0, 1, ..., then the
// next host's, so the ranks of one host are consecutive. --map-by node:
// rank 0 on the first host, rank 1 on the second, ..., round-robin.
#pragma once

#include <vector>

#include "host_list.hpp"
#include "launch_options.hpp"

namespace collrun {

struct RankPlacement {
  std::vector<int> host_of_rank;   // index into the hosts
  std::vector<int> local_rank;     // the rank's index among its host's ranks
  std::vector<int> ranks_on_host;  // how many ranks each host runs
};

// Fewer ranks than slots leave the last slots empty (and hosts without a
// rank take no part). More ranks than slots are a UsageError unless
// `oversubscribe`: then the extra ranks go round the slot list again (a
// host of 2 slots takes 2 more each round), never beyond a host's
// max_slots. By node, a host whose slots are taken is skipped, and past
// all slots (--oversubscribe) the round goes on over the hosts below their
// max_slots.
RankPlacement place_ranks(const std::vector<HostSlots>& hosts, int num_ranks, bool oversubscribe,
                          MapBy map_by = MapBy::slot);

// The sum of the hosts' slots (each at most kMaxRanks, so no overflow for
// any realistic list; saturates at INT_MAX).
int total_slots(const std::vector<HostSlots>& hosts);

}  // namespace collrun
