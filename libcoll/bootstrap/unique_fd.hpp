// UniqueFd: owns one file descriptor and closes it once. Shared by the
// collrun client (libcoll) and the collrun launcher, which is why it is
// header-only and depends on nothing else in libcoll.
#pragma once

#include <unistd.h>

#include <utility>

namespace coll {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  explicit operator bool() const { return valid(); }

  int release() { return std::exchange(fd_, -1); }
  // close(2) is not retried on EINTR: on Linux the descriptor is released
  // either way, and a retry could close a descriptor another thread opened.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace coll
