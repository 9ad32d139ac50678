// RegistrationCache against a counting fake registrar: no RDMA needed.
#include "regcache.hpp"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "error.hpp"

namespace coll {
namespace {

// Registers nothing for real: hands out numbered regions, counts calls, and
// fails like ibv_reg_mr over RLIMIT_MEMLOCK when pinned bytes would pass
// `lock_limit` (0: no limit).
class FakeRegistrar {
 public:
  size_t lock_limit = 0;
  int registrations = 0;
  int deregistrations = 0;
  size_t pinned = 0;
  std::map<MemoryRegion*, std::unique_ptr<MemoryRegion>> live;

  RegistrationCache::RegisterFn reg() {
    return [this](void* addr, size_t len) -> MemoryRegion* {
      if (lock_limit != 0 && pinned + len > lock_limit) {
        throw Error(COLL_ERR_NO_RESOURCES, "fake ibv_reg_mr: Cannot allocate memory");
      }
      auto mr = std::make_unique<MemoryRegion>();
      mr->addr = addr;
      mr->length = len;
      mr->lkey = mr->rkey = static_cast<uint32_t>(++registrations);
      pinned += len;
      MemoryRegion* raw = mr.get();
      live.emplace(raw, std::move(mr));
      return raw;
    };
  }
  RegistrationCache::DeregisterFn dereg() {
    return [this](MemoryRegion* mr) -> int {
      auto it = live.find(mr);
      if (it == live.end()) return -1;
      pinned -= mr->length;
      ++deregistrations;
      live.erase(it);
      return 0;
    };
  }
  // By key, not by pointer: a freed region's address may be reused by the
  // next registration.
  bool is_live(uint32_t key) const {
    for (const auto& entry : live) {
      if (entry.first->rkey == key) return true;
    }
    return false;
  }
};

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// Page-aligned, touched memory for the tests to register.
class Pages {
 public:
  explicit Pages(size_t count) : bytes_(count * kPage) {
    base_ = static_cast<char*>(
        mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (base_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    std::memset(base_, 1, bytes_);
  }
  ~Pages() { munmap(base_, bytes_); }
  char* page(size_t i) const { return base_ + i * kPage; }

 private:
  size_t bytes_;
  char* base_;
};

using Validation = RegistrationCache::Validation;

// The cache most tests use: room for 64 pages, caching on, no validation
// behind the caller's back (only explicit invalidation).
class DefaultCache : public testing::Test {
 protected:
  FakeRegistrar fake;
  RegistrationCache cache{fake.reg(), fake.dereg(), 64 * kPage, true, Validation::kExplicitOnly};
};

// Acquires and releases 10 bytes at addr; returns the key of the region used.
uint32_t use(RegistrationCache& cache, const void* addr) {
  const MemoryRegion* mr = cache.acquire(addr, 10);
  uint32_t key = mr->rkey;
  cache.release(mr);
  return key;
}

TEST_F(DefaultCache, SecondAcquireOfSameBufferIsAHit) {
  Pages pages(4);
  const MemoryRegion* first = cache.acquire(pages.page(0) + 100, 200);
  cache.release(first);
  const MemoryRegion* second = cache.acquire(pages.page(0) + 100, 200);
  EXPECT_EQ(first, second);
  cache.release(second);
  EXPECT_EQ(fake.registrations, 1);
  RegcacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.registrations, 1u);
  EXPECT_EQ(stats.bytes_pinned, kPage);
}

TEST_F(DefaultCache, RegistersWholePagesAroundTheRequest) {
  Pages pages(4);
  // Crosses one page boundary: two pages, starting at the first.
  const MemoryRegion* mr = cache.acquire(pages.page(1) - 10, 20);
  EXPECT_EQ(mr->addr, pages.page(0));
  EXPECT_EQ(mr->length, 2 * kPage);
  cache.release(mr);
}

TEST_F(DefaultCache, RequestInsideARegisteredRangeIsAHit) {
  Pages pages(8);
  const MemoryRegion* whole = cache.acquire(pages.page(0), 8 * kPage);
  const MemoryRegion* inner = cache.acquire(pages.page(3) + 17, 2 * kPage);
  EXPECT_EQ(whole, inner);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(fake.registrations, 1);
  cache.release(inner);
  cache.release(whole);
}

TEST_F(DefaultCache, OverlappingRangesFindTheOneThatContains) {
  Pages pages(8);
  const MemoryRegion* long_range = cache.acquire(pages.page(0), 6 * kPage);   // [0, 6)
  const MemoryRegion* short_range = cache.acquire(pages.page(5), 2 * kPage);  // [5, 7): a miss
  EXPECT_NE(long_range, short_range);
  // [1, 3) starts after [0, 6) and before [5, 7): contained in the long one.
  const MemoryRegion* hit = cache.acquire(pages.page(1), 2 * kPage);
  EXPECT_EQ(hit, long_range);
  // [6, 7): only the short one.
  const MemoryRegion* hit2 = cache.acquire(pages.page(6), 10);
  EXPECT_EQ(hit2, short_range);
  // [4, 7): neither contains it.
  const MemoryRegion* miss = cache.acquire(pages.page(4), 3 * kPage);
  EXPECT_NE(miss, long_range);
  EXPECT_NE(miss, short_range);
  EXPECT_EQ(fake.registrations, 3);
  for (const MemoryRegion* mr : {long_range, short_range, hit, hit2, miss}) cache.release(mr);
}

TEST_F(DefaultCache, DisjointBuffersAreMisses) {
  Pages pages(4);
  const MemoryRegion* a = cache.acquire(pages.page(0), 10);
  const MemoryRegion* b = cache.acquire(pages.page(2), 10);
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.stats().misses, 2u);
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(fake.registrations, 2);
  cache.release(a);
  cache.release(b);
}

TEST(RegistrationCache, EvictsLeastRecentlyUsedWhenOverTheBound) {
  FakeRegistrar fake;
  Pages pages(8);
  RegistrationCache cache(fake.reg(), fake.dereg(), 3 * kPage, true, Validation::kExplicitOnly);
  uint32_t a = use(cache, pages.page(0));
  uint32_t b = use(cache, pages.page(2));
  uint32_t c = use(cache, pages.page(4));
  use(cache, pages.page(0));               // now b is the least recently used
  uint32_t d = use(cache, pages.page(6));  // needs room: evicts b
  EXPECT_EQ(cache.stats().evictions, 1u);
  EXPECT_FALSE(fake.is_live(b));
  EXPECT_TRUE(fake.is_live(a));
  EXPECT_TRUE(fake.is_live(c));
  EXPECT_TRUE(fake.is_live(d));
  EXPECT_EQ(cache.stats().bytes_pinned, 3 * kPage);
  // a and c still hit; b is registered anew (and evicts d, now the oldest).
  uint64_t hits = cache.stats().hits;
  cache.release(cache.acquire(pages.page(0), 10));
  cache.release(cache.acquire(pages.page(4), 10));
  EXPECT_EQ(cache.stats().hits, hits + 2);
  cache.release(cache.acquire(pages.page(2), 10));
  EXPECT_EQ(fake.registrations, 5);
}

TEST(RegistrationCache, RegionsInUseAreNeverEvicted) {
  FakeRegistrar fake;
  Pages pages(8);
  RegistrationCache cache(fake.reg(), fake.dereg(), 2 * kPage, true, Validation::kExplicitOnly);
  const MemoryRegion* a = cache.acquire(pages.page(0), 10);
  const MemoryRegion* b = cache.acquire(pages.page(2), 10);
  const MemoryRegion* c = cache.acquire(pages.page(4), 10);  // over the bound: still registered
  uint32_t a_key = a->rkey, b_key = b->rkey, c_key = c->rkey;
  EXPECT_EQ(cache.stats().evictions, 0u);
  EXPECT_EQ(cache.stats().bytes_pinned, 3 * kPage);
  EXPECT_TRUE(fake.is_live(a_key) && fake.is_live(b_key) && fake.is_live(c_key));
  cache.release(a);  // unused and over the bound: goes
  EXPECT_FALSE(fake.is_live(a_key));
  cache.release(b);
  cache.release(c);
  EXPECT_LE(cache.stats().bytes_pinned, 2 * kPage);
  EXPECT_TRUE(fake.is_live(c_key));  // the most recent stays
}

TEST_F(DefaultCache, InvalidateDropsOverlappingUnusedRegions) {
  Pages pages(8);
  const MemoryRegion* a_region = cache.acquire(pages.page(0), 2 * kPage);
  uint32_t a = a_region->rkey;
  cache.release(a_region);
  uint32_t b = use(cache, pages.page(4));
  cache.invalidate(pages.page(1) + 5, 1);  // overlaps a only
  EXPECT_FALSE(fake.is_live(a));
  EXPECT_TRUE(fake.is_live(b));
  EXPECT_EQ(cache.stats().invalidations, 1u);
  const MemoryRegion* again = cache.acquire(pages.page(0), 2 * kPage);
  EXPECT_EQ(cache.stats().misses, 3u);
  cache.release(again);
}

TEST_F(DefaultCache, InvalidateOfARegionInUseDeregistersItAtRelease) {
  Pages pages(4);
  const MemoryRegion* held = cache.acquire(pages.page(0), 10);
  uint32_t held_key = held->rkey;
  cache.invalidate(pages.page(0), kPage);
  EXPECT_TRUE(fake.is_live(held_key));  // a write may still be using it
  const MemoryRegion* fresh = cache.acquire(pages.page(0), 10);
  EXPECT_NE(held, fresh);  // never handed out again
  cache.release(held);
  EXPECT_FALSE(fake.is_live(held_key));
  EXPECT_TRUE(fake.is_live(fresh->rkey));
  cache.release(fresh);
}

TEST_F(DefaultCache, OutOfLockedMemoryEvictsUnusedAndRetries) {
  fake.lock_limit = 4 * kPage;
  Pages pages(16);
  for (size_t i = 0; i < 4; ++i) use(cache, pages.page(2 * i));
  EXPECT_EQ(fake.pinned, 4 * kPage);
  const MemoryRegion* big = cache.acquire(pages.page(8), 2 * kPage);  // fails once, then fits
  EXPECT_TRUE(fake.is_live(big->rkey));
  EXPECT_EQ(cache.stats().evictions, 4u);
  EXPECT_EQ(cache.stats().bytes_pinned, 2 * kPage);
  cache.release(big);
}

TEST_F(DefaultCache, OutOfLockedMemoryWithEverythingInUseNamesUlimit) {
  fake.lock_limit = 2 * kPage;
  Pages pages(8);
  const MemoryRegion* a = cache.acquire(pages.page(0), 10);
  const MemoryRegion* b = cache.acquire(pages.page(2), 10);
  try {
    cache.acquire(pages.page(4), 10);
    FAIL() << "registration over the limit succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_NO_RESOURCES);
    EXPECT_NE(std::string(e.what()).find("ulimit -l"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("RLIMIT_MEMLOCK"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fake.is_live(a->rkey) && fake.is_live(b->rkey));
  cache.release(a);
  cache.release(b);
}

TEST(RegistrationCache, OtherRegistrationErrorsPassThrough) {
  Pages pages(2);
  int calls = 0;
  RegistrationCache cache(
      [&](void*, size_t) -> MemoryRegion* {
        ++calls;
        throw Error(COLL_ERR_TRANSPORT, "fake: EFAULT");
      },
      [](MemoryRegion*) { return 0; }, 64 * kPage, true, Validation::kExplicitOnly);
  try {
    cache.acquire(pages.page(0), 10);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_TRANSPORT);
  }
  EXPECT_EQ(calls, 1);  // no retry for anything but lack of locked memory
}

TEST(RegistrationCache, DisabledRegistersAndDeregistersEveryTime) {
  FakeRegistrar fake;
  Pages pages(2);
  RegistrationCache cache(fake.reg(), fake.dereg(), 64 * kPage, false, Validation::kExplicitOnly);
  const MemoryRegion* a = cache.acquire(pages.page(0), 10);
  const MemoryRegion* b = cache.acquire(pages.page(0), 10);
  EXPECT_NE(a, b);
  EXPECT_EQ(fake.registrations, 2);
  cache.release(a);
  EXPECT_EQ(fake.deregistrations, 1);
  cache.release(b);
  EXPECT_EQ(fake.deregistrations, 2);
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(cache.stats().bytes_pinned, 0u);
}

TEST(RegistrationCache, DestructorDeregistersEverythingEvenInUse) {
  FakeRegistrar fake;
  Pages pages(8);
  {
    RegistrationCache cache(fake.reg(), fake.dereg(), 64 * kPage, true, Validation::kExplicitOnly);
    use(cache, pages.page(0));
    use(cache, pages.page(2));
    cache.acquire(pages.page(4), 10);  // never released
    EXPECT_EQ(fake.live.size(), 3u);
  }
  EXPECT_EQ(fake.live.size(), 0u);
  EXPECT_EQ(fake.deregistrations, 3);
}

TEST_F(DefaultCache, ClearDeregistersOnlyUnused) {
  Pages pages(4);
  use(cache, pages.page(0));
  const MemoryRegion* held = cache.acquire(pages.page(2), 10);
  cache.clear();
  EXPECT_EQ(fake.live.size(), 1u);
  EXPECT_TRUE(fake.is_live(held->rkey));
  cache.release(held);
}

TEST_F(DefaultCache, ReleaseOfAForeignRegionIsAnError) {
  MemoryRegion foreign;
  try {
    cache.release(&foreign);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
  }
}

TEST(RegistrationCache, NoReuseSharesRegionsOnlyWhileInUse) {
  FakeRegistrar fake;
  Pages pages(2);
  RegistrationCache cache(fake.reg(), fake.dereg(), 64 * kPage, true, Validation::kNoReuse);
  ASSERT_EQ(cache.validation(), Validation::kNoReuse);
  const MemoryRegion* a = cache.acquire(pages.page(0), 10);
  const MemoryRegion* b = cache.acquire(pages.page(0), 10);
  EXPECT_EQ(a, b);
  uint32_t key = b->rkey;
  cache.release(a);
  EXPECT_TRUE(fake.is_live(key));
  cache.release(b);
  EXPECT_FALSE(fake.is_live(key));
  EXPECT_EQ(cache.stats().bytes_pinned, 0u);
}

TEST(RegistrationCache, DefaultBoundComesFromTheLockedMemoryLimit) {
  EXPECT_GT(RegistrationCache::default_max_pinned_bytes(), 0u);
  FakeRegistrar fake;
  RegistrationCache cache(fake.reg(), fake.dereg(), 0, true, Validation::kExplicitOnly);
  EXPECT_EQ(cache.max_pinned_bytes(), RegistrationCache::default_max_pinned_bytes());
}

// The real danger: the application frees a registered buffer and gets new
// memory at the same address. Here the old pages are moved away with mremap
// (so they stay allocated and their frames cannot be reused, as a real
// registration keeps them pinned) and fresh pages are mapped at the address.
class PageFrameValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RegistrationCache::page_frames_readable()) {
      GTEST_SKIP() << "/proc/self/pagemap shows no page frame numbers (needs CAP_SYS_ADMIN)";
    }
  }
};

TEST_F(PageFrameValidation, UnchangedMemoryStillHits) {
  FakeRegistrar fake;
  Pages pages(4);
  RegistrationCache cache(fake.reg(), fake.dereg(), 64 * kPage, true, Validation::kAuto);
  ASSERT_EQ(cache.validation(), Validation::kPageFrames);
  cache.release(cache.acquire(pages.page(0), 4 * kPage));
  cache.release(cache.acquire(pages.page(1), kPage));
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().invalidations, 0u);
}

TEST_F(PageFrameValidation, NewMemoryAtTheSameAddressIsAMiss) {
  FakeRegistrar fake;
  const size_t bytes = 4 * kPage;
  RegistrationCache cache(fake.reg(), fake.dereg(), 64 * kPage, true, Validation::kPageFrames);
  ASSERT_EQ(cache.validation(), Validation::kPageFrames);
  // Reserve room for the old pages first, so that the move cannot fail.
  void* parking = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(parking, MAP_FAILED);
  auto* buffer = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buffer, MAP_FAILED);
  std::memset(buffer, 7, bytes);
  const MemoryRegion* old_region = cache.acquire(buffer, bytes);
  uint32_t old_key = old_region->rkey;
  cache.release(old_region);

  // "free" + "malloc": same addresses, other pages.
  ASSERT_EQ(mremap(buffer, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, parking), parking);
  ASSERT_EQ(
      mmap(buffer, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
      buffer);
  std::memset(buffer, 9, bytes);

  const MemoryRegion* new_region = cache.acquire(buffer + kPage, kPage);
  EXPECT_NE(new_region->rkey, old_key);
  EXPECT_FALSE(fake.is_live(old_key));  // the stale registration is gone
  EXPECT_EQ(cache.stats().invalidations, 1u);
  EXPECT_EQ(cache.stats().hits, 0u);
  cache.release(new_region);
  munmap(buffer, bytes);
  munmap(parking, bytes);
}

// A request inside a cached range whose own pages are unchanged, but some
// other page of the range is new memory: the range must not be handed out
// (its holder may use it for any address in it, and would reach the old
// pages there).
TEST_F(PageFrameValidation, ARangeWithSomePagesReplacedIsNotHandedOut) {
  FakeRegistrar fake;
  const size_t bytes = 4 * kPage, tail = 2 * kPage;
  RegistrationCache cache(fake.reg(), fake.dereg(), 64 * kPage, true, Validation::kPageFrames);
  ASSERT_EQ(cache.validation(), Validation::kPageFrames);
  void* parking = mmap(nullptr, tail, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(parking, MAP_FAILED);
  auto* buffer = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buffer, MAP_FAILED);
  std::memset(buffer, 7, bytes);
  const MemoryRegion* whole = cache.acquire(buffer, bytes);
  const uint32_t old_key = whole->rkey;
  cache.release(whole);
  // The last two pages replaced, the first two kept.
  ASSERT_EQ(mremap(buffer + 2 * kPage, tail, tail, MREMAP_MAYMOVE | MREMAP_FIXED, parking),
            parking);
  ASSERT_EQ(mmap(buffer + 2 * kPage, tail, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            buffer + 2 * kPage);
  std::memset(buffer + 2 * kPage, 9, tail);

  const MemoryRegion* head = cache.acquire(buffer, kPage);
  EXPECT_NE(head->rkey, old_key);
  EXPECT_FALSE(fake.is_live(old_key));
  EXPECT_EQ(cache.stats().invalidations, 1u);
  EXPECT_EQ(cache.stats().hits, 0u);
  cache.release(head);
  munmap(buffer, bytes);
  munmap(parking, tail);
}

TEST_F(PageFrameValidation, UntouchedNewMemoryIsAMiss) {
  FakeRegistrar fake;
  const size_t bytes = 2 * kPage;
  RegistrationCache cache(fake.reg(), fake.dereg(), 64 * kPage, true, Validation::kPageFrames);
  void* parking = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(parking, MAP_FAILED);
  auto* buffer = static_cast<char*>(
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(buffer, MAP_FAILED);
  std::memset(buffer, 7, bytes);
  cache.release(cache.acquire(buffer, bytes));
  ASSERT_EQ(mremap(buffer, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, parking), parking);
  ASSERT_EQ(
      mmap(buffer, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
      buffer);
  cache.release(cache.acquire(buffer, bytes));  // pages not even present
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(cache.stats().invalidations, 1u);
  munmap(buffer, bytes);
  munmap(parking, bytes);
}


// The memory monitor (userfaultfd): the cache learns of every unmap, move and
// removal of a cached range without privileges and without reading a single
// page frame. Each test replaces a cached buffer in one of the ways
// applications and allocators do, then asks for the same addresses: a miss,
// the old registration gone, one invalidation counted.
class MonitorValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    monitor_ = MemoryMonitor::start(&why);
    if (!monitor_) GTEST_SKIP() << "no memory monitor here: " << why;
  }
  std::unique_ptr<RegistrationCache> make_cache(size_t pages = 64 * 1024) {
    auto cache = std::make_unique<RegistrationCache>(fake.reg(), fake.dereg(), pages * kPage, true,
                                                     Validation::kAuto, std::move(monitor_));
    EXPECT_EQ(cache->validation(), Validation::kMonitor);
    EXPECT_STREQ(cache->stats().monitor, "userfaultfd");
    return cache;
  }
  // Fresh touched memory, at `at` if given. nullptr when `at` is taken
  // (under ASan its allocator may map there between our munmap and mmap).
  static char* map(size_t bytes, void* at = nullptr) {
    auto* p = static_cast<char*>(mmap(at, bytes, PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0),
                                      -1, 0));
    if (p == MAP_FAILED || (at && p != at)) {
      if (p != MAP_FAILED) munmap(p, bytes);
      if (!at) ADD_FAILURE() << "mmap: " << std::strerror(errno);
      return nullptr;
    }
    std::memset(p, 7, bytes);
    return p;
  }
  static void map_again(size_t bytes, void* at) {
    if (!map(bytes, at)) GTEST_SKIP() << "the address was taken by another mapping";
  }
  // acquire + release once; returns the key it got.
  static uint32_t use(RegistrationCache& cache, const void* p, size_t bytes) {
    const MemoryRegion* mr = cache.acquire(p, bytes);
    const uint32_t key = mr->rkey;
    cache.release(mr);
    return key;
  }
  FakeRegistrar fake;
  std::unique_ptr<MemoryMonitor> monitor_;
};

TEST_F(MonitorValidation, RepeatedUseHitsWithoutPerPageWork) {
  auto cache = make_cache();
  const size_t bytes = 256 * kPage;
  char* p = map(bytes);
  use(*cache, p, bytes);
  for (int i = 1; i < 1000; ++i) use(*cache, p + (i % 7) * kPage, bytes - 7 * kPage);
  EXPECT_EQ(cache->stats().registrations, 1u);
  EXPECT_EQ(cache->stats().hits, 999u);
  munmap(p, bytes);
  EXPECT_EQ(cache->stats().invalidations, 1u);
  EXPECT_EQ(fake.live.size(), 0u);  // unused: deregistered as soon as it was seen
}

TEST_F(MonitorValidation, MunmapThenMmapAtTheSameAddress) {
  auto cache = make_cache();
  const size_t bytes = 16 * kPage;
  char* p = map(bytes);
  const uint32_t old_key = use(*cache, p, bytes);
  ASSERT_EQ(munmap(p, bytes), 0);
  map_again(bytes, p);
  EXPECT_NE(use(*cache, p + kPage, kPage), old_key);
  EXPECT_FALSE(fake.is_live(old_key));
  EXPECT_EQ(cache->stats().invalidations, 1u);
  EXPECT_EQ(cache->stats().hits, 0u);
  munmap(p, bytes);
}

TEST_F(MonitorValidation, MapFixedOverACachedRange) {
  auto cache = make_cache();
  const size_t bytes = 8 * kPage;
  char* p = map(bytes);
  const uint32_t old_key = use(*cache, p, bytes);
  ASSERT_EQ(mmap(p + 2 * kPage, kPage, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0),
            p + 2 * kPage);
  EXPECT_NE(use(*cache, p, bytes), old_key);
  EXPECT_EQ(cache->stats().invalidations, 1u);
  munmap(p, bytes);
}

TEST_F(MonitorValidation, MadviseDontneedAndFree) {
  auto cache = make_cache();
  const size_t bytes = 8 * kPage;
  char* p = map(bytes);
  for (int advice : {MADV_DONTNEED, MADV_FREE}) {
    const uint32_t old_key = use(*cache, p, bytes);
    ASSERT_EQ(madvise(p + 3 * kPage, kPage, advice), 0);
    EXPECT_NE(use(*cache, p, kPage), old_key) << "advice " << advice;
    EXPECT_FALSE(fake.is_live(old_key));
  }
  EXPECT_EQ(cache->stats().invalidations, 2u);
  munmap(p, bytes);
}

TEST_F(MonitorValidation, MremapThatMoves) {
  auto cache = make_cache();
  const size_t bytes = 4 * kPage;
  char* p = map(bytes);
  void* parking = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(parking, MAP_FAILED);
  const uint32_t old_key = use(*cache, p, bytes);
  ASSERT_EQ(mremap(p, bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED, parking), parking);
  map_again(bytes, p);
  EXPECT_NE(use(*cache, p, bytes), old_key);
  EXPECT_EQ(cache->stats().invalidations, 1u);
  munmap(p, bytes);
  munmap(parking, bytes);
}

// glibc's free() of a large block unmaps it through an internal call that
// no symbol interposer sees; realloc moves it with mremap.
TEST_F(MonitorValidation, GlibcFreeAndRealloc) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer's allocator keeps freed blocks (quarantine): glibc's free is not used";
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "the sanitizer's allocator keeps freed blocks (quarantine): glibc's free is not used";
#endif
#endif
  auto cache = make_cache();
  const size_t bytes = size_t(64) << 20;  // above any mmap threshold glibc adapts to
  void* a = std::malloc(bytes);
  ASSERT_NE(a, nullptr);
  std::memset(a, 1, bytes);
  use(*cache, a, bytes);
  std::free(a);
  EXPECT_EQ(cache->stats().invalidations, 1u);

  void* b = std::malloc(bytes);
  ASSERT_NE(b, nullptr);
  std::memset(b, 2, bytes);
  use(*cache, b, bytes);
  void* c = std::realloc(b, 2 * bytes);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(cache->stats().invalidations, 2u) << (c == b ? "grown in place" : "moved");
  std::free(c);
}

TEST_F(MonitorValidation, BrkShrink) {
  auto cache = make_cache();
  const size_t bytes = 64 * kPage;
  // Page-align the break first, then grow it by whole pages.
  auto* start = static_cast<char*>(sbrk(0));
  const size_t pad = (kPage - uintptr_t(start) % kPage) % kPage;
  ASSERT_NE(sbrk(intptr_t(pad + bytes)), reinterpret_cast<void*>(-1));
  char* p = start + pad;
  std::memset(p, 3, bytes);
  use(*cache, p, bytes);
  ASSERT_NE(sbrk(-intptr_t(bytes)), reinterpret_cast<void*>(-1));
  EXPECT_EQ(cache->stats().invalidations, 1u);
  ASSERT_NE(sbrk(-intptr_t(pad)), reinterpret_cast<void*>(-1));
}

// SysV shared memory: the kernel refuses to watch it (its VMAs are not
// shmem's own), so a shmat'ed range is never reused and shmdt cannot leave
// a stale entry behind.
TEST_F(MonitorValidation, SysVSharedMemoryIsNotReused) {
  auto cache = make_cache();
  const size_t bytes = 16 * kPage;
  int id = shmget(IPC_PRIVATE, bytes, IPC_CREAT | 0600);
  if (id < 0) GTEST_SKIP() << "shmget: " << std::strerror(errno);
  void* p = shmat(id, nullptr, 0);
  shmctl(id, IPC_RMID, nullptr);
  ASSERT_NE(p, reinterpret_cast<void*>(-1));
  std::memset(p, 4, bytes);
  use(*cache, p, bytes);
  use(*cache, p, bytes);
  EXPECT_EQ(cache->stats().hits, 0u);
  EXPECT_EQ(fake.live.size(), 0u);
  ASSERT_EQ(shmdt(p), 0);
}

// The kernel does not watch mappings of regular files: such a range is
// registered for each use and never reused, rather than trusted blindly.
TEST_F(MonitorValidation, AnUnwatchableRangeIsNotReused) {
  auto cache = make_cache();
  char path[] = "/tmp/coll-regcache-test.XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  const size_t bytes = 4 * kPage;
  ASSERT_EQ(ftruncate(fd, off_t(bytes)), 0);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  close(fd);
  use(*cache, p, bytes);
  use(*cache, p, bytes);
  EXPECT_EQ(cache->stats().hits, 0u);
  EXPECT_EQ(cache->stats().registrations, 2u);
  EXPECT_EQ(fake.live.size(), 0u);
  munmap(p, bytes);
}

// Two cached ranges overlap; the first goes (evicted): the pages the second
// still covers stay watched.
TEST_F(MonitorValidation, OverlappingRangesKeepTheirWatch) {
  auto cache = make_cache(12);
  const size_t bytes = 16 * kPage;
  char* p = map(bytes);
  use(*cache, p, 8 * kPage);                        // [0, 8)
  const uint32_t second = use(*cache, p + 4 * kPage, 8 * kPage);  // [4, 12): evicts [0, 8)
  EXPECT_EQ(cache->stats().evictions, 1u);
  ASSERT_EQ(madvise(p + 5 * kPage, kPage, MADV_DONTNEED), 0);
  EXPECT_NE(use(*cache, p + 4 * kPage, 8 * kPage), second);
  EXPECT_EQ(cache->stats().invalidations, 1u);
  munmap(p, bytes);
}

// Exactness, not luck: the monitor thread reads the event that lets munmap
// return; the cache must see the range before any later lookup, every time.
TEST_F(MonitorValidation, NeverAStaleHitAcrossManyReplacements) {
  auto cache = make_cache();
  const size_t bytes = 4 * kPage;
  char* p = map(bytes);
  int replaced = 0;
  for (int i = 0; i < 2000; ++i) {
    const uint32_t old_key = use(*cache, p, bytes);
    ASSERT_EQ(munmap(p, bytes), 0);
    if (!map(bytes, p)) {  // the address was taken: go on elsewhere
      p = map(bytes);
      continue;
    }
    ++replaced;
    ASSERT_NE(use(*cache, p, bytes), old_key) << "iteration " << i;
  }
  EXPECT_GT(replaced, 1000);
  EXPECT_EQ(cache->stats().invalidations, uint64_t(2000));
  munmap(p, bytes);
}

TEST_F(MonitorValidation, ExplicitRegistration) {
  auto cache = make_cache();
  const size_t bytes = 8 * kPage;
  char* p = map(bytes);
  cache->register_explicit(p + 100, bytes - 200);
  const uint64_t registrations = cache->stats().registrations;
  for (int i = 0; i < 10; ++i) use(*cache, p + 200, 100);
  EXPECT_EQ(cache->stats().registrations, registrations);
  EXPECT_EQ(cache->stats().hits, 10u);
  try {
    cache->register_explicit(p + 100, kPage);
    ADD_FAILURE() << "registered twice";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
  }
  // In use: deregistration refused.
  const MemoryRegion* held = cache->acquire(p + 300, 10);
  try {
    cache->deregister_explicit(p + 100);
    ADD_FAILURE() << "deregistered while in use";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find("in use"), std::string::npos) << e.what();
  }
  cache->release(held);
  // Never evicted, never silently replaced: freed without deregistering, it
  // refuses requests.
  cache->clear();
  EXPECT_EQ(fake.live.size(), 1u);
  ASSERT_EQ(madvise(p, bytes, MADV_DONTNEED), 0);
  try {
    cache->acquire(p + 200, 100);
    ADD_FAILURE() << "a freed explicit range was handed out";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find("coll_mem_deregister"), std::string::npos) << e.what();
  }
  cache->deregister_explicit(p + 100);
  EXPECT_EQ(fake.live.size(), 0u);
  try {
    cache->deregister_explicit(p + 100);
    ADD_FAILURE() << "deregistered twice";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
  }
  munmap(p, bytes);
}

// A range held across an unmap (a persistent request's): not handed out
// again, and check_held names it.
TEST_F(MonitorValidation, HeldRangeUnmappedIsRefusedAtStart) {
  auto cache = make_cache();
  const size_t bytes = 4 * kPage;
  char* p = map(bytes);
  std::vector<const MemoryRegion*> held{cache->acquire(p, bytes)};
  cache->check_held(held, "coll_start");
  ASSERT_EQ(munmap(p, bytes), 0);
  map_again(bytes, p);
  try {
    cache->check_held(held, "coll_start");
    ADD_FAILURE() << "a replaced buffer passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
  }
  const uint32_t old_key = held[0]->rkey;
  EXPECT_NE(use(*cache, p, bytes), old_key);
  cache->release(held[0]);
  EXPECT_FALSE(fake.is_live(old_key));
  munmap(p, bytes);
}

// After fork() the child's copies are not watched (the kernel drops them)
// and the monitor thread is not there: the child's cache reuses nothing.
TEST_F(MonitorValidation, ForkedChildReusesNothing) {
  auto cache = make_cache();
  const size_t bytes = 4 * kPage;
  char* p = map(bytes);
  const uint32_t key = use(*cache, p, bytes);
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Unmapping does not block the child (nothing watches it), and the
    // cached range is not handed out.
    munmap(p, bytes);
    if (!map(bytes, p)) _exit(0);
    const bool reused = use(*cache, p, bytes) == key;
    _exit(reused ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // The parent still reuses its range.
  EXPECT_EQ(use(*cache, p, bytes), key);
  munmap(p, bytes);
}

}  // namespace
}  // namespace coll
