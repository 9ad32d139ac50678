#include "transport/host_identity.hpp"

#include <sched.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
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

namespace {

// What one rank tells the others, ahead of its host_identity().
struct HostRecord {
  cpu_set_t cpus;
  uint64_t shm_available;  // bytes /dev/shm has available to this rank now
};

uint64_t shm_available() {
  uint64_t total = 0, available = 0;
  return dev_shm_space(&total, &available) ? available : 0;
}

}  // namespace

bool dev_shm_space(uint64_t* total, uint64_t* available) {
  struct statvfs st {};
  if (statvfs("/dev/shm", &st) != 0) return false;
  *total = uint64_t(st.f_blocks) * uint64_t(st.f_frsize);
  *available = uint64_t(st.f_bavail) * uint64_t(st.f_frsize);
  return true;
}

HostMap gather_host_map(Bootstrap& boot, double timeout_s) {
  HostRecord mine{};
  CPU_ZERO(&mine.cpus);
  if (sched_getaffinity(0, sizeof mine.cpus, &mine.cpus) != 0) CPU_SET(0, &mine.cpus);
  mine.shm_available = shm_available();
  const std::string me = host_identity();
  std::string record(reinterpret_cast<const char*>(&mine), sizeof mine);
  record += me;
  const std::vector<std::string> all = boot.allgather(record, timeout_s);
  HostMap map;
  // Per host: its ranks, the union of their CPUs, the least /dev/shm seen.
  struct PerHost {
    int ranks = 0;
    cpu_set_t cpus;
    uint64_t shm = UINT64_MAX;
  };
  std::map<std::string, PerHost> per_host;
  for (const std::string& r : all) {
    if (r.size() < sizeof(HostRecord))
      fail(COLL_ERR_INTERNAL, "host exchange: a record of %zu bytes", r.size());
    map.hosts.push_back(r.substr(sizeof(HostRecord)));
    HostRecord theirs;
    std::memcpy(&theirs, r.data(), sizeof theirs);
    auto [it, added] = per_host.try_emplace(map.hosts.back());
    PerHost& h = it->second;
    if (added) CPU_ZERO(&h.cpus);
    CPU_OR(&h.cpus, &h.cpus, &theirs.cpus);
    h.shm = std::min(h.shm, theirs.shm_available);
    ++h.ranks;
  }
  uint64_t shm_per_rank = UINT64_MAX;
  for (const auto& [host, h] : per_host) {
    const int cpus = std::max(1, CPU_COUNT(&h.cpus));
    if (h.ranks > cpus) map.any_host_oversubscribed = true;
    if (h.shm / uint64_t(h.ranks) < shm_per_rank) {
      shm_per_rank = h.shm / uint64_t(h.ranks);
      map.shm_host_bytes = size_t(std::min<uint64_t>(h.shm, SIZE_MAX));
      map.shm_host_ranks = h.ranks;
    }
    if (host != me) continue;
    map.local_ranks = h.ranks;
    map.local_cpus = cpus;
  }
  map.shm_bytes_per_rank = size_t(std::min<uint64_t>(shm_per_rank, SIZE_MAX));
  return map;
}

}  // namespace coll
