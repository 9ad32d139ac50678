// Deadline: the end of a bounded wait, for the bootstraps' socket loops
// (collrun's rendezvous, a PMI server): every wait there is a poll() that
// must not outlast the caller's timeout. Also the two socket loops both
// bootstraps run, each reporting how it ended so that the caller words the
// error (a launcher's socket and what it was doing are the caller's).
#pragma once

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <string_view>

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

// Waits until fd is ready for events (or has an error the next call on it
// reports): 1; 0 when the deadline passes first; -1 with errno when poll
// fails (EINTR is retried).
inline int wait_ready(int fd, short events, const Deadline& deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, deadline.poll_ms());
    if (rc >= 0) return rc > 0 ? 1 : 0;
    if (errno != EINTR) return -1;
  }
}

// Sends all of bytes on a stream socket without blocking past the
// deadline and without SIGPIPE: 0 once sent, ETIMEDOUT when the deadline
// passed first, else the errno of the send (EPIPE, ECONNRESET: the peer
// is gone) or poll that failed.
inline int send_before(int fd, std::string_view bytes, const Deadline& deadline) {
  while (!bytes.empty()) {
    ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int ready = wait_ready(fd, POLLOUT, deadline);
      if (ready == 0) return ETIMEDOUT;
      if (ready < 0) return errno;
      continue;
    }
    return n == 0 ? EPIPE : errno;
  }
  return 0;
}

}  // namespace coll
