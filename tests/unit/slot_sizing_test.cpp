// The slot size where some host is oversubscribed (slot_sizing.hpp):
// doubled from the configured size to at most 512 KiB while a writer's
// slots at every peer, num_slots x (nranks - 1) x slot, fit 16 MiB and half
// of the rank's share of /dev/shm.
#include "slot_sizing.hpp"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace coll
