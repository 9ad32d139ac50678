#include "slot_sizing.hpp"

#include <algorithm>
#include <cstdint>

#include "error.hpp"

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

size_t window_slot_bytes(size_t slot_bytes, int num_slots, int nranks) {
  const size_t peers = size_t(std::max(0, nranks - 1)), slots = size_t(std::max(0, num_slots));
  if (peers == 0 || slots == 0 || slot_bytes == 0) return 0;
  if (slot_bytes > SIZE_MAX / slots / peers) return SIZE_MAX;
  return slot_bytes * slots * peers;
}

// Where /dev/shm is small (a container's: Docker gives 64 MiB), the
// configured slots of a large job do not fit it: np 16 there, 16 windows of
// 15 writers x 4 slots x 128 KiB, is 120 MiB once an alltoall has every
// peer write, and an alltoall of 256 KiB per peer failed on several ranks
// with COLL_ERR_NO_RESOURCES (issue 33). So the slots are cut until one
// window's, at full commit, fit half the rank's share of /dev/shm (the
// bound the growth above keeps too): smaller first, keeping the pipeline's
// depth (np 16 in 64 MiB: 4 x 32 KiB, 30 MiB for the host's world
// windows), then fewer. Messages larger than a slot travel in slot-sized
// chunks, so smaller slots cost calls per byte, never correctness.
SlotChoice choose_slots(const SlotInputs& in) {
  SlotChoice c;
  c.slot_bytes = in.slot_bytes;
  c.num_slots = in.num_slots;
  if (in.oversubscribed && !in.slot_bytes_set) {
    c.slot_bytes =
        slots_when_oversubscribed(in.slot_bytes, in.num_slots, in.nranks, in.shm_bytes_per_rank);
    if (c.slot_bytes != in.slot_bytes) c.why = SlotChoice::Why::kGrown;
  }
  c.window_slot_bytes = window_slot_bytes(c.slot_bytes, c.num_slots, in.nranks);
  if (!in.windows_in_shm || in.shm_bytes_per_rank == 0 || in.nranks <= 1) return c;
  c.budget = in.shm_bytes_per_rank / 2;
  if (c.window_slot_bytes <= c.budget) return c;

  const size_t peers = size_t(in.nranks - 1);
  int counts[2] = {in.num_slots, in.num_slots};
  if (!in.num_slots_set && in.num_slots > kMinSlots) counts[1] = kMinSlots;
  for (int count : counts) {
    if (count < 1) continue;
    size_t size = in.slot_bytes;
    if (!in.slot_bytes_set) {
      size = c.budget / size_t(count) / peers / kMinSlotBytes * kMinSlotBytes;
      size = std::min(size, in.slot_bytes);
      if (size < std::min(kMinSlotBytes, in.slot_bytes)) continue;
    }
    if (window_slot_bytes(size, count, in.nranks) > c.budget) continue;
    c.slot_bytes = size;
    c.num_slots = count;
    c.why = SlotChoice::Why::kShrunk;
    c.window_slot_bytes = window_slot_bytes(size, count, in.nranks);
    return c;
  }
  c.slot_bytes = in.slot_bytes_set ? in.slot_bytes : std::min(in.slot_bytes, kMinSlotBytes);
  c.num_slots = in.num_slots_set ? in.num_slots : std::min(in.num_slots, kMinSlots);
  c.why = SlotChoice::Why::kTooSmall;
  c.window_slot_bytes = window_slot_bytes(c.slot_bytes, c.num_slots, in.nranks);
  return c;
}

std::string describe_slot_choice(const SlotInputs& in, const SlotChoice& c, size_t shm_host_bytes,
                                 int shm_host_ranks) {
  std::string line = strfmt("slots %d x %zu B", c.num_slots, c.slot_bytes);
  const std::string shm = strfmt(
      "/dev/shm has %zu B available for %d ranks on the tightest host, %zu B a rank, of which "
      "one window's slots may take half, %zu B",
      shm_host_bytes, shm_host_ranks, in.shm_bytes_per_rank, c.budget);
  const std::string full = strfmt("%d x %zu B x %d writers = %zu B", c.num_slots, c.slot_bytes,
                                  std::max(0, in.nranks - 1), c.window_slot_bytes);
  switch (c.why) {
    case SlotChoice::Why::kConfigured:
      line += in.slot_bytes_set || in.num_slots_set ? " (COLL_SLOT_SIZE / COLL_NUM_SLOTS)"
                                                    : " (the default)";
      if (c.budget != 0) line += strfmt(", within /dev/shm's %zu B a rank", in.shm_bytes_per_rank);
      break;
    case SlotChoice::Why::kGrown:
      line += strfmt(" (grown from %zu B: ranks outnumber the CPUs of a host; a window's slots "
                     "%s within 16 MiB and half of /dev/shm's %zu B a rank)",
                     in.slot_bytes, full.c_str(), in.shm_bytes_per_rank);
      break;
    case SlotChoice::Why::kShrunk:
      line += strfmt(" (cut from %d x %zu B to fit /dev/shm: %s; a window's slots now %s)",
                     in.num_slots, in.slot_bytes, shm.c_str(), full.c_str());
      break;
    case SlotChoice::Why::kTooSmall:
      line += strfmt(" (%s, and still over /dev/shm: %s; a window's slots take up to %s: a large "
                     "call may fail with COLL_ERR_NO_RESOURCES; a larger /dev/shm (docker run "
                     "--shm-size) or fewer ranks a host)",
                     in.slot_bytes_set || in.num_slots_set
                         ? "as COLL_SLOT_SIZE / COLL_NUM_SLOTS say"
                         : "the least libcoll cuts to",
                     shm.c_str(), full.c_str());
      break;
  }
  return line;
}

}  // namespace coll
