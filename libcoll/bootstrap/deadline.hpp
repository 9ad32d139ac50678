// Deadline: the end of a bounded wait, for the bootstraps' socket loops
// (collrun's rendezvous, a PMI server): every wait there is a poll() that
// must not outlast the caller's timeout.
#pragma once

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>

namespace coll {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Deadline(double seconds) : seconds_(seconds) {
    // Clamp so that an "infinite" timeout stays representable.
    double bounded = std::isnan(seconds) ? 0.0 : std::clamp(seconds, 0.0, 1e9);
    end_ = Clock::now() +
           std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bounded));
  }
  bool expired() const { return Clock::now() >= end_; }
  // For poll(): the time left in ms, rounded up so that a wait never ends
  // before the deadline, capped at `cap_ms`.
  int poll_ms(int cap_ms = INT_MAX) const {
    auto left = end_ - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return static_cast<int>(std::min<long long>(ms, cap_ms));
  }
  double seconds() const { return seconds_; }

 private:
  double seconds_;
  Clock::time_point end_;
};

}  // namespace coll
