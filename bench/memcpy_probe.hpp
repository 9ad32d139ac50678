// This machine's memcpy bandwidth at one message size, the yardstick for
// allreduce's bus bandwidth (the Busbw/Memcpy columns). On one node every
// byte an allreduce moves goes through memory, so a library whose bus
// bandwidth reaches a good part of what a plain copy of the same size
// reaches is limited by the machine, not by its own overhead; at small
// sizes the fraction shows how far latency dominates.
#pragma once

#include <cstddef>

#include "runner.hpp"

namespace bench {

// A batch of copies is timed as a whole once it lasts at least this long:
// steady_clock resolves it, and one copy of a few bytes does not.
inline constexpr double kMemcpyMinBatchSeconds = 20e-6;
// At least this many timed batches (odd: the median is one of them).
inline constexpr size_t kMemcpyMinBatches = 5;

// std::memcpy from one page-aligned buffer of `bytes` to another, allocated
// separately and touched first, on this process alone. Copies are timed in
// batches of equal length (at least kMemcpyMinBatchSeconds each), at least
// kMemcpyMinBatches batches and at least min_copies copies in all; returns
// the median batch's bandwidth in GB/s (1 GB = 1e9 B). 0 for 0 bytes.
double measure_memcpy_gbs(size_t bytes, size_t min_copies);

// measure_memcpy_gbs on the reducer's rank 0 while the other ranks wait,
// then handed to every rank (allreduce_doubles, max), so that every rank
// reports the same number. Collective over the reducer's ranks.
double shared_memcpy_gbs(Runner& reducer, size_t bytes, size_t min_copies);

}  // namespace bench
