#include "memcpy_probe.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "aligned_buffer.hpp"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds for `copies` copies of bytes from source to destination.
double time_copies(std::byte* destination, const std::byte* source, size_t bytes, size_t copies) {
  const auto start = Clock::now();
  for (size_t i = 0; i < copies; ++i) {
    std::memcpy(destination, source, bytes);
    // The same copy again is a dead store to the compiler; this says that
    // memory is read here, so every copy happens.
    asm volatile("" : : "r"(destination) : "memory");
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

double measure_memcpy_gbs(size_t bytes, size_t min_copies) {
  if (bytes == 0) return 0.0;
  // Separate allocations, as two ranks' buffers are; touched, so that no
  // page fault falls into a timed batch.
  AlignedBuffer source(bytes);
  AlignedBuffer destination(bytes);
  std::memset(source.data(), 1, bytes);
  std::memset(destination.data(), 0, bytes);

  // Doubling the batch until it lasts long enough to time also warms the
  // caches and the TLB.
  constexpr size_t kMaxBatch = size_t{1} << 30;  // a clock that never advances
  size_t batch = 1;
  while (time_copies(destination.data(), source.data(), bytes, batch) < kMemcpyMinBatchSeconds &&
         batch < kMaxBatch) {
    batch *= 2;
  }

  const size_t batches = std::max(kMemcpyMinBatches, (min_copies + batch - 1) / batch);
  std::vector<double> gbs;
  gbs.reserve(batches);
  for (size_t i = 0; i < batches; ++i) {
    const double seconds = time_copies(destination.data(), source.data(), bytes, batch);
    gbs.push_back(seconds > 0
                      ? static_cast<double>(bytes) * static_cast<double>(batch) / seconds / 1e9
                      : 0.0);
  }
  const auto middle = gbs.begin() + static_cast<std::ptrdiff_t>(gbs.size() / 2);
  std::nth_element(gbs.begin(), middle, gbs.end());
  return *middle;
}

double shared_memcpy_gbs(Runner& reducer, size_t bytes, size_t min_copies) {
  // Rank 0 copies alone: the other ranks wait in the reduction, so no other
  // copy competes for the memory bus. The maximum of rank 0's number and
  // everyone else's 0 is rank 0's number.
  double gbs[] = {reducer.rank() == 0 ? measure_memcpy_gbs(bytes, min_copies) : 0.0};
  reducer.allreduce_doubles(gbs, 1, COLL_MAX);
  return gbs[0];
}

}  // namespace bench
