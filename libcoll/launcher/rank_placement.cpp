#include "rank_placement.hpp"

#include <algorithm>
#include <climits>
#include <string>

namespace collrun {
namespace {

UsageError more_ranks_than_slots(int num_ranks, int slots) {
  return UsageError("-np " + std::to_string(num_ranks) + " is more than the " +
                    std::to_string(slots) + " slot" + (slots == 1 ? "" : "s") +
                    " of the hosts given (add --oversubscribe to start more ranks than slots)");
}

UsageError more_ranks_than_max_slots(int num_ranks, int placed) {
  return UsageError("-np " + std::to_string(num_ranks) + ": the hosts' max_slots allow at most " +
                    std::to_string(placed) + " ranks, even with --oversubscribe");
}

// By slot: how many ranks each host takes; its ranks are consecutive.
RankPlacement place_by_slot(const std::vector<HostSlots>& hosts, int num_ranks,
                            bool oversubscribe) {
  std::vector<int> count(hosts.size(), 0);
  int left = num_ranks;
  for (size_t h = 0; h < hosts.size() && left > 0; ++h) {
    count[h] = std::min(hosts[h].slots, left);
    left -= count[h];
  }
  if (left > 0 && !oversubscribe) throw more_ranks_than_slots(num_ranks, total_slots(hosts));
  while (left > 0) {
    int placed_this_round = 0;
    for (size_t h = 0; h < hosts.size() && left > 0; ++h) {
      int room = hosts[h].max_slots ? *hosts[h].max_slots - count[h] : hosts[h].slots;
      int more = std::clamp(std::min(room, hosts[h].slots), 0, left);
      count[h] += more;
      left -= more;
      placed_this_round += more;
    }
    if (placed_this_round == 0) throw more_ranks_than_max_slots(num_ranks, num_ranks - left);
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

// By node: one rank a host in turn, first up to each host's slots, then
// (oversubscribed) up to its max_slots.
RankPlacement place_by_node(const std::vector<HostSlots>& hosts, int num_ranks,
                            bool oversubscribe) {
  RankPlacement placement;
  placement.ranks_on_host.assign(hosts.size(), 0);
  int left = num_ranks;
  for (bool past_slots : {false, true}) {
    if (past_slots && left > 0 && !oversubscribe)
      throw more_ranks_than_slots(num_ranks, total_slots(hosts));
    for (int placed_this_round = 1; left > 0 && placed_this_round > 0;) {
      placed_this_round = 0;
      for (size_t h = 0; h < hosts.size() && left > 0; ++h) {
        int limit = !past_slots ? hosts[h].slots : hosts[h].max_slots.value_or(INT_MAX);
        int& count = placement.ranks_on_host[h];
        if (count >= limit) continue;
        placement.host_of_rank.push_back(static_cast<int>(h));
        placement.local_rank.push_back(count++);
        --left;
        ++placed_this_round;
      }
    }
  }
  if (left > 0) throw more_ranks_than_max_slots(num_ranks, num_ranks - left);
  return placement;
}

}  // namespace

int total_slots(const std::vector<HostSlots>& hosts) {
  long long total = 0;
  for (const HostSlots& host : hosts) total += host.slots;
  return static_cast<int>(std::min<long long>(total, INT_MAX));
}

RankPlacement place_ranks(const std::vector<HostSlots>& hosts, int num_ranks, bool oversubscribe,
                          MapBy map_by) {
  if (hosts.empty()) throw UsageError("no hosts to place ranks on");
  return map_by == MapBy::node ? place_by_node(hosts, num_ranks, oversubscribe)
                               : place_by_slot(hosts, num_ranks, oversubscribe);
}

}  // namespace collrun
