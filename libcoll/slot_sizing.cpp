#include "slot_sizing.hpp"

#include <algorithm>

namespace coll {

// Where some host's ranks outnumber its CPUs, a wait for a peer is a
// context switch (the peer must be scheduled to write or read), and a call
// costs about one per slot-sized chunk a hop moves. Larger slots there,
// measured at np 4 on 2 CPUs, OSU-style average, libcoll / Open MPI tuned
// in the same run, 3 runs (bench/knob_ab.sh):
// beside one busy process, 2-4 MiB allreduce 1.4-2.8 -> 0.59-0.97 and bcast
// 1.5-3.4 -> 0.50-1.04 with 512 KiB slots (1 MiB: 0.42-0.71, but quiet bcast
// 1-2 MiB then lost its pipeline, 0.99-1.36 -> 0.94-1.43); quiet, 512 KiB
// was within the runs' spread everywhere but bcast 4 MiB (0.69-0.74 ->
// 0.90-0.96). Ranks that fit their cores keep the default: at np 2 beside a
// busy process (not oversubscribed) 1 MiB slots lost (bcast 1 MiB up to
// 4.6x).
//
// The slots are doubled from the configured size up to 512 KiB while a
// writer's slots at every peer, num_slots x (nranks - 1) x slot, stay
// within a budget: the window commits slots of only the peers that write
// into it, but an alltoall has every peer write, so that product is what a
// rank's window may hold in /dev/shm. The budget is 16 MiB (np 4-8 get
// 512 KiB, np 16 256 KiB, np 32 and more the default) and at most half of
// the rank's share of /dev/shm, the other half left to the job's other
// communicators and the user: a container's 64 MiB /dev/shm holding an
// np 8 job failed an alltoall of 4 MiB with NO_RESOURCES when 512 KiB slots
// committed 112 MiB where 128 KiB ones committed 28.
size_t slots_when_oversubscribed(size_t configured, int num_slots, int nranks,
                                 size_t shm_bytes_per_rank) {
  constexpr size_t kMaxSlot = 512 * 1024, kBudget = size_t{16} << 20;
  const size_t peers = size_t(std::max(1, nranks - 1));
  const size_t writers_slots = size_t(std::max(1, num_slots)) * peers;
  const size_t budget = std::min(kBudget, shm_bytes_per_rank / 2);
  const size_t cap = std::min(kMaxSlot, budget / writers_slots);
  size_t slot = configured;
  if (slot == 0) return slot;
  while (slot <= cap / 2) slot *= 2;
  return slot;
}

}  // namespace coll
