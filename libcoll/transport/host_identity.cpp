#include "transport/host_identity.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fstream>
#include <map>
#include <utility>

#include "bootstrap/bootstrap.hpp"
#include "env.hpp"
#include "error.hpp"

namespace coll {

std::string host_identity() {
  std::string forced = env_string("COLL_HOST_ID");
  if (!forced.empty()) return forced;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string id = host;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  if (boot >> boot_id) id += "/" + boot_id;
  return id;
}

HostMap gather_host_map(Bootstrap& boot, double timeout_s) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine);
  const std::string me = host_identity();
  std::string record(reinterpret_cast<const char*>(&mine), sizeof mine);
  record += me;
  const std::vector<std::string> all = boot.allgather(record, timeout_s);
  HostMap map;
  // Per host: its ranks, and the union of their CPUs.
  std::map<std::string, std::pair<int, cpu_set_t>> per_host;
  for (const std::string& r : all) {
    if (r.size() < sizeof(cpu_set_t))
      fail(COLL_ERR_INTERNAL, "host exchange: a record of %zu bytes", r.size());
    map.hosts.push_back(r.substr(sizeof(cpu_set_t)));
    cpu_set_t theirs;
    std::memcpy(&theirs, r.data(), sizeof theirs);
    auto [it, added] = per_host.try_emplace(map.hosts.back());
    if (added) CPU_ZERO(&it->second.second);
    CPU_OR(&it->second.second, &it->second.second, &theirs);
    ++it->second.first;
  }
  for (const auto& [host, ranks_cpus] : per_host) {
    const int cpus = std::max(1, CPU_COUNT(&ranks_cpus.second));
    if (ranks_cpus.first > cpus) map.any_host_oversubscribed = true;
    if (host != me) continue;
    map.local_ranks = ranks_cpus.first;
    map.local_cpus = cpus;
  }
  return map;
}

}  // namespace coll
