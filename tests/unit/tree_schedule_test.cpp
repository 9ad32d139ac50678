// The double binary tree schedule without any transport: the trees, the
// data split, the systolic allreduce steps, and a simulation of the whole
// allreduce message pattern over FIFO pairs with bounded slots (no
// deadlock, messages matched in order, every chunk reduced and broadcast
// once everywhere).
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tree_schedule.hpp"

namespace coll::tree {
namespace {

constexpr int kMaxRanks = 64;

int floor_log2(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

TEST(TreeSchedule, EachTreeSpansAllRanksWithConsistentLinks) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (int t = 0; t < 2; ++t) {
      const int root = dtree_root(n, t);
      std::vector<int> times_a_child(size_t(n), 0);
      for (int r = 0; r < n; ++r) {
        const Node node = dtree(n, t, r);
        SCOPED_TRACE("n=" + std::to_string(n) + " t=" + std::to_string(t) +
                     " r=" + std::to_string(r));
        EXPECT_EQ(node.parent == kNone, r == root);
        if (node.parent != kNone) {
          ASSERT_GE(node.parent, 0);
          ASSERT_LT(node.parent, n);
          const Node up = dtree(n, t, node.parent);
          EXPECT_TRUE(up.child[0] == r || up.child[1] == r) << "parent does not list me";
        }
        EXPECT_FALSE(node.child[0] == kNone && node.child[1] != kNone) << "child[0] first";
        for (int c : node.child) {
          if (c == kNone) continue;
          ASSERT_GE(c, 0);
          ASSERT_LT(c, n);
          EXPECT_NE(c, r);
          EXPECT_EQ(dtree(n, t, c).parent, r);
          ++times_a_child[size_t(c)];
        }
      }
      // Every rank but the root is exactly one rank's child: with one root
      // and n - 1 edges, a tree when every rank reaches the root.
      for (int r = 0; r < n; ++r) EXPECT_EQ(times_a_child[size_t(r)], r == root ? 0 : 1);
      for (int r = 0; r < n; ++r) {
        int x = r, hops = 0;
        while (x != root && hops <= n) x = dtree(n, t, x).parent, ++hops;
        EXPECT_EQ(x, root) << "rank " << r << " does not reach the root";
        EXPECT_EQ(hops, dtree_depth(n, t, r));
      }
      // Binary trees of logarithmic height (root with one child on top).
      EXPECT_LE(dtree_height(n, t), floor_log2(n) + 1) << "n=" << n;
    }
  }
}

TEST(TreeSchedule, TheTwoTreesShareForwardingWork) {
  // Where n is even no rank forwards in both trees; where n is odd, one
  // rank at most (NCCL's shifted tree).
  for (int n = 2; n <= kMaxRanks; ++n) {
    int both = 0;
    for (int r = 0; r < n; ++r)
      both += dtree(n, 0, r).num_children() > 0 && dtree(n, 1, r).num_children() > 0;
    EXPECT_LE(both, n % 2) << "n=" << n;
  }
}

TEST(TreeSchedule, SmallTreesByHand) {
  // n = 2: 0 -> 1 in tree 0, 1 -> 0 in tree 1.
  EXPECT_EQ(dtree(2, 0, 1).parent, 0);
  EXPECT_EQ(dtree(2, 1, 0).parent, 1);
  // n = 8, tree 0: 0 - 4, 4 - {2, 6}, 2 - {1, 3}, 6 - {5, 7}.
  EXPECT_EQ(dtree(8, 0, 0).child[0], 4);
  EXPECT_EQ(dtree(8, 0, 4).child[0], 2);
  EXPECT_EQ(dtree(8, 0, 4).child[1], 6);
  EXPECT_EQ(dtree(8, 0, 7).parent, 6);
  // n = 14, the drawing in tree_schedule.hpp: 12's children are 10 and 13
  // (12 + 2 is out of range, so its right child shrinks to 12 + 1).
  EXPECT_EQ(dtree(14, 0, 12).child[0], 10);
  EXPECT_EQ(dtree(14, 0, 12).child[1], 13);
  EXPECT_EQ(dtree(14, 0, 8).child[1], 12);
  // Tree 1 mirrors tree 0 for even n, shifts it for odd n.
  EXPECT_EQ(dtree_root(8, 1), 7);
  EXPECT_EQ(dtree(8, 1, 3).child[0], 5);  // mirror of 4 -> 2
  EXPECT_EQ(dtree_root(7, 1), 1);
  EXPECT_EQ(dtree(7, 1, 5).child[0], 3);  // shift of 4 -> 2
}

TEST(TreeSchedule, HalvesAndChunksTileTheBuffer) {
  for (size_t count : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(17), size_t(1000),
                       size_t(32768), size_t(1 << 20) + 3}) {
    for (size_t max_chunk : {size_t(1), size_t(7), size_t(1024), size_t(32768)}) {
      const size_t chunks = num_chunks(count, max_chunk);
      EXPECT_GE(chunks, 1u);
      size_t next = 0;
      for (int t = 0; t < 2; ++t) {
        const Range h = half(count, t);
        EXPECT_EQ(h.offset, next);
        size_t lo = SIZE_MAX, hi = 0;
        for (size_t c = 0; c < chunks; ++c) {
          const Range x = chunk(count, t, chunks, c);
          EXPECT_EQ(x.offset, next) << "count=" << count << " t=" << t << " c=" << c;
          EXPECT_LE(x.count, max_chunk);
          next += x.count;
          lo = std::min(lo, x.count);
          hi = std::max(hi, x.count);
        }
        EXPECT_LE(hi - lo, 1u);
        EXPECT_EQ(next, h.offset + h.count);
      }
      EXPECT_EQ(next, count);
      // No more chunks than needed.
      if (chunks > 1) {
        EXPECT_GT(half(count, 0).count, (chunks - 1) * max_chunk);
      }
    }
  }
}

TEST(TreeSchedule, PipelineChunkIsBoundedBySlotAndFloor) {
  const size_t slot = 128 * 1024, floor = 16 * 1024;
  // Small: the floor (or the data); large: the slot; between: 1/stages of a half.
  EXPECT_EQ(pipeline_chunk_elems(100, 4, slot, 8, floor), floor / 4);
  EXPECT_EQ(pipeline_chunk_elems(1 << 24, 4, slot, 8, floor), slot / 4);
  EXPECT_EQ(pipeline_chunk_elems(1 << 18, 4, slot, 8, floor), (1 << 17) / 8);
  // Elements bigger than the slot or the floor still move, one at a time.
  EXPECT_EQ(pipeline_chunk_elems(10, 1 << 20, slot, 8, floor), 1u);
}

TEST(TreeSchedule, SystolicStepsLineUpAlongTreeEdges) {
  for (int n = 2; n <= 17; ++n) {
    for (int t = 0; t < 2; ++t) {
      const int h = dtree_height(n, t);
      for (int r = 0; r < n; ++r) {
        const Node node = dtree(n, t, r);
        const int d = dtree_depth(n, t, r);
        for (long s = -3; s < 20; ++s) {
          if (node.parent != kNone) {
            // What I reduce at step s, my parent reduces at step s + 1;
            // what my parent broadcasts at step s, I receive at step s + 1.
            EXPECT_EQ(reduce_chunk_at(s + 1, h, d - 1), reduce_chunk_at(s, h, d));
            EXPECT_EQ(bcast_chunk_at(s + 1, h, d), bcast_chunk_at(s, h, d - 1));
          } else {
            EXPECT_EQ(reduce_chunk_at(s, h, d), bcast_chunk_at(s, h, d));
          }
          // A chunk comes back down only after it went up.
          EXPECT_LE(bcast_chunk_at(s, h, d), reduce_chunk_at(s, h, d));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Simulation of allreduce_step on all ranks: each directed pair is a FIFO
// with `slots` slots; a send waits for a free slot, a receive for a message
// (and releases it at once, as tree_allreduce.cpp does).

struct Message {
  int tree;
  bool down;  // broadcast (else a partial sum going up)
  size_t offset;
  size_t count;
  bool operator==(const Message&) const = default;
};

struct Op {
  bool send;
  int peer;
  Message msg;
};

struct Recorder {
  std::vector<Op>* ops;
  void reduce_from_child(int t, int child, Range x, bool) {
    ops->push_back({false, child, {t, false, x.offset, x.count}});
  }
  void bcast_from_parent(int t, int parent, Range x) {
    ops->push_back({false, parent, {t, true, x.offset, x.count}});
  }
  void reduce_to_parent(int t, int parent, Range x, bool) {
    ops->push_back({true, parent, {t, false, x.offset, x.count}});
  }
  void bcast_to_child(int t, int child, Range x) {
    ops->push_back({true, child, {t, true, x.offset, x.count}});
  }
};

// Runs the programs of all ranks; fails the test on a deadlock, on a
// message that is not the one the receiver expects, or when a rank does not
// receive the result of every element exactly once (its tree's root, which
// computes it, none).
void simulate(int n, size_t count, size_t chunks, int slots) {
  SCOPED_TRACE("n=" + std::to_string(n) + " count=" + std::to_string(count) +
               " chunks=" + std::to_string(chunks) + " slots=" + std::to_string(slots));
  std::vector<std::vector<Op>> program(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    const AllreducePlan plan = allreduce_plan(n, r, count, chunks);
    Recorder rec{&program[size_t(r)]};
    for (long s = 0; s < plan.steps; ++s) allreduce_step(plan, s, rec);
  }
  std::map<std::pair<int, int>, std::deque<Message>> wire;  // (from, to)
  std::vector<size_t> pc(size_t(n), 0);
  // How often each rank received the result of each element.
  std::vector<std::vector<int>> result(size_t(n), std::vector<int>(count, 0));
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < n; ++r) {
      while (pc[size_t(r)] < program[size_t(r)].size()) {
        const Op& op = program[size_t(r)][pc[size_t(r)]];
        if (op.send) {
          auto& q = wire[{r, op.peer}];
          if (int(q.size()) >= slots) break;  // no credit
          q.push_back(op.msg);
        } else {
          auto& q = wire[{op.peer, r}];
          if (q.empty()) break;
          ASSERT_EQ(q.front(), op.msg) << "rank " << r << " got another message than expected";
          q.pop_front();
          if (op.msg.down)
            for (size_t i = 0; i < op.msg.count; ++i) ++result[size_t(r)][op.msg.offset + i];
        }
        ++pc[size_t(r)];
        progress = true;
      }
    }
  }
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(pc[size_t(r)], program[size_t(r)].size()) << "deadlock: rank " << r << " stuck";
  for (auto& [pair, q] : wire) EXPECT_TRUE(q.empty());
  // Every element's result reaches every rank but its tree's root once.
  for (int t = 0; t < 2; ++t) {
    const Range h = half(count, t);
    for (int r = 0; r < n; ++r)
      for (size_t i = h.offset; i < h.offset + h.count; ++i)
        ASSERT_EQ(result[size_t(r)][i], r == dtree_root(n, t) ? 0 : 1)
            << "rank " << r << " element " << i;
  }
}

TEST(TreeSchedule, AllreduceCompletesWithTwoSlotsAndMatchesMessagesInOrder) {
  for (int n = 1; n <= 16; ++n)
    for (size_t count : {size_t(1), size_t(2), size_t(3), size_t(n), size_t(40)})
      for (size_t chunks : {size_t(1), size_t(2), size_t(5)})
        for (int slots : {2, 3})
          if (chunks <= std::max<size_t>(1, count / 2)) simulate(n, count, chunks, slots);
}

TEST(TreeSchedule, AllreduceSendsAtMostTwoMessagesPerPairPerStep) {
  // The premise of the deadlock argument in tree_allreduce.cpp.
  for (int n = 2; n <= 32; ++n) {
    for (int r = 0; r < n; ++r) {
      const AllreducePlan plan = allreduce_plan(n, r, 1000, 7);
      for (long s = 0; s < plan.steps; ++s) {
        std::vector<Op> ops;
        Recorder rec{&ops};
        allreduce_step(plan, s, rec);
        std::map<int, int> sends;
        for (const Op& op : ops) sends[op.peer] += op.send;
        for (auto [peer, k] : sends) EXPECT_LE(k, 2) << "n=" << n << " r=" << r << " s=" << s;
        // Receives come before sends within a step.
        bool sending = false;
        for (const Op& op : ops) {
          if (op.send) sending = true;
          EXPECT_FALSE(sending && !op.send) << "a receive after a send in step " << s;
        }
      }
    }
  }
}

TEST(TreeSchedule, BcastTreesHangBelowTheRootAndCoverEveryRank) {
  for (int n = 1; n <= 40; ++n) {
    for (int root = 0; root < n; ++root) {
      for (int t = 0; t < 2; ++t) {
        std::vector<int> times_a_child(size_t(n), 0);
        for (int r = 0; r < n; ++r) {
          const Node node = bcast_node(n, root, t, r);
          EXPECT_EQ(node.parent == kNone, r == root);
          for (int c : node.child) {
            if (c == kNone) continue;
            ASSERT_GE(c, 0);
            ASSERT_LT(c, n);
            EXPECT_EQ(bcast_node(n, root, t, c).parent, r);
            ++times_a_child[size_t(c)];
          }
        }
        for (int r = 0; r < n; ++r) EXPECT_EQ(times_a_child[size_t(r)], r == root ? 0 : 1);
        for (int r = 0; r < n; ++r) {
          int x = r, hops = 0;
          while (x != root && hops <= n) x = bcast_node(n, root, t, x).parent, ++hops;
          EXPECT_EQ(x, root) << "n=" << n << " root=" << root << " r=" << r;
        }
      }
      // The root sends each half once.
      EXPECT_EQ(bcast_node(n, root, 0, root).num_children(), n > 1 ? 1 : 0);
    }
  }
}

}  // namespace
}  // namespace coll::tree
