// How large a window's slots are, and how many a writer has. A pure
// function of numbers every rank agrees on (the configuration and the host
// exchange), so every rank chooses the same and the windows match; kept
// apart from Context so that a unit test pins the rule.
#pragma once

#include <cstddef>
#include <string>

namespace coll {

// configured: the slot size without growth (COLL_SLOT_SIZE unset: the
// default). num_slots: slots per writer. nranks: the world's ranks.
// shm_bytes_per_rank: the smallest share of /dev/shm a rank of the job has
// (HostMap::shm_bytes_per_rank: on each host what /dev/shm has available
// divided among that host's ranks; the minimum over hosts). The result is
// never below configured.
size_t slots_when_oversubscribed(size_t configured, int num_slots, int nranks,
                                 size_t shm_bytes_per_rank);

// The least a window is cut to where /dev/shm is small: three slots per
// writer (a ring runs up to two messages ahead of what it received, and the
// barriers' and rings' deadlock-freedom rests on it: env.cpp, algorithms/
// ring_*.cpp, barrier.cpp) of one page each.
inline constexpr int kMinSlots = 3;
inline constexpr size_t kMinSlotBytes = 4096;

struct SlotInputs {
  size_t slot_bytes = 0;        // configured: COLL_SLOT_SIZE or the default
  int num_slots = 0;            // configured: COLL_NUM_SLOTS or the default
  bool slot_bytes_set = false;  // the user set COLL_SLOT_SIZE: kept as it is
  bool num_slots_set = false;   // the user set COLL_NUM_SLOTS: kept as it is
  int nranks = 1;               // the world's ranks
  bool oversubscribed = false;  // HostMap::any_host_oversubscribed
  // The windows live in /dev/shm (shm, shm+tcp, shm+rdma); tcp's and rdma's
  // are anonymous memory, and /dev/shm bounds nothing there.
  bool windows_in_shm = true;
  size_t shm_bytes_per_rank = 0;  // HostMap::shm_bytes_per_rank; 0: unknown
};

struct SlotChoice {
  enum class Why {
    kConfigured,  // as configured (the default where /dev/shm is roomy)
    kGrown,       // grown where ranks outnumber CPUs (slots_when_oversubscribed)
    kShrunk,      // smaller or fewer, so that a window's slots fit the budget
    kTooSmall,    // the least (or the user's fixed choice) and still over the budget
  };
  size_t slot_bytes = 0;
  int num_slots = 0;
  Why why = Why::kConfigured;
  // The bytes of /dev/shm that one rank's window may commit for its slots:
  // half of the rank's share (the other half left to the job's other
  // communicators and the user); 0 where nothing bounds it.
  size_t budget = 0;
  // What one rank's window commits for its slots when every peer writes
  // into it (an alltoall): num_slots x slot_bytes x (nranks - 1).
  size_t window_slot_bytes = 0;
};

// num_slots x slot_bytes x (nranks - 1), saturating.
size_t window_slot_bytes(size_t slot_bytes, int num_slots, int nranks);

// The slots of every window of the job:
//  1. where some host is oversubscribed and COLL_SLOT_SIZE is unset, grown
//     as slots_when_oversubscribed says (within half the share);
//  2. where the windows live in /dev/shm and a window's slots at full
//     commit, window_slot_bytes, exceed half the rank's share of it: first
//     smaller slots (the largest multiple of 4 KiB that fits, at least
//     kMinSlotBytes) at the configured count, then kMinSlots slots of the
//     largest size that fits; a knob the user set is never changed. If even
//     the least does not fit: the least (kTooSmall); a large message may
//     then fail with COLL_ERR_NO_RESOURCES, as any would.
// Where /dev/shm is roomy (budget >= window_slot_bytes of the configured
// slots) the choice is the configured one or the grown one, as before.
SlotChoice choose_slots(const SlotInputs& in);

// One line for COLL_DEBUG: the choice and, where /dev/shm decided it, the
// figures (shm_host_bytes and shm_host_ranks: the tightest host's /dev/shm
// available and its ranks, HostMap).
std::string describe_slot_choice(const SlotInputs& in, const SlotChoice& c, size_t shm_host_bytes,
                                 int shm_host_ranks);

}  // namespace coll
