// The slots of the job's windows (slot_sizing.hpp): where some host is
// oversubscribed, doubled from the configured size to at most 512 KiB while
// a writer's slots at every peer, num_slots x (nranks - 1) x slot, fit
// 16 MiB and half of the rank's share of /dev/shm; where /dev/shm is too
// small for the configured slots, cut (smaller, then fewer) until a
// window's slots fit half the share, never below 3 x 4 KiB, never against
// a knob the user set.
#include "slot_sizing.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace coll {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;
constexpr size_t kPlenty = size_t{1} << 40;  // a /dev/shm that bounds nothing

TEST(SlotSizing, GrowsWhileAWritersSlotsFitSixteenMiB) {
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 2, kPlenty), 512 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 4, kPlenty), 512 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 8, kPlenty), 512 * KiB);   // 7 x 4 x 512 KiB = 14 MiB
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 9, kPlenty), 512 * KiB);   // exactly 16 MiB
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 10, kPlenty), 256 * KiB);  // 18 MiB would not fit
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 16, kPlenty), 256 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 17, kPlenty), 256 * KiB);  // exactly 16 MiB
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 18, kPlenty), 128 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 64, kPlenty), 128 * KiB);
}

TEST(SlotSizing, MoreSlotsPerWriterGrowLess) {
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 16, 4, kPlenty), 256 * KiB);  // 3 x 16 x 256 KiB = 12 MiB
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 64, 4, kPlenty), 128 * KiB);
}

TEST(SlotSizing, HalfTheShareOfDevShmBoundsTheGrowth) {
  // A container's 64 MiB /dev/shm at np 8: 8 MiB a rank, a budget of 4 MiB;
  // 7 x 4 x 128 KiB = 3.5 MiB fits, 256 KiB would not.
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 8, 8 * MiB), 128 * KiB);
  // np 4 on the same /dev/shm: 16 MiB a rank, budget 8 MiB: 3 x 4 x 512 KiB = 6 MiB.
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 4, 16 * MiB), 512 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 4, 12 * MiB), 512 * KiB);  // exactly 6 MiB
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 4, 11 * MiB), 256 * KiB);
  // Nothing known of /dev/shm (0): no growth.
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 4, 4, 0), 128 * KiB);
}

TEST(SlotSizing, NeverShrinksNorLoopsOnOddInput) {
  EXPECT_EQ(slots_when_oversubscribed(1 * MiB, 4, 4, kPlenty), 1 * MiB);  // larger than the cap stays
  EXPECT_EQ(slots_when_oversubscribed(4 * KiB, 4, 4, kPlenty), 512 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(0, 4, 4, kPlenty), 0u);
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, 0, 1, kPlenty), 512 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(128 * KiB, -3, -7, kPlenty), 512 * KiB);
  EXPECT_EQ(slots_when_oversubscribed(3000, 4, 4, kPlenty), 384000u);  // doubling keeps the multiple
}

SlotInputs inputs(int nranks, size_t shm_per_rank, bool oversubscribed = false) {
  SlotInputs in;
  in.slot_bytes = 128 * KiB;  // the defaults (env.hpp)
  in.num_slots = 4;
  in.nranks = nranks;
  in.oversubscribed = oversubscribed;
  in.shm_bytes_per_rank = shm_per_rank;
  return in;
}

using Why = SlotChoice::Why;

TEST(ChooseSlots, RoomyDevShmKeepsTheDefault) {
  for (int n : {2, 4, 16, 64, 128, 1024}) {
    const SlotChoice c = choose_slots(inputs(n, kPlenty));
    EXPECT_EQ(c.slot_bytes, 128 * KiB) << n;
    EXPECT_EQ(c.num_slots, 4) << n;
    EXPECT_EQ(c.why, Why::kConfigured) << n;
    EXPECT_EQ(c.window_slot_bytes, size_t(n - 1) * 4 * 128 * KiB) << n;
  }
  // This machine's 24 GiB /dev/shm at np 128: 192 MiB a rank, 63.5 MiB fits half.
  EXPECT_EQ(choose_slots(inputs(128, 192 * MiB)).why, Why::kConfigured);
  // Exactly half the share: still as configured.
  EXPECT_EQ(choose_slots(inputs(16, 15 * MiB)).why, Why::kConfigured);  // 15 x 4 x 128 KiB = 7.5 MiB
}

TEST(ChooseSlots, OversubscribedGrowsAsBefore) {
  for (int n : {2, 4, 8, 16, 17, 18, 64}) {
    const SlotChoice c = choose_slots(inputs(n, kPlenty, true));
    EXPECT_EQ(c.slot_bytes, slots_when_oversubscribed(128 * KiB, 4, n, kPlenty)) << n;
    EXPECT_EQ(c.num_slots, 4);
    EXPECT_EQ(c.why, c.slot_bytes == 128 * KiB ? Why::kConfigured : Why::kGrown) << n;
  }
  // The growth stays within half the share (the np 8 job in 64 MiB: no growth, fits).
  const SlotChoice c = choose_slots(inputs(8, 8 * MiB, true));
  EXPECT_EQ(c.slot_bytes, 128 * KiB);
  EXPECT_EQ(c.why, Why::kConfigured);
}

TEST(ChooseSlots, ADockerDevShmAtNp16CutsTheSlots) {
  // 64 MiB for 16 ranks: 4 MiB a rank, 2 MiB for a window's slots; 15
  // writers x 4 slots: 34952 B a slot, 32 KiB in whole pages.
  for (bool over : {false, true}) {
    const SlotChoice c = choose_slots(inputs(16, 4 * MiB, over));
    EXPECT_EQ(c.slot_bytes, 32 * KiB);
    EXPECT_EQ(c.num_slots, 4);
    EXPECT_EQ(c.why, Why::kShrunk);
    EXPECT_EQ(c.budget, 2 * MiB);
    EXPECT_EQ(c.window_slot_bytes, 15 * 4 * 32 * KiB);
    EXPECT_LE(16 * c.window_slot_bytes, 64 * MiB / 2);  // the host's world windows: half of it
  }
  // np 8 in 64 MiB fits as configured (mp_small_shm_np8).
  EXPECT_EQ(choose_slots(inputs(8, 8 * MiB)).why, Why::kConfigured);
  // np 12: 5.33 MiB a rank, 2.67 MiB / 44 = 63550 B: 60 KiB.
  EXPECT_EQ(choose_slots(inputs(12, 64 * MiB / 12)).slot_bytes, 60 * KiB);
}

TEST(ChooseSlots, SmallerFirstThenFewerThenTheLeast) {
  // 4 slots of 4 KiB at 15 writers: 240 KiB; a budget just under it takes 3 slots.
  SlotChoice c = choose_slots(inputs(16, 2 * 240 * KiB));
  EXPECT_EQ(c.slot_bytes, 4 * KiB);
  EXPECT_EQ(c.num_slots, 4);
  c = choose_slots(inputs(16, 2 * 240 * KiB - 2));
  EXPECT_EQ(c.num_slots, kMinSlots);
  EXPECT_EQ(c.slot_bytes, 4 * KiB);  // 3 x 5.3 KiB: 4 KiB in whole pages
  EXPECT_EQ(c.why, Why::kShrunk);
  // Three slots of 4 KiB: 180 KiB; below that nothing fits.
  c = choose_slots(inputs(16, 2 * 180 * KiB));
  EXPECT_EQ(c.why, Why::kShrunk);
  EXPECT_EQ(c.num_slots, 3);
  c = choose_slots(inputs(16, 2 * 180 * KiB - 2));
  EXPECT_EQ(c.why, Why::kTooSmall);
  EXPECT_EQ(c.num_slots, kMinSlots);
  EXPECT_EQ(c.slot_bytes, kMinSlotBytes);
  EXPECT_EQ(c.window_slot_bytes, 15 * 3 * 4 * KiB);
}

TEST(ChooseSlots, TinyDevShm) {
  for (size_t shm : {size_t{1}, 4 * KiB, 64 * KiB}) {
    const SlotChoice c = choose_slots(inputs(4, shm));
    EXPECT_EQ(c.why, Why::kTooSmall) << shm;
    EXPECT_EQ(c.slot_bytes, kMinSlotBytes) << shm;
    EXPECT_EQ(c.num_slots, kMinSlots) << shm;
  }
  // 0 is "unknown" (/dev/shm unreadable): as configured.
  EXPECT_EQ(choose_slots(inputs(16, 0)).why, Why::kConfigured);
}

TEST(ChooseSlots, OneRankNeedsNoSlotsOfPeers) {
  for (size_t shm : {size_t{0}, size_t{1}, 64 * MiB, kPlenty}) {
    const SlotChoice c = choose_slots(inputs(1, shm));
    EXPECT_EQ(c.slot_bytes, 128 * KiB);
    EXPECT_EQ(c.num_slots, 4);
    EXPECT_EQ(c.why, Why::kConfigured);
    EXPECT_EQ(c.window_slot_bytes, 0u);
  }
}

TEST(ChooseSlots, ManyRanks) {
  // np 1024 in 64 GiB: 64 MiB a rank, 32 MiB / (1023 x 4) = 8200 B: 8 KiB.
  SlotChoice c = choose_slots(inputs(1024, 64 * MiB));
  EXPECT_EQ(c.why, Why::kShrunk);
  EXPECT_EQ(c.slot_bytes, 8 * KiB);
  EXPECT_EQ(c.num_slots, 4);
  // np 4096 in 64 MiB: nothing fits; the least.
  c = choose_slots(inputs(4096, 64 * MiB / 4096));
  EXPECT_EQ(c.why, Why::kTooSmall);
  // A huge count never overflows.
  EXPECT_EQ(window_slot_bytes(SIZE_MAX / 2, 16, 1 << 20), SIZE_MAX);
  c = choose_slots(inputs(1 << 20, kPlenty));
  EXPECT_EQ(c.why, Why::kConfigured);
}

TEST(ChooseSlots, TheUsersKnobsAreKept) {
  SlotInputs in = inputs(16, 4 * MiB);
  in.slot_bytes = 1 * MiB;
  in.slot_bytes_set = true;  // COLL_SLOT_SIZE=1m: fewer slots do not fit either
  SlotChoice c = choose_slots(in);
  EXPECT_EQ(c.slot_bytes, 1 * MiB);
  EXPECT_EQ(c.num_slots, kMinSlots);
  EXPECT_EQ(c.why, Why::kTooSmall);
  in.num_slots_set = true;
  c = choose_slots(in);
  EXPECT_EQ(c.num_slots, 4);
  EXPECT_EQ(c.slot_bytes, 1 * MiB);
  // COLL_SLOT_SIZE=8k with 4 slots: 480 KiB over a 400 KiB budget; 3 slots fit.
  in = inputs(16, 800 * KiB);
  in.slot_bytes = 8 * KiB;
  in.slot_bytes_set = true;
  c = choose_slots(in);
  EXPECT_EQ(c.why, Why::kShrunk);
  EXPECT_EQ(c.slot_bytes, 8 * KiB);
  EXPECT_EQ(c.num_slots, 3);
  // COLL_NUM_SLOTS=16: the count is kept, the size cut (2 MiB / 240 = 8738: 8 KiB).
  in = inputs(16, 4 * MiB);
  in.num_slots = 16;
  in.num_slots_set = true;
  c = choose_slots(in);
  EXPECT_EQ(c.num_slots, 16);
  EXPECT_EQ(c.slot_bytes, 8 * KiB);
}

TEST(ChooseSlots, WindowsOutsideDevShmAreNotCut) {
  SlotInputs in = inputs(16, 4 * MiB);
  in.windows_in_shm = false;  // COLL_TRANSPORT=tcp or rdma
  const SlotChoice c = choose_slots(in);
  EXPECT_EQ(c.slot_bytes, 128 * KiB);
  EXPECT_EQ(c.why, Why::kConfigured);
}

TEST(ChooseSlots, TheDebugLineSaysWhy) {
  const SlotInputs in = inputs(16, 4 * MiB);
  const std::string line = describe_slot_choice(in, choose_slots(in), 64 * MiB, 16);
  EXPECT_NE(line.find("slots 4 x 32768 B (cut from 4 x 131072 B to fit /dev/shm"), std::string::npos)
      << line;
  EXPECT_NE(line.find("67108864 B available for 16 ranks"), std::string::npos) << line;
  const SlotInputs tiny = inputs(16, 4 * KiB);
  EXPECT_NE(describe_slot_choice(tiny, choose_slots(tiny), 64 * KiB, 16).find("COLL_ERR_NO_RESOURCES"),
            std::string::npos);
  const SlotInputs roomy = inputs(4, kPlenty);
  EXPECT_NE(describe_slot_choice(roomy, choose_slots(roomy), kPlenty, 4).find("(the default)"),
            std::string::npos);
}

}  // namespace
}  // namespace coll
