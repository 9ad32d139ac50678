// Schedule math of the tree algorithms: pure functions, unit-tested without
// any transport (tests/unit/tree_schedule_test.cpp).
//
// The double binary tree is NCCL's (src/graph/trees.cc, ncclGetBtree and
// ncclGetDtree): tree 0 is a binary tree in which every odd rank is a leaf;
// tree 1 is tree 0 mirrored (r -> n-1-r) when n is even, so that its leaves
// are the even ranks, or shifted by one (r -> r+1) when n is odd. A rank
// that forwards in one tree is (nearly always) a leaf in the other, so the
// two trees together ask about the same work of every rank.
#pragma once

#include <algorithm>
#include <cstddef>

namespace coll::tree {

constexpr int kNone = -1;

// A rank's neighbours in one tree: kNone where there is none. child[0] is
// filled before child[1].
struct Node {
  int parent = kNone;
  int child[2] = {kNone, kNone};

  int num_children() const { return (child[0] != kNone) + (child[1] != kNone); }
};

inline int mod(int a, int n) { return ((a % n) + n) % n; }

// NCCL's binary tree on ranks 0..n-1, rooted at rank 0. Rank 0 has a single
// child (the highest power of two below n); a rank r > 0 whose lowest set
// bit is b has parent (r ^ b) | 2b, or r ^ b when that is out of range, and
// children r - b/2 and r + b/2, the latter shrunk (r + b/4, ...) into range.
//
//     0 ------------- 8
//              _____/   \_____
//             4               12
//           /   \            /  |
//         2       6       10    |
//        / \     / \     /  \   |
//       1   3   5   7   9   11  13
inline Node btree(int n, int r) {
  Node node;
  if (n <= 1) return node;
  int bit = 1;
  while (bit < n && (r & bit) == 0) bit <<= 1;
  if (r == 0) {
    node.child[0] = bit >> 1;
    return node;
  }
  node.parent = (r ^ bit) | (bit << 1);
  if (node.parent >= n) node.parent = r ^ bit;
  int low = bit >> 1;
  if (low == 0) return node;  // odd ranks are leaves
  node.child[0] = r - low;
  while (low > 0 && r + low >= n) low >>= 1;
  if (low > 0) node.child[1] = r + low;
  return node;
}

// Tree t (0 or 1) of the double binary tree on n ranks.
inline Node dtree(int n, int t, int r) {
  if (t == 0 || n <= 1) return btree(n, r);
  const bool shift = n % 2 == 1;
  auto from_tree0 = [&](int x) { return shift ? mod(x - 1, n) : n - 1 - x; };
  auto to_tree1 = [&](int x) { return x == kNone ? kNone : shift ? mod(x + 1, n) : n - 1 - x; };
  Node b = btree(n, from_tree0(r));
  return {to_tree1(b.parent), {to_tree1(b.child[0]), to_tree1(b.child[1])}};
}

inline int dtree_root(int n, int t) {
  if (t == 0 || n <= 1) return 0;
  return n % 2 == 1 ? 1 : n - 1;
}

// Hops from r up to the root of tree t.
inline int dtree_depth(int n, int t, int r) {
  int d = 0;
  for (int x = dtree(n, t, r).parent; x != kNone; x = dtree(n, t, x).parent) ++d;
  return d;
}

inline int dtree_height(int n, int t) {
  int h = 0;
  for (int r = 0; r < n; ++r) h = std::max(h, dtree_depth(n, t, r));
  return h;
}

// ---------------------------------------------------------------------------
// Data split. The count elements are cut into two halves (tree t carries
// half t), each half into the same number of chunks, chunk sizes differing by
// at most one element.

struct Range {
  size_t offset;  // in elements
  size_t count;   // in elements
};

inline Range split(size_t count, size_t parts, size_t i) {
  const size_t base = count / parts, rem = count % parts;
  return {i * base + std::min(i, rem), base + (i < rem ? 1 : 0)};
}

inline Range half(size_t count, int t) { return split(count, 2, size_t(t)); }

// Chunks per half: enough that no chunk exceeds max_chunk_elems (>= 1).
inline size_t num_chunks(size_t count, size_t max_chunk_elems) {
  const size_t biggest_half = half(count, 0).count;
  return std::max<size_t>(1, (biggest_half + max_chunk_elems - 1) / max_chunk_elems);
}

inline Range chunk(size_t count, int t, size_t chunks, size_t c) {
  const Range h = half(count, t);
  const Range x = split(h.count, chunks, c);
  return {h.offset + x.offset, x.count};
}

// A half streams through its tree in about this many chunks (more chunks:
// a fuller pipeline; fewer: less per-message cost), each at least this big.
constexpr size_t kPipelineStages = 8;
constexpr size_t kMinChunkBytes = 16 * 1024;

// The chunk size of the pipelines: a slot, but small enough that a message
// of a few slots still fills a pipeline of about `stages` chunks per half,
// and never below min_chunk_bytes (per-message costs dominate below that).
inline size_t pipeline_chunk_elems(size_t count, size_t elem_size, size_t slot_bytes,
                                   size_t stages = kPipelineStages,
                                   size_t min_chunk_bytes = kMinChunkBytes) {
  const size_t slot_elems = std::max<size_t>(1, slot_bytes / elem_size);
  const size_t min_elems = std::max<size_t>(1, min_chunk_bytes / elem_size);
  const size_t want = (half(count, 0).count + stages - 1) / stages;
  return std::min(slot_elems, std::max(min_elems, want));
}

// ---------------------------------------------------------------------------
// Systolic allreduce schedule. Time runs in steps shared by all ranks; at
// each step a rank first receives everything its neighbours sent at the
// step before, then sends. In tree t of height H, a rank at depth d
//   reduces chunk  c = s - (H - d)  at step s (receives its children's
//     partial sums of c, which they sent at step s - 1, and sends its own to
//     its parent), and
//   broadcasts chunk c = s - H - d  at step s (receives c from its parent,
//     sent at step s - 1, and sends it to its children).
// The root (d = 0) reduces and starts the broadcast of a chunk in the same
// step. A chunk index outside [0, chunks) means nothing to do. The last
// chunk reaches the deepest rank at step chunks - 1 + 2H.

inline long reduce_chunk_at(long step, int height, int depth) { return step - (height - depth); }
inline long bcast_chunk_at(long step, int height, int depth) { return step - height - depth; }
inline long allreduce_steps(size_t chunks, int height) { return long(chunks) + 2L * height; }

// One rank's part of the allreduce.
struct AllreducePlan {
  size_t count = 0;   // elements
  size_t chunks = 0;  // per half
  Node node[2];
  int depth[2] = {0, 0};
  int height[2] = {0, 0};
  long steps = 0;
};

inline AllreducePlan allreduce_plan(int n, int r, size_t count, size_t chunks) {
  AllreducePlan p;
  p.count = count;
  p.chunks = chunks;
  for (int t = 0; t < 2; ++t) {
    p.node[t] = dtree(n, t, r);
    p.depth[t] = dtree_depth(n, t, r);
    p.height[t] = dtree_height(n, t);
    p.steps = std::max(p.steps, allreduce_steps(chunks, p.height[t]));
  }
  return p;
}

// The messages of rank p at step s, in the order they must be handled: the
// whole receive phase, then the send phase; within each, tree 0 before
// tree 1, so that two ranks handle the messages between them in the same
// order (FIFO). Empty chunks are skipped on both sides. Calls
//   ops.reduce_from_child(t, child, range, first)  receive a partial sum;
//                                                 first: the first of range
//   ops.bcast_from_parent(t, parent, range)        receive the result
//   ops.reduce_to_parent(t, parent, range, leaf)   send own partial sum; leaf:
//                                                 it is the own input
//   ops.bcast_to_child(t, child, range)            send the result
template <class Ops>
void allreduce_step(const AllreducePlan& p, long s, Ops& ops) {
  // This step's chunk of each tree going up and coming down; an empty
  // range when there is none.
  auto chunk_at = [&](int t, long c) {
    return c < 0 || c >= long(p.chunks) ? Range{0, 0} : chunk(p.count, t, p.chunks, size_t(c));
  };
  Range up[2], down[2];
  for (int t = 0; t < 2; ++t) {
    up[t] = chunk_at(t, reduce_chunk_at(s, p.height[t], p.depth[t]));
    down[t] = chunk_at(t, bcast_chunk_at(s, p.height[t], p.depth[t]));
  }
  for (int t = 0; t < 2; ++t) {
    const Node& node = p.node[t];
    if (up[t].count > 0) {
      bool first = true;
      for (int child : node.child) {
        if (child == kNone) continue;
        ops.reduce_from_child(t, child, up[t], first);
        first = false;
      }
    }
    if (node.parent != kNone && down[t].count > 0) ops.bcast_from_parent(t, node.parent, down[t]);
  }
  for (int t = 0; t < 2; ++t) {
    const Node& node = p.node[t];
    if (node.parent != kNone && up[t].count > 0)
      ops.reduce_to_parent(t, node.parent, up[t], node.num_children() == 0);
    if (down[t].count > 0)
      for (int child : node.child)
        if (child != kNone) ops.bcast_to_child(t, child, down[t]);
  }
}

// ---------------------------------------------------------------------------
// Broadcast double tree. The root sends half t to the top of tree t, built
// on the other n - 1 ranks (numbered from root + 1) as above.

// r's neighbours in tree t of the broadcast from root.
inline Node bcast_node(int n, int root, int t, int r) {
  Node node;
  if (n <= 1) return node;
  const int m = n - 1;
  auto to_rank = [&](int u) { return u == kNone ? kNone : mod(root + 1 + u, n); };
  if (r == root) {
    node.child[0] = to_rank(dtree_root(m, t));
    return node;
  }
  const int u = mod(r - root - 1, n);
  const Node inner = dtree(m, t, u);
  node.parent = inner.parent == kNone ? root : to_rank(inner.parent);
  node.child[0] = to_rank(inner.child[0]);
  node.child[1] = to_rank(inner.child[1]);
  return node;
}

}  // namespace coll::tree
