#include "signal_pipe.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace collrun {
namespace {

volatile sig_atomic_t signal_write_fd = -1;

extern "C" void on_signal(int signo) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(signo);
  // Non-blocking: if the pipe is full, poll() wakes anyway and SIGCHLD is
  // handled by reaping every child, so a dropped byte loses nothing.
  [[maybe_unused]] ssize_t ignored = ::write(signal_write_fd, &byte, 1);
  errno = saved_errno;
}

}  // namespace

SignalPipe::SignalPipe(std::initializer_list<int> signals) : signals_(signals) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "signal pipe");
  read_end_.reset(fds[0]);
  write_end_.reset(fds[1]);
  signal_write_fd = write_end_.get();
  for (int signo : signals_) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (signo == SIGCHLD) action.sa_flags |= SA_NOCLDSTOP;
    if (::sigaction(signo, &action, nullptr) != 0)
      throw std::system_error(errno, std::generic_category(), "sigaction");
  }
}

SignalPipe::~SignalPipe() {
  for (int signo : signals_) ::signal(signo, SIG_DFL);
  signal_write_fd = -1;
}

std::vector<int> SignalPipe::take() {
  std::vector<int> arrived;
  unsigned char bytes[64];
  for (;;) {
    ssize_t n = ::read(read_end_.get(), bytes, sizeof bytes);
    if (n > 0) {
      arrived.insert(arrived.end(), bytes, bytes + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return arrived;  // EAGAIN: empty
  }
}

}  // namespace collrun
