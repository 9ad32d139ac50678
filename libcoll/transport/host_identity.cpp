#include "transport/host_identity.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fstream>

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
  map.local_ranks = 0;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (const std::string& r : all) {
    if (r.size() < sizeof(cpu_set_t))
      fail(COLL_ERR_INTERNAL, "host exchange: a record of %zu bytes", r.size());
    map.hosts.push_back(r.substr(sizeof(cpu_set_t)));
    if (map.hosts.back() != me) continue;
    cpu_set_t theirs;
    std::memcpy(&theirs, r.data(), sizeof theirs);
    CPU_OR(&cpus, &cpus, &theirs);
    ++map.local_ranks;
  }
  map.local_cpus = std::max(1, CPU_COUNT(&cpus));
  return map;
}

}  // namespace coll
