// The binomial-tree, recursive-doubling and scatter-allgather schedules
// without any transport.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <vector>

#include "binomial_schedule.hpp"

namespace coll::binomial {
namespace {

constexpr int kMaxRanks = 40;

TEST(BinomialSchedule, TreeLinksAreConsistentAndSubtreesNest) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::vector<int> times_a_child(size_t(n), 0);
    for (int v = 0; v < n; ++v) {
      SCOPED_TRACE("n=" + std::to_string(n) + " v=" + std::to_string(v));
      EXPECT_EQ(parent(v) < 0, v == 0);
      // My children's subtrees and I tile my subtree, in order.
      int next = v + 1;
      for (int kid : children(v, n)) {
        EXPECT_EQ(parent(kid), v);
        EXPECT_EQ(kid, next);
        next = subtree_end(kid, n);
        ++times_a_child[size_t(kid)];
      }
      EXPECT_EQ(next, subtree_end(v, n));
      EXPECT_LE(subtree_end(v, n), n);
      // Depth at most ceil(log2 n).
      int hops = 0;
      for (int x = v; x != 0; x = parent(x)) ++hops;
      EXPECT_LE(1 << hops, ceil_pow2(n));
    }
    for (int v = 0; v < n; ++v) EXPECT_EQ(times_a_child[size_t(v)], v == 0 ? 0 : 1);
  }
  EXPECT_EQ(children(0, 8), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(children(4, 8), (std::vector<int>{5, 6}));
  EXPECT_EQ(children(4, 6), (std::vector<int>{5}));
  EXPECT_EQ(children(0, 5), (std::vector<int>{1, 2, 4}));
}

TEST(BinomialSchedule, RelativeRanksRoundTrip) {
  for (int n = 1; n <= 9; ++n)
    for (int root = 0; root < n; ++root)
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(absolute(relative(r, root, n), root, n), r);
        EXPECT_EQ(relative(root, root, n), 0);
      }
}

TEST(BinomialSchedule, DoublingRenumbersTheRanksThatStay) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    const Doubling d = doubling(n);
    EXPECT_EQ(d.pof2 + d.extra, n);
    EXPECT_LT(d.extra, d.pof2);
    EXPECT_EQ(d.pof2 & (d.pof2 - 1), 0);
    std::set<int> seen;
    for (int r = 0; r < n; ++r) {
      const int v = doubling_rank(r, d);
      if (v < 0) {
        // Folded into r + 1, which stays.
        EXPECT_LT(r + 1, n);
        EXPECT_GE(doubling_rank(r + 1, d), 0);
        continue;
      }
      EXPECT_LT(v, d.pof2);
      EXPECT_TRUE(seen.insert(v).second);
      EXPECT_EQ(doubling_to_rank(v, d), r);
    }
    EXPECT_EQ(int(seen.size()), d.pof2);
  }
}

// recursive_doubling_allreduce's pattern on symbolic values, with an
// operator that is neither commutative nor associative ("(a,b)"): every rank
// must end with the same expression, and it must hold every rank once.
TEST(BinomialSchedule, RecursiveDoublingGivesEveryRankTheSameExpression) {
  auto op = [](const std::string& a, const std::string& b) { return "(" + a + "," + b + ")"; };
  for (int n = 1; n <= kMaxRanks; ++n) {
    const Doubling d = doubling(n);
    std::vector<std::string> value(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) value[size_t(r)] = std::to_string(r);
    for (int r = 1; r < 2 * d.extra; r += 2)  // fold: the lower rank's operand first
      value[size_t(r)] = op(value[size_t(r - 1)], value[size_t(r)]);
    for (int mask = 1; mask < d.pof2; mask <<= 1) {
      std::vector<std::string> next = value;
      for (int v = 0; v < d.pof2; ++v) {
        const int r = doubling_to_rank(v, d), p = doubling_to_rank(v ^ mask, d);
        const bool lower = v < (v ^ mask);
        next[size_t(r)] =
            lower ? op(value[size_t(r)], value[size_t(p)]) : op(value[size_t(p)], value[size_t(r)]);
      }
      value = next;
    }
    for (int r = 0; r < 2 * d.extra; r += 2) value[size_t(r)] = value[size_t(r + 1)];
    for (int r = 0; r < n; ++r) EXPECT_EQ(value[size_t(r)], value[0]) << "n=" << n << " r=" << r;
    for (int r = 0; r < n; ++r) {
      // Each rank's number appears once (as a whole token).
      const std::string& e = value[0];
      const std::string tok = std::to_string(r);
      int found = 0;
      for (size_t at = e.find(tok); at != std::string::npos; at = e.find(tok, at + 1)) {
        const bool left_ok = at == 0 || !isdigit(static_cast<unsigned char>(e[at - 1]));
        const bool right_ok =
            at + tok.size() == e.size() || !isdigit(static_cast<unsigned char>(e[at + tok.size()]));
        found += left_ok && right_ok;
      }
      EXPECT_EQ(found, 1) << "n=" << n << " rank " << r << " in " << e;
    }
  }
}

// Rabenseifner's windows: partners split their common window (here kept on
// a stack, as the steps go) into what each keeps and what the other keeps;
// after the halving steps v holds segment v alone; the allgather (the steps
// backwards) gives back the whole.
TEST(BinomialSchedule, HalvingWindowsEndAtOwnSegmentAndGrowBack) {
  for (int p = 1; p <= 64; p *= 2) {
    for (int v = 0; v < p; ++v) {
      std::vector<Window> held{{0, p}};
      for (int m = p / 2; m >= 1; m /= 2) {
        const Window w = held.back(), keep = halving_keep(v, m), give = halving_give(v, m);
        // The partner holds the same window, keeps what I give, gives what I keep.
        const Window pk = halving_keep(v ^ m, m), pg = halving_give(v ^ m, m);
        EXPECT_EQ(pk.lo, give.lo);
        EXPECT_EQ(pk.hi, give.hi);
        EXPECT_EQ(pg.lo, keep.lo);
        EXPECT_EQ(pg.hi, keep.hi);
        // The two halves tile the window, equal in segments.
        EXPECT_EQ(std::min(keep.lo, give.lo), w.lo);
        EXPECT_EQ(std::max(keep.hi, give.hi), w.hi);
        EXPECT_TRUE(keep.hi == give.lo || give.hi == keep.lo);
        EXPECT_EQ(keep.hi - keep.lo, give.hi - give.lo);
        held.push_back(keep);
      }
      EXPECT_EQ(held.back().lo, v) << "p=" << p;
      EXPECT_EQ(held.back().hi, v + 1) << "p=" << p;
      for (int m = 1; m < p; m *= 2) {
        const Window mine = held.back();
        held.pop_back();
        // What I kept at this step, I send back.
        EXPECT_EQ(mine.lo, halving_keep(v, m).lo);
        EXPECT_EQ(mine.hi, halving_keep(v, m).hi);
        const Window theirs = halving_give(v, m);
        EXPECT_EQ(std::min(mine.lo, theirs.lo), held.back().lo);
        EXPECT_EQ(std::max(mine.hi, theirs.hi), held.back().hi);
      }
      EXPECT_EQ(held.size(), 1u);
    }
  }
}

TEST(BinomialSchedule, SegmentsAndSubtreeSpansTileTheBuffer) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    for (size_t bytes : {size_t(0), size_t(1), size_t(n - 1), size_t(n), size_t(n + 1),
                         size_t(1000), size_t(4 << 20) + 7}) {
      size_t next = 0, lo = SIZE_MAX, hi = 0;
      for (int v = 0; v < n; ++v) {
        const Span s = segment(bytes, n, v);
        EXPECT_EQ(s.offset, next);
        next += s.bytes;
        lo = std::min(lo, s.bytes);
        hi = std::max(hi, s.bytes);
        // A subtree's span: its segments, contiguous.
        const Span t = subtree_span(bytes, n, v);
        EXPECT_EQ(t.offset, s.offset);
        EXPECT_EQ(t.offset + t.bytes, segment_begin(bytes, n, subtree_end(v, n)));
      }
      EXPECT_EQ(next, bytes);
      EXPECT_LE(hi - lo, 1u);
      EXPECT_EQ(subtree_span(bytes, n, 0).bytes, bytes);
    }
  }
}

// The ring allgather after the scatter: what a rank sends it holds, sender
// and receiver agree on which segments travel, and everyone ends with all.
TEST(BinomialSchedule, AllgatherAfterScatterCompletesEveryRank) {
  for (int n = 1; n <= kMaxRanks; ++n) {
    std::vector<std::vector<bool>> has(size_t(n), std::vector<bool>(size_t(n), false));
    for (int v = 0; v < n; ++v)
      for (int x = v; x < subtree_end(v, n); ++x) has[size_t(v)][size_t(x)] = true;
    for (int s = 0; s + 1 < n; ++s) {
      std::vector<std::vector<bool>> next = has;
      for (int v = 0; v < n; ++v) {
        const int right = (v + 1) % n;
        const int seg = allgather_send_segment(v, s, n);
        EXPECT_EQ(allgather_recv_segment(right, s, n), seg);
        const bool travels = !in_subtree(seg, right, n);
        EXPECT_EQ(travels, !in_subtree(allgather_recv_segment(right, s, n), right, n));
        if (travels) {
          EXPECT_TRUE(has[size_t(v)][size_t(seg)]) << "n=" << n << " v=" << v << " s=" << s;
          next[size_t(right)][size_t(seg)] = true;
        }
      }
      has = next;
    }
    for (int v = 0; v < n; ++v)
      for (int x = 0; x < n; ++x)
        EXPECT_TRUE(has[size_t(v)][size_t(x)]) << n << " " << v << " " << x;
  }
}

}  // namespace
}  // namespace coll::binomial
