// Buffer contents with a closed-form result, for validation (-c).
//
// Rank r's element i at iteration t is
//     v(r, i, t) = 1 + (3r + i + t) mod 8     (1 + (3r + i + t) mod 2 for prod)
// i counting from the start of the vector (reduce_scatter: of the whole
// vector; gather, allgather: of the rank's own block). The root of a
// scatter puts v(j, i, t) in block j, what rank j must receive; alltoall's
// block from rank r to rank j holds 1 + (3r + j + i + t) mod 8, so that
// every block a rank sends and every block it receives differs. Each
// rank's expected output follows in closed form: a reduction of v over the
// ranks (all, or 0..r for scan, 0..r-1 for exscan), or the blocks of the
// ranks it comes from, at their displacements.
//
// Small integers keep every reduction exact in every datatype, floats
// included (a sum over n ranks is at most 8n, far below 2^24; a product is
// a power of two), and integer overflow on many ranks wraps in the expected
// value as it does in the library. The value changes with t so that a stale
// result from an earlier iteration fails the check, and buffers that should
// be overwritten are first filled with a poison byte pattern.
//
// Since v has period 8 in i + t, the expected result is a table of 8
// entries, folded over the ranks once per iteration: checking costs one
// comparison per element.
#pragma once

#include <cstddef>

#include "collective.hpp"

namespace bench {

class ValueCheck {
 public:
  ValueCheck(const Workload& workload, int rank, int ranks);

  // The same check for another root (a rotating root, measure.hpp).
  ValueCheck with_root(int root) const {
    ValueCheck check = *this;
    check.workload_.root = root;
    return check;
  }

  // Fills the inputs of this rank for iteration t and poisons the outputs
  // it must receive (not those the collective leaves alone: reduce and
  // gather at the other ranks, exscan at rank 0).
  void prepare(Collective collective, const Message& message, size_t iteration) const;
  // True when every element this rank must hold after the collective holds
  // the expected result of iteration t.
  bool verify(Collective collective, const Message& message, size_t iteration) const;

  static constexpr size_t kPeriod = 8;
  static constexpr unsigned char kPoison = 0xA5;

 private:
  // Whether this rank holds a result of the collective.
  bool receives(Collective collective) const;
  // The elements of this rank's result (reduce_scatter: its own block).
  size_t result_count(Collective collective, const Message& message) const;

  Workload workload_;
  int rank_;
  int ranks_;
};

}  // namespace bench
