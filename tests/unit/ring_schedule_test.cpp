// The ring schedule without any transport: who owns, sends and receives
// which segment at which step, and how segments split into chunks.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <vector>

#include "ring_schedule.hpp"

namespace coll::ring {
namespace {

TEST(RingSchedule, SegmentsTileTheBufferAndDifferByAtMostOne) {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 13}) {
    for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(7), size_t(n - 1), size_t(n),
                         size_t(n + 1), size_t(1000), size_t(1 << 20) + 3}) {
      size_t next = 0, lo = SIZE_MAX, hi = 0;
      for (int s = 0; s < n; ++s) {
        Range r = segment(count, n, s);
        EXPECT_EQ(r.offset, next) << "n=" << n << " count=" << count << " seg=" << s;
        next += r.count;
        lo = std::min(lo, r.count);
        hi = std::max(hi, r.count);
      }
      EXPECT_EQ(next, count);
      EXPECT_LE(hi - lo, 1u);
    }
  }
}

TEST(RingSchedule, ReduceScatterStepsLineUpWithTheLeftNeighbour) {
  for (int n : {2, 3, 4, 5, 8, 13}) {
    for (int r = 0; r < n; ++r) {
      const int left = mod(r - 1, n);
      std::set<int> received;
      for (int s = 0; s < n - 1; ++s) {
        // What I receive at step s is what my left neighbour sends.
        EXPECT_EQ(rs_recv_segment(r, s, n), rs_send_segment(left, s, n));
        // What I send at step s+1 is what I received (and reduced) at s.
        if (s + 1 < n - 1) {
          EXPECT_EQ(rs_send_segment(r, s + 1, n), rs_recv_segment(r, s, n));
        }
        received.insert(rs_recv_segment(r, s, n));
      }
      // Every segment but my step-0 one passes through me exactly once...
      EXPECT_EQ(received.size(), size_t(n - 1));
      EXPECT_EQ(received.count(rs_send_segment(r, 0, n)), 0u);
      // ...and the last one I reduce is the one I own.
      EXPECT_EQ(rs_recv_segment(r, n - 2, n), owned_segment(r, n));
    }
  }
}

TEST(RingSchedule, EverySegmentIsOwnedByExactlyOneRank) {
  for (int n : {1, 2, 3, 5, 8, 16}) {
    std::vector<int> owners(size_t(n), 0);
    for (int r = 0; r < n; ++r) ++owners[size_t(owned_segment(r, n))];
    for (int c : owners) EXPECT_EQ(c, 1);
  }
}

TEST(RingSchedule, AllgatherDeliversEverySegmentToEveryRank) {
  for (int n : {2, 3, 4, 5, 7, 8}) {
    for (int r = 0; r < n; ++r) {
      const int left = mod(r - 1, n);
      std::set<int> have = {owned_segment(r, n)};
      for (int s = 0; s < n - 1; ++s) {
        EXPECT_EQ(ag_recv_segment(r, s, n), ag_send_segment(left, s, n));
        // I only forward what I already have.
        EXPECT_TRUE(have.count(ag_send_segment(r, s, n))) << "n=" << n << " r=" << r;
        have.insert(ag_recv_segment(r, s, n));
      }
      EXPECT_EQ(have.size(), size_t(n));
    }
  }
}

TEST(RingSchedule, ChunksCoverASegment) {
  Range seg{100, 1001};
  for (size_t chunk_elems : {size_t(1), size_t(7), size_t(1000), size_t(1001), size_t(5000)}) {
    size_t next = seg.offset;
    const size_t n = num_chunks(seg.count, chunk_elems);
    for (size_t c = 0; c < n; ++c) {
      Range ch = chunk(seg, c, chunk_elems);
      EXPECT_EQ(ch.offset, next);
      EXPECT_GT(ch.count, 0u);
      EXPECT_LE(ch.count, chunk_elems);
      next += ch.count;
    }
    EXPECT_EQ(next, seg.offset + seg.count);
  }
  EXPECT_EQ(num_chunks(0, 16), 0u);
}

TEST(RingSchedule, ZeroCopyChunksAreTheWholeMessageAtTwoRanksElseSlots) {
  const size_t slot = 128 << 10, most = size_t(1) << 30;
  EXPECT_EQ(zero_copy_chunk(4 << 20, 2, slot, most), size_t(4) << 20);
  EXPECT_EQ(zero_copy_chunk(524289, 2, slot, most), 524289u);  // odd: still one write
  EXPECT_EQ(zero_copy_chunk(size_t(3) << 30, 2, slot, most), most);  // capped
  for (int n : {3, 4, 7}) EXPECT_EQ(zero_copy_chunk(4 << 20, n, slot, most), slot);
  EXPECT_EQ(zero_copy_chunk(4 << 20, 3, size_t(2) << 30, most), most);
  EXPECT_EQ(zero_copy_chunk(0, 2, slot, most), 1u);  // never 0: the loop advances
}

TEST(RingSchedule, ChainVisitsEveryRankOnceFromAnyRoot) {
  for (int n : {1, 2, 3, 6}) {
    for (int root = 0; root < n; ++root) {
      std::vector<int> order(size_t(n), -1);
      for (int r = 0; r < n; ++r) order[size_t(chain_position(r, root, n))] = r;
      EXPECT_EQ(order[0], root);
      for (int p = 1; p < n; ++p) EXPECT_EQ(chain_prev(order[size_t(p)], n), order[size_t(p - 1)]);
    }
  }
}

}  // namespace
}  // namespace coll::ring
