// Which host a rank runs on, for choosing a transport per peer pair: ranks
// with the same identity share a kernel (and /dev/shm), so shared memory
// joins them; any other pair needs the network.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace coll {

class Bootstrap;

// hostname + "/" + the kernel's boot_id (two machines cloned from one image
// may share a hostname, never a boot_id). COLL_HOST_ID, when set, replaces
// it: tests pretend that ranks of one machine run on several hosts, and a
// job whose ranks share a kernel but not /dev/shm (containers) can say so.
std::string host_identity();

// What one bootstrap round tells about the hosts: every rank's
// host_identity() (indexed by rank), and for this rank's host how many ranks
// share it and how many CPUs they may run on together (the union of their
// affinity masks: under a launcher that binds each rank to its own core a
// rank sees one CPU, so its own mask alone would call the host
// oversubscribed). One allgather, so every rank must call it at the same
// point of setup. any_host_oversubscribed is the same on every rank: some
// host's ranks outnumber the CPUs they may run on together.
// shm_bytes_per_rank is the same on every rank too: on each host the
// smallest /dev/shm space available that its ranks saw, divided by its
// ranks; the minimum over hosts (0 where /dev/shm could not be read). The
// window slots are sized by it (slot_sizing.hpp). shm_host_bytes and
// shm_host_ranks are that host's figures (its /dev/shm available, its
// ranks), for messages.
struct HostMap {
  std::vector<std::string> hosts;
  int local_ranks = 1;
  int local_cpus = 1;
  bool any_host_oversubscribed = false;
  size_t shm_bytes_per_rank = 0;
  size_t shm_host_bytes = 0;
  int shm_host_ranks = 1;
};
HostMap gather_host_map(Bootstrap& boot, double timeout_s);

// /dev/shm's size and what it has available now, in bytes (statvfs);
// false where it cannot be read. For messages: sizing decisions use the
// host exchange's figures, which every rank shares.
bool dev_shm_space(uint64_t* total, uint64_t* available);

}  // namespace coll
