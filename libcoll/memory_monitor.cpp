#include "memory_monitor.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.hpp"

namespace coll {

namespace {

// Counts the forks this process descends from since its first monitor
// (pthread_atfork, in the child): a monitor started before the last fork was
// inherited, has no thread here, and the kernel dropped its watches. A
// monitor the child starts itself is its own.
std::atomic<uint64_t> g_forks{0};
std::once_flag g_atfork_once;

void note_fork_child() { g_forks.fetch_add(1, std::memory_order_relaxed); }

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1  // linux/userfaultfd.h before 5.11
#endif

constexpr uint64_t kEvents =
    UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;

}  // namespace

std::unique_ptr<MemoryMonitor> MemoryMonitor::start(std::string* why_not) {
#ifndef __NR_userfaultfd
  *why_not = "userfaultfd: not available on this architecture";
  return nullptr;
#else
  // UFFD_USER_MODE_ONLY: allowed without CAP_SYS_PTRACE where
  // vm.unprivileged_userfaultfd=0 (the default); it only limits which page
  // faults would be reported, and we ask for none. Kernels before 5.11 reject
  // the flag: try without it (root, or vm.unprivileged_userfaultfd=1).
  int fd = int(syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY));
  if (fd < 0 && errno == EINVAL) fd = int(syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) {
    *why_not = strfmt("userfaultfd: %s%s", std::strerror(errno),
                      errno == EPERM ? " (vm.unprivileged_userfaultfd=0 and a kernel before 5.11, "
                                       "or a seccomp profile that denies it)"
                                     : "");
    return nullptr;
  }
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kEvents;
  if (ioctl(fd, UFFDIO_API, &api) != 0 || (api.features & kEvents) != kEvents) {
    *why_not = strfmt("userfaultfd: UFFDIO_API with the UNMAP, REMOVE and REMAP events: %s",
                      std::strerror(errno));
    close(fd);
    return nullptr;
  }
  int stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) {
    *why_not = strfmt("eventfd: %s", std::strerror(errno));
    close(fd);
    return nullptr;
  }
  std::call_once(g_atfork_once, [] { pthread_atfork(nullptr, nullptr, note_fork_child); });
  std::unique_ptr<MemoryMonitor> monitor(new MemoryMonitor(fd, stop));
  monitor->forks_at_start_ = g_forks.load(std::memory_order_relaxed);
  // The thread takes no signal meant for the application: block them all
  // while it is created (it inherits the mask), then restore ours.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  try {
    monitor->thread_ = std::thread([m = monitor.get()] { m->run(); });
  } catch (const std::system_error& e) {
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    *why_not = strfmt("memory monitor thread: %s", e.what());
    return nullptr;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return monitor;
#endif
}

MemoryMonitor::MemoryMonitor(int uffd, int stop_fd) : uffd_(uffd), stop_fd_(stop_fd) {}

MemoryMonitor::~MemoryMonitor() {
  if (thread_.joinable()) {
    if (forked()) {
      // Not ours: the thread exists only in the parent.
      thread_.detach();
    } else {
      uint64_t one = 1;
      ssize_t rc = write(stop_fd_, &one, sizeof one);
      (void)rc;  // an eventfd write of 1 cannot fail short of overflow
      thread_.join();
    }
  }
  // Closing the userfaultfd unregisters every range it watches (and wakes
  // any unmapping thread still waiting for it).
  close(uffd_);
  close(stop_fd_);
}

bool MemoryMonitor::forked() const {
  return g_forks.load(std::memory_order_relaxed) != forks_at_start_;
}

bool MemoryMonitor::watch(uintptr_t begin, uintptr_t end) {
  if (forked() || end <= begin) return false;
  uffdio_register reg{};
  reg.range.start = begin;
  reg.range.len = end - begin;
  reg.mode = UFFDIO_REGISTER_MODE_WP;
  return ioctl(uffd_, UFFDIO_REGISTER, &reg) == 0;
}

void MemoryMonitor::unwatch(uintptr_t begin, uintptr_t end) {
  if (forked() || end <= begin) return;
  uffdio_range range{};
  range.start = begin;
  range.len = end - begin;
  (void)ioctl(uffd_, UFFDIO_UNREGISTER, &range);
}

void MemoryMonitor::run() {
  pollfd fds[2] = {{uffd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    fds[0].revents = fds[1].revents = 0;
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;  // cannot happen with valid fds; unmapping threads are freed by close
    }
    if (fds[1].revents) break;
    if (fds[0].revents & (POLLERR | POLLHUP)) break;
    if (fds[0].revents & POLLIN) read_events();
  }
}

void MemoryMonitor::read_events() {
  // Announce the read before it happens: a thread whose munmap returns once
  // we have read its event then finds either the range queued or reading_
  // set (and waits on the lock), never neither.
  std::lock_guard<std::mutex> lock(queue_mutex_);
  reading_.store(true, std::memory_order_seq_cst);
  uffd_msg msgs[32];
  for (;;) {
    ssize_t got = read(uffd_, msgs, sizeof msgs);
    if (got <= 0) break;  // EAGAIN: drained (the fd is non-blocking)
    size_t n = size_t(got) / sizeof msgs[0];
    events_.fetch_add(n, std::memory_order_relaxed);
    for (size_t i = 0; i < n; ++i) {
      Range r;
      const uffd_msg& m = msgs[i];
      if (m.event == UFFD_EVENT_UNMAP || m.event == UFFD_EVENT_REMOVE) {
        r = {uintptr_t(m.arg.remove.start), uintptr_t(m.arg.remove.end)};
      } else if (m.event == UFFD_EVENT_REMAP) {
        // The pages left [from, from + len); the range they moved to is not
        // in the cache (it was not mapped there before).
        r = {uintptr_t(m.arg.remap.from), uintptr_t(m.arg.remap.from + m.arg.remap.len)};
      } else {
        continue;  // page faults: never asked for (nothing is write-protected)
      }
      const size_t queued = queued_.load(std::memory_order_relaxed);
      if (queued == kQueueCapacity) {
        overflowed_ = true;
        continue;
      }
      queue_[(queue_head_ + queued) % kQueueCapacity] = r;
      queued_.store(queued + 1, std::memory_order_release);
    }
  }
  reading_.store(false, std::memory_order_release);
}

bool MemoryMonitor::drain(std::vector<Range>* out) {
  if (forked()) return false;
  std::lock_guard<std::mutex> lock(queue_mutex_);
  size_t n = queued_.load(std::memory_order_relaxed);
  const size_t room = out->capacity() - out->size();
  if (n > room) n = room;
  for (size_t i = 0; i < n; ++i) out->push_back(queue_[(queue_head_ + i) % kQueueCapacity]);
  queue_head_ = (queue_head_ + n) % kQueueCapacity;
  queued_.fetch_sub(n, std::memory_order_release);
  const bool complete = !overflowed_;
  overflowed_ = false;
  return complete;
}

}  // namespace coll
