#include "rank_placement.hpp"

#include <algorithm>
#include <climits>
#include <string>

#include "launch_options.hpp"

namespace collrun {

int total_slots(const std::vector<HostSlots>& hosts) {
  long long total = 0;
  for (const HostSlots& host : hosts) total += host.slots;
  return static_cast<int>(std::min<long long>(total, INT_MAX));
}

RankPlacement place_ranks(const std::vector<HostSlots>& hosts, int num_ranks, bool oversubscribe) {
  if (hosts.empty()) throw UsageError("no hosts to place ranks on");
  const int slots = total_slots(hosts);
  std::vector<int> count(hosts.size(), 0);
  int left = num_ranks;
  for (size_t h = 0; h < hosts.size() && left > 0; ++h) {
    count[h] = std::min(hosts[h].slots, left);
    left -= count[h];
  }
  if (left > 0 && !oversubscribe)
    throw UsageError("-np " + std::to_string(num_ranks) + " is more than the " +
                     std::to_string(slots) + " slot" + (slots == 1 ? "" : "s") +
                     " of the hosts given (add --oversubscribe to start more ranks than slots)");
  while (left > 0) {
    int placed_this_round = 0;
    for (size_t h = 0; h < hosts.size() && left > 0; ++h) {
      int room = hosts[h].max_slots ? *hosts[h].max_slots - count[h] : hosts[h].slots;
      int more = std::clamp(std::min(room, hosts[h].slots), 0, left);
      count[h] += more;
      left -= more;
      placed_this_round += more;
    }
    if (placed_this_round == 0)
      throw UsageError("-np " + std::to_string(num_ranks) +
                       ": the hosts' max_slots allow at most " + std::to_string(num_ranks - left) +
                       " ranks, even with --oversubscribe");
  }

  RankPlacement placement;
  placement.ranks_on_host = count;
  placement.host_of_rank.reserve(static_cast<size_t>(num_ranks));
  placement.local_rank.reserve(static_cast<size_t>(num_ranks));
  for (size_t h = 0; h < hosts.size(); ++h)
    for (int local = 0; local < count[h]; ++local) {
      placement.host_of_rank.push_back(static_cast<int>(h));
      placement.local_rank.push_back(local);
    }
  return placement;
}

}  // namespace collrun
