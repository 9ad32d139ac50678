// RegionTable: the rkey and range check that every software backend runs
// before a write lands (region_table.hpp). No processes, no sockets.
#include "transport/region_table.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <set>

#include "error.hpp"

namespace coll {
namespace {

class RegionTableTest : public ::testing::Test {
 protected:
  std::unique_ptr<RegionEntry[]> storage{new RegionEntry[kMaxRegions]};
  RegionTable table{storage.get(), "test"};
  alignas(64) char buffer[4096] = {};
  uint64_t base() const { return reinterpret_cast<uintptr_t>(buffer); }
};

TEST_F(RegionTableTest, ARegisteredRangeIsGrantedWithItsBounds) {
  MemoryRegion* mr = table.add(buffer + 100, 1000, kRegionProcessMemory);
  ASSERT_NE(mr, nullptr);
  EXPECT_NE(mr->rkey, 0u);
  EXPECT_EQ(mr->addr, buffer + 100);
  EXPECT_EQ(mr->length, 1000u);
  RegionGrant grant;
  EXPECT_EQ(check_region(table.entries(), mr->rkey, base() + 100, 1000, &grant), RegionCheck::kOk);
  EXPECT_EQ(grant.addr, base() + 100);
  EXPECT_EQ(grant.length, 1000u);
  EXPECT_EQ(grant.kind, kRegionProcessMemory);
  EXPECT_EQ(check_region(table.entries(), mr->rkey, base() + 1099, 1, nullptr), RegionCheck::kOk);
  EXPECT_EQ(check_region(table.entries(), mr->rkey, base() + 1100, 0, nullptr), RegionCheck::kOk);
  EXPECT_TRUE(region_alive(table.entries(), mr->rkey));
}

TEST_F(RegionTableTest, EveryRangeThatLeavesTheRegionIsRefused) {
  MemoryRegion* mr = table.add(buffer + 100, 1000, kRegionProcessMemory);
  const RegionEntry* e = table.entries();
  const uint32_t k = mr->rkey;
  EXPECT_EQ(check_region(e, k, base() + 99, 1, nullptr), RegionCheck::kOutOfRange);
  EXPECT_EQ(check_region(e, k, base() + 100, 1001, nullptr), RegionCheck::kOutOfRange);
  EXPECT_EQ(check_region(e, k, base() + 1099, 2, nullptr), RegionCheck::kOutOfRange);
  EXPECT_EQ(check_region(e, k, base() + 1101, 0, nullptr), RegionCheck::kOutOfRange);
  // Sums that wrap around must not pass for small ones.
  EXPECT_EQ(check_region(e, k, base() + 200, UINT64_MAX - 50, nullptr), RegionCheck::kOutOfRange);
  EXPECT_EQ(check_region(e, k, UINT64_MAX - 10, 20, nullptr), RegionCheck::kOutOfRange);
  EXPECT_EQ(check_region(e, k, 0, 1, nullptr), RegionCheck::kOutOfRange);
}

TEST_F(RegionTableTest, UnknownAndStaleRkeysAreRefused) {
  const RegionEntry* e = table.entries();
  EXPECT_EQ(check_region(e, 0, base(), 1, nullptr), RegionCheck::kUnknownRkey);
  EXPECT_EQ(check_region(e, 12345, base(), 1, nullptr), RegionCheck::kUnknownRkey);
  MemoryRegion* first = table.add(buffer, sizeof buffer, kRegionInSegment);
  const uint32_t stale = first->rkey;
  ASSERT_EQ(table.remove(first), 0);
  EXPECT_EQ(check_region(e, stale, base(), 1, nullptr), RegionCheck::kUnknownRkey);
  EXPECT_FALSE(region_alive(e, stale));
  // Every entry reused, each time with a new rkey: the stale one never
  // comes back to life.
  for (uint32_t i = 0; i < 3 * kMaxRegions; ++i) {
    MemoryRegion* again = table.add(buffer, sizeof buffer, kRegionInSegment);
    ASSERT_NE(again->rkey, stale) << "after " << i << " reuses";
    EXPECT_EQ(check_region(e, stale, base(), 1, nullptr), RegionCheck::kUnknownRkey);
    ASSERT_EQ(table.remove(again), 0);
  }
}

TEST_F(RegionTableTest, RemoveRefusesHandlesItDidNotHandOut) {
  MemoryRegion foreign;
  errno = 0;
  EXPECT_EQ(table.remove(&foreign), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(table.remove(nullptr), -1);
  MemoryRegion* mr = table.add(buffer, 8, kRegionProcessMemory);
  ASSERT_EQ(table.remove(mr), 0);
  EXPECT_EQ(table.remove(mr), -1) << "a second dereg of one handle";
}

TEST_F(RegionTableTest, AFullTableIsAnErrorNotACorruption) {
  std::set<uint32_t> rkeys;
  for (uint32_t i = 0; i < kMaxRegions; ++i)
    rkeys.insert(table.add(buffer + i % 64, 1, kRegionProcessMemory)->rkey);
  EXPECT_EQ(rkeys.size(), size_t(kMaxRegions)) << "rkeys must be distinct";
  try {
    table.add(buffer, 1, kRegionProcessMemory);
    FAIL() << "a table with every entry in use accepted one more";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_NO_RESOURCES);
  }
  for (uint32_t k : rkeys) EXPECT_TRUE(region_alive(table.entries(), k));
}

}  // namespace
}  // namespace coll
