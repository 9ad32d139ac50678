// RegionTable: the rkey and range check that every software backend runs
// before a write lands (region_table.hpp). No processes, no sockets.
#include "transport/region_table.hpp"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

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

// shm+rdma tables the NIC's rkeys (add_with_key): keys whose homes collide
// sit next to each other and are all found; removing the first hides none
// of the others; a stale key matches nothing; a key is tabled once.
TEST_F(RegionTableTest, KeysChosenElsewhereAreFoundNearTheirHome) {
  // Same low 10 bits (home 0x2a), different NIC indices.
  const uint32_t keys[] = {0x1002a, 0x2002a, 0x3002a, 0x4002a};
  std::vector<MemoryRegion*> mrs;
  for (size_t i = 0; i < 4; ++i)
    mrs.push_back(table.add_with_key(buffer + 64 * i, 64, kRegionInSegment, keys[i]));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(mrs[i]->rkey, keys[i]);
    RegionGrant grant;
    EXPECT_EQ(check_region(table.entries(), keys[i], base() + 64 * i, 64, &grant),
              RegionCheck::kOk);
    EXPECT_EQ(grant.kind, kRegionInSegment);
    // Each key grants its own range only.
    EXPECT_EQ(check_region(table.entries(), keys[i], base() + 64 * ((i + 1) % 4), 64, nullptr),
              RegionCheck::kOutOfRange);
  }
  ASSERT_EQ(table.remove(mrs[0]), 0);
  EXPECT_EQ(check_region(table.entries(), keys[0], base(), 64, nullptr), RegionCheck::kUnknownRkey);
  for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(region_alive(table.entries(), keys[i]));
  // Closing works on a key away from its home.
  table.set_open(mrs[3], false);
  EXPECT_EQ(check_region(table.entries(), keys[3], base() + 192, 64, nullptr),
            RegionCheck::kClosed);
  table.set_open(mrs[3], true);
  EXPECT_TRUE(region_alive(table.entries(), keys[3]));
  // The freed home entry is taken again by the next key of that home.
  MemoryRegion* again = table.add_with_key(buffer, 64, kRegionInSegment, 0x5002a);
  EXPECT_TRUE(region_alive(table.entries(), 0x5002a));
  for (uint32_t bad : {0u, 0x2002au}) {
    try {
      table.add_with_key(buffer, 64, kRegionInSegment, bad);
      FAIL() << "rkey 0x" << std::hex << bad << " was tabled";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), COLL_ERR_INTERNAL);
    }
  }
  EXPECT_EQ(table.remove(again), 0);
}

// A home whose neighbourhood is full: NO_RESOURCES (the registration
// cache evicts and retries), and the table is unharmed.
TEST_F(RegionTableTest, AFullNeighbourhoodIsAnErrorNotACorruption) {
  std::vector<uint32_t> keys;
  for (uint32_t i = 0; i < kRegionProbe; ++i) {
    keys.push_back(((i + 1) << kRegionIndexBits) | 7u);
    table.add_with_key(buffer, 1, kRegionProcessMemory, keys.back());
  }
  try {
    table.add_with_key(buffer, 1, kRegionProcessMemory, ((kRegionProbe + 1) << kRegionIndexBits) | 7u);
    FAIL() << "a key whose entries are all in use was tabled";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_NO_RESOURCES);
  }
  for (uint32_t k : keys) EXPECT_TRUE(region_alive(table.entries(), k));
  // A key of another home still fits.
  EXPECT_NE(table.add_with_key(buffer, 1, kRegionProcessMemory, 0x10300u), nullptr);
}

}  // namespace
}  // namespace coll
