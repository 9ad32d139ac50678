// MemoryMonitor: tells the registration cache which address ranges the
// application unmapped, moved or emptied, without privileges and without
// intercepting a single libc symbol.
//
// Why a monitor at all: the cache keeps user buffers registered after a
// collective, so that the next collective on the same buffer is a hit. If the
// application frees the buffer and gets new memory at the same address (glibc
// does that all the time), a hit would hand out a registration of the OLD
// pages. The cache must learn of every munmap, mremap, madvise(DONTNEED,
// FREE, REMOVE), shmdt and brk shrink of a range it holds, including the
// unmaps glibc's free() and realloc() make through internal calls that no
// symbol interposer sees (UCX's ucm patches the PLT and installs a kernel
// hook for exactly this reason; libfabric offers both hooks and
// userfaultfd).
//
// How: userfaultfd(2) in its non-cooperative mode, the way libfabric's uffd
// monitor and CRIU use it. Every range the cache holds is registered with
// UFFDIO_REGISTER_MODE_WP and nothing is ever write-protected, so no page
// fault is ever delivered to us (MISSING mode would stop every first touch of
// a page and every remote access to it); what we get is the events the kernel
// sends for every registered VMA whatever its mode: UFFD_EVENT_UNMAP (munmap,
// brk shrink, mmap MAP_FIXED over it, mremap shrink), UFFD_EVENT_REMOVE
// (madvise DONTNEED/FREE/REMOVE) and UFFD_EVENT_REMAP (mremap that moves).
// The kernel needs no privilege for this with UFFD_USER_MODE_ONLY (Linux
// 5.11+), which only restricts page faults, which we never handle.
//
// The kernel blocks the thread that unmaps until some thread has read the
// event, so the monitor has a thread of its own, blocked in poll(2). It
// never takes the cache's lock: a thread holding that lock may be the one
// blocked in munmap (free() of a vector inside the cache can trim the heap),
// and waiting for it would deadlock. Instead it appends the ranges to a
// fixed queue under a lock of its own that no one holds across anything that
// can unmap, allocate or block; the cache drains that queue under its lock
// before every lookup (UCX's rcache does the same with its invalidation
// queue). The queue never allocates: when it is full the monitor records an
// overflow, and the cache then treats every range it holds as invalidated.
//
// Exactness. The monitor holds its lock from before its read(2) until the
// ranges are queued, and says so in `reading_` before it reads. A munmap
// returns only after the read, so a thread that checks the queue after its
// munmap returned either sees the range queued or sees `reading_` and waits
// on the lock until it is: there is no moment at which an unmap has returned
// and the cache can still hand out a registration of that range.
//
// What it cannot see (the cache then does not reuse the range: every
// registration of it is dropped at its last release):
//  - mappings userfaultfd refuses: file-backed mappings other than shmem
//    and hugetlbfs (mmap of a regular file), special mappings (device
//    memory), ranges another userfaultfd already watches (EBUSY); watch()
//    returns false for those;
//  - kernels or sandboxes without userfaultfd: kernels before 5.11 with
//    vm.unprivileged_userfaultfd=0, seccomp profiles that deny the system
//    call (Docker's default does unless CAP_SYS_PTRACE); start() then
//    fails and says why (COLL_DEBUG=1 prints it);
//  - a child after fork(): the kernel drops the watches of the child's
//    copies and the monitor thread is not copied; the child's cache then
//    reuses nothing (forked() is true there).
// Cost: each watch is an ioctl (a few microseconds, on a cache miss only);
// a hit pays one uncontended lock; an munmap of a watched range waits for
// the monitor thread to be scheduled (a wake-up, ~10 us on an idle core).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace coll {

class MemoryMonitor {
 public:
  struct Range {
    uintptr_t begin = 0;
    uintptr_t end = 0;  // exclusive
  };

  // A running monitor, or nullptr with *why_not saying why there is none
  // ("userfaultfd: Operation not permitted", ...).
  static std::unique_ptr<MemoryMonitor> start(std::string* why_not);
  ~MemoryMonitor();  // stops the thread; closing the fd drops every watch
  MemoryMonitor(const MemoryMonitor&) = delete;
  MemoryMonitor& operator=(const MemoryMonitor&) = delete;

  static constexpr const char* kName = "userfaultfd";

  // Reports from now on the unmaps, moves and removals of pages in
  // [begin, end) (page aligned). False when the kernel refuses the range
  // (see above); nothing is then watched.
  bool watch(uintptr_t begin, uintptr_t end);
  // Stops reporting [begin, end). Errors are ignored: the range may be gone.
  void unwatch(uintptr_t begin, uintptr_t end);

  // True when ranges may be waiting for drain(): a relaxed load or two, for
  // the progress loop to call on every poll.
  bool maybe_pending() const {
    return queued_.load(std::memory_order_acquire) != 0 ||
           reading_.load(std::memory_order_seq_cst) || forked();
  }
  // Moves every range reported so far into *out (appended, oldest first).
  // Returns false when some were lost (the queue overflowed, or this is a
  // forked child): the caller must then forget every range it holds. out
  // should have room reserved: drain() must not allocate under its lock, so
  // it moves at most out->capacity() - out->size() ranges and leaves the
  // rest queued (call again).
  bool drain(std::vector<Range>* out);

  // True in a child process forked after start(): nothing is reported there.
  bool forked() const;

  // Events read, for the stats and tests.
  uint64_t events() const { return events_.load(std::memory_order_relaxed); }

 private:
  MemoryMonitor(int uffd, int stop_fd);
  void run();
  void read_events();

  static constexpr size_t kQueueCapacity = 4096;

  int uffd_;
  int stop_fd_;  // an eventfd: written once, by the destructor
  uint64_t forks_at_start_ = 0;  // forked() when the count moved since
  std::thread thread_;

  std::mutex queue_mutex_;  // never held across a call that can unmap or block
  Range queue_[kQueueCapacity];
  size_t queue_head_ = 0;  // oldest queued
  std::atomic<size_t> queued_{0};
  bool overflowed_ = false;
  std::atomic<bool> reading_{false};
  std::atomic<uint64_t> events_{0};
};

}  // namespace coll
