// Shared helpers of the multi-process suite: every rank runs the same
// GoogleTest binary under collrun, so every test must issue the same
// sequence of collectives on every rank. Helpers here never return early
// between collectives; checks record failures with EXPECT_* and go on.
#pragma once

#include <coll/coll.h>
#include <gtest/gtest.h>
#include <coll/coll.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "datatypes.hpp"

namespace mp {

inline coll_comm_t world() { return coll_comm_world(); }

inline int world_rank() {
  int rank = -1;
  coll_comm_rank(world(), &rank);
  return rank;
}

inline int world_size() {
  int size = 0;
  coll_comm_size(world(), &size);
  return size;
}

// The library's window slot size, read as libcoll reads COLL_SLOT_SIZE
// (bytes, optional K/M/G suffix, rounded up to a cache line): a collective
// larger than one slot is cut into chunks of this size, so counts around it
// exercise the chunk boundaries.
size_t slot_bytes();

// Element counts every collective is tried with: empty, one, odd, one per
// rank but one, and both sides of a slot boundary. Sorted, no duplicates.
std::vector<size_t> interesting_counts(size_t element_size);

inline constexpr size_t kLargeCount = size_t{1} << 20;  // 1 Mi elements

// splitmix64: a deterministic value for (a, b, c) that every rank can
// compute for every other rank, so expectations need no communication.
inline uint64_t mix(uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b * 0xBF58476D1CE4E5B9ull + c * 0x94D049BB133111EBull +
               0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t hash = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) {
    hash ^= p[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

// True when every rank passed the same digest. One allreduce of MAX over
// {d, ~d}: both maxima equal this rank's values only if all agree.
bool same_on_all_ranks(uint64_t digest);

// Datatypes and operators: the C++ type of a datatype as the C++ layer
// (coll.hpp) maps it; names, kinds and the dispatch from a datatype to its
// C++ type as the benchmark has them (bench/datatypes.hpp).
using bench::datatype_name;
using bench::is_bitwise;
using bench::integers_only;
using bench::op_applies;
using bench::is_floating;
using bench::op_name;
using bench::visit_datatype;  // visit(bench::TypeTag<T>{})
using coll::datatype_of;

std::vector<coll_datatype_t> all_datatypes();
// Those that visit_datatype maps to a C++ type: all but the 16-bit floats
// (their reductions are checked by tests/unit/float16_test.cpp and
// tests/mp/c_random.c).
std::vector<coll_datatype_t> typed_datatypes();

// A buffer of `count` elements between two guard zones of known bytes: a
// collective that writes one byte outside [data, data + count) is caught.
class GuardedBuffer {
 public:
  GuardedBuffer(size_t count, size_t element_size);

  void* data() { return storage_.data() + kGuardBytes; }
  const void* data() const { return storage_.data() + kGuardBytes; }
  template <typename T>
  T* as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data());
  }
  size_t bytes() const { return bytes_; }

  // Fills the payload with a byte pattern that no collective produces by
  // chance (so "unchanged" and "overwritten" can both be checked).
  void fill_pattern(uint64_t seed);
  bool has_pattern(uint64_t seed) const;
  bool guards_intact() const;

 private:
  // A multiple of 16 keeps the payload as aligned as operator new's
  // allocation, which suits every datatype.
  static constexpr size_t kGuardBytes = 64;
  static unsigned char guard_byte(size_t i) { return static_cast<unsigned char>(0xA5 ^ (i * 29)); }

  size_t bytes_;
  std::vector<unsigned char> storage_;
};

// For messages on failures: "[rank r/n]".
std::string rank_tag();

}  // namespace mp
