#include "transport/host_identity.hpp"

#include <unistd.h>

#include <fstream>

#include "bootstrap/bootstrap.hpp"
#include "env.hpp"

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

std::vector<std::string> gather_host_identities(Bootstrap& boot, double timeout_s) {
  return boot.allgather(host_identity(), timeout_s);
}

}  // namespace coll
