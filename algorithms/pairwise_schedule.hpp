// Schedule math of the pairwise exchanges (alltoall, alltoallv): pure
// functions, unit-tested without any transport
// (tests/unit/pairwise_schedule_test.cpp).
//
// n steps s = 0 .. n-1; at step s rank r exchanges with partner(r, s) =
// (s - r) mod n. The relation is symmetric (the partner of (s - r) at step
// s is r), so every step is a matching: two partners send to and receive
// from each other, which lets an in-place exchange overwrite what it has
// sent with what it receives. For each r the map s -> partner is a
// bijection onto all ranks, so r meets every other rank exactly once, and
// itself at one step (s = 2r mod n), where it only copies its own block.
#pragma once

namespace coll::pairwise {

inline int mod(int a, int n) { return ((a % n) + n) % n; }

inline int partner(int r, int s, int n) { return mod(s - r, n); }

}  // namespace coll::pairwise
