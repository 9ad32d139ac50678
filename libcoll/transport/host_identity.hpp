// Which host a rank runs on, for choosing a transport per peer pair: ranks
// with the same identity share a kernel (and /dev/shm), so shared memory
// joins them; any other pair needs the network.
#pragma once

#include <string>
#include <vector>

namespace coll {

class Bootstrap;

// hostname + "/" + the kernel's boot_id (two machines cloned from one image
// may share a hostname, never a boot_id). COLL_HOST_ID, when set, replaces
// it: tests pretend that ranks of one machine run on several hosts, and a
// job whose ranks share a kernel but not /dev/shm (containers) can say so.
std::string host_identity();

// Every rank's host_identity(), indexed by rank: one bootstrap allgather,
// so every rank must call it at the same point of setup.
std::vector<std::string> gather_host_identities(Bootstrap& boot, double timeout_s);

}  // namespace coll
