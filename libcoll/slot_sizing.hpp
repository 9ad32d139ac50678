// How large a window's slots are where some host's ranks outnumber its
// CPUs. A pure function of numbers every rank agrees on (the host
// exchange), so every rank chooses the same and the windows match; kept
// apart from Context so that a unit test pins the rule.
#pragma once

#include <cstddef>

namespace coll {

// configured: the slot size without growth (COLL_SLOT_SIZE unset: the
// default). num_slots: slots per writer. nranks: the world's ranks.
// shm_bytes_per_rank: the smallest share of /dev/shm a rank of the job has
// (HostMap::shm_bytes_per_rank: on each host what /dev/shm has available
// divided among that host's ranks; the minimum over hosts). The result is
// never below configured.
size_t slots_when_oversubscribed(size_t configured, int num_slots, int nranks,
                                 size_t shm_bytes_per_rank);

}  // namespace coll
