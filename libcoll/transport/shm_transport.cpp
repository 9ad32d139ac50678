// Shared-memory backend: all ranks on one host (or, as the shm half of the
// shm+tcp transport, the peers on this rank's host).
//
// Each rank creates one POSIX shared-memory segment, "/coll-<job>-<rank>",
// holding a header (owner pid, the owner's mapping address and the table of
// registered regions, region_table.hpp) followed by the rank's window
// arena. Peers map every segment at setup; after a barrier each rank
// unlinks its own name, so nothing is left in /dev/shm even if a rank is
// killed later (collrun removes coll-<job>-* as a safety net for a kill
// during setup, and every rank, before it creates its segment, removes
// those whose owner has died: remove_orphaned_segments).
//
// The window arena. Communicators come and go, each with its own window,
// but peers map a segment only once, at setup. So the segment is created
// with the arena's full size (TransportOptions::window_arena_bytes,
// COLL_SHM_ARENA) as a sparse tmpfs file - ftruncate, no pages - and every
// peer maps all of it: address space only. alloc_window carves a
// page-aligned range out of the arena (WindowArena: first fit, merged on
// free) and reserves its pages with posix_fallocate on that range of the
// file, so a full /dev/shm is an error there, never a SIGBUS in a peer's
// copy later; free_window punches the range (FALLOC_FL_PUNCH_HOLE): its
// pages go back to the system, every mapping of them is dropped, and the
// range reads as zeros when it is handed out again. The owner keeps the
// segment's fd open for that until teardown (unlinking the name does not
// need it closed).
//
// A write looks up the rkey in the *target's* region table, checks the
// range, and copies. Regions inside the target's segment are reached
// through our mapping of it; any other registered memory of the target
// (user buffers) is reached with process_vm_writev (CMA).
//
// Ordering promise: post_write copies synchronously, and an 8-byte aligned
// write (a flag or credit) is one release store, so it becomes visible
// after every earlier write to that peer. Readers poll with acquire loads.
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/unique_fd.hpp"
#include "error.hpp"
#include "process_state.hpp"
#include "transport/host_identity.hpp"
#include "transport/region_table.hpp"
#include "transport/shm_transport.hpp"
#include "transport/transport.hpp"
#include "transport/window_arena.hpp"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14 (uapi asm-generic/mman-common.h)
#endif

namespace coll {
namespace {

constexpr uint64_t kMagic = 0x636f6c6c73686d32ULL;  // "collshm2"

struct SegmentHeader {
  uint64_t magic;
  int64_t pid;
  uint64_t base;  // where the owner mapped the segment
  uint64_t arena_offset;  // the window arena: [arena_offset, arena_offset + arena_bytes)
  uint64_t arena_bytes;
  uint64_t closed;  // set when the owner's transport goes away
  uint64_t pid_ns;  // the inode of the owner's pid namespace (its pid means nothing elsewhere)
  uint64_t cma_probe;  // written by a peer's process_vm_writev at setup (cma_works)
  RegionEntry regions[kMaxRegions];  // this rank's RegionTable
  // The CPU the owner said last it runs on (Transport::publish_cpu), -1
  // before; in a line of its own, away from what writers read per write.
  alignas(64) int64_t cpu;
};

// A process that has exited but is not yet reaped still answers kill(0).
bool is_zombie(pid_t pid) { return process_state(pid) == 'Z'; }

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

uint64_t own_pid_namespace() {
  struct stat st {};
  return stat("/proc/self/ns/pid", &st) == 0 ? uint64_t(st.st_ino) : 0;
}

// Segments left behind by ranks that died between creating theirs and the
// setup barrier after which every rank unlinks its own (a SIGKILL during
// start-up, of the rank or of a launcher whose cleanup then never ran): a
// "coll-*" segment of this user whose header names an owner in this pid
// namespace that no longer exists. Removed before this rank makes its own,
// so that leftovers of dead jobs do not pile up in /dev/shm (issue 15). A
// segment whose header is not written yet (magic 0: being created), of
// another namespace, or whose owner answers kill(0) is left alone.
void remove_orphaned_segments() {
  DIR* dir = opendir("/dev/shm");
  if (!dir) return;
  const uint64_t ns = own_pid_namespace();
  std::vector<std::string> orphans;
  while (const dirent* e = readdir(dir)) {
    if (std::strncmp(e->d_name, "coll-", 5) != 0) continue;
    const std::string name = std::string("/") + e->d_name;
    const int fd = shm_open(name.c_str(), O_RDONLY | O_NOFOLLOW, 0);
    if (fd < 0) continue;
    struct stat st {};
    SegmentHeader h{};
    const bool read = fstat(fd, &st) == 0 && st.st_uid == geteuid() &&
                      size_t(st.st_size) >= sizeof h &&
                      pread(fd, &h, offsetof(SegmentHeader, regions), 0) ==
                          ssize_t(offsetof(SegmentHeader, regions));
    close(fd);
    if (!read || h.magic != kMagic || h.pid <= 0 || ns == 0 || h.pid_ns != ns) continue;
    // (A zombie is dead too: an owner killed with its launcher moments ago
    // may not be reaped yet by whoever inherited it.)
    const pid_t owner = pid_t(h.pid);
    if ((kill(owner, 0) != 0 && errno == ESRCH) || is_zombie(owner)) orphans.push_back(name);
  }
  closedir(dir);
  for (const std::string& name : orphans) shm_unlink(name.c_str());
}

size_t page_round(size_t n) {
  const size_t page = page_size();
  return (n + page - 1) / page * page;
}

// For messages: what /dev/shm has left ("?" when statvfs fails).
std::string dev_shm_available() {
  struct statvfs st {};
  if (statvfs("/dev/shm", &st) != 0) return "?";
  return strfmt("%llu", static_cast<unsigned long long>(st.f_bavail) * st.f_frsize);
}

// An mmap'ed segment, unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, size_t n) : ptr_(p), len_(n) {}
  Mapping(Mapping&& o) noexcept : ptr_(o.ptr_), len_(o.len_) { o.ptr_ = nullptr; }
  Mapping& operator=(Mapping&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(len_, o.len_);
    return *this;
  }
  ~Mapping() {
    if (ptr_) munmap(ptr_, len_);
  }
  char* data() const { return static_cast<char*>(ptr_); }
  size_t size() const { return len_; }
  SegmentHeader* header() const { return static_cast<SegmentHeader*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  size_t len_ = 0;
};

// Our segment's name while it exists in /dev/shm; unlinked on scope exit
// (also when setup throws half-way).
class ShmName {
 public:
  ~ShmName() { unlink(); }
  void set(std::string name) { name_ = std::move(name); }
  void unlink() {
    if (!name_.empty()) shm_unlink(name_.c_str());
    name_.clear();
  }
  const std::string& str() const { return name_; }

 private:
  std::string name_;
};

// collrun starts its ranks with PR_SET_PDEATHSIG = SIGKILL, so that none
// outlives it (rank_process.cpp). Between creating its segment and
// unlinking it after the setup barrier, that signal would leave the
// segment in /dev/shm with nobody to remove it but the next job; so it is
// held back there. A launcher that dies meanwhile closes the bootstrap:
// the setup fails, the segment is unlinked on the way out, and then the
// held signal is raised, as the launcher asked (issue 15: a SIGKILL of
// collrun at any point of start-up leaves nothing behind).
class ParentDeathSignalHold {
 public:
  ParentDeathSignalHold() {
    int sig = 0;
    if (prctl(PR_GET_PDEATHSIG, &sig) != 0 || sig == 0) return;
    parent_ = getppid();
    if (prctl(PR_SET_PDEATHSIG, 0) == 0) signal_ = sig;
  }
  ParentDeathSignalHold(const ParentDeathSignalHold&) = delete;
  ParentDeathSignalHold& operator=(const ParentDeathSignalHold&) = delete;
  ~ParentDeathSignalHold() { release(); }
  void release() {
    const int sig = std::exchange(signal_, 0);
    if (sig == 0) return;
    prctl(PR_SET_PDEATHSIG, sig);
    // Reparented: the parent died while the signal was held (from now on
    // the kernel sends it).
    if (getppid() != parent_) kill(getpid(), sig);
  }

 private:
  int signal_ = 0;
  pid_t parent_ = 0;
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

struct PeerInfo {
  int64_t pid;
  char segment[128];
  char host[256];
};

class ShmTransport final : public Transport {
 public:
  // same_host: the peers to reach (mapped); empty means every rank, which
  // must then all run on this host.
  ShmTransport(Bootstrap& boot, const TransportOptions& opts, std::vector<bool> same_host)
      : rank_(boot.rank()), size_(boot.size()), same_host_(std::move(same_host)) {
    create_segment(boot.job_id(), opts.window_arena_bytes);
    table_ = std::make_unique<RegionTable>(own_.header()->regions, "shm");
    exchange_and_map(boot, opts.timeout_s);
  }

  const RegionEntry* region_entries() const { return table_->entries(); }

  const char* name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void* alloc_window(size_t bytes, size_t eager_bytes) override {
    if (bytes == 0) fail(COLL_ERR_INVALID_ARG, "shm transport: a window of 0 bytes");
    const size_t page = page_size();
    if (bytes > arena_->capacity())
      fail(COLL_ERR_NO_RESOURCES,
           "shm transport: rank %d cannot allocate a window of %zu bytes: its window arena "
           "holds %zu bytes in all (COLL_SHM_ARENA); raise COLL_SHM_ARENA",
           rank_, bytes, arena_->capacity());
    const size_t length = (bytes + page - 1) / page * page;
    std::optional<size_t> at = arena_->take(length);
    if (!at)
      fail(COLL_ERR_NO_RESOURCES,
           "shm transport: rank %d cannot allocate a window of %zu bytes (%zu with page "
           "rounding): its window arena of %zu bytes (COLL_SHM_ARENA) has %zu bytes free in "
           "%zu ranges, the largest %zu bytes, with %zu windows allocated; free communicators "
           "or raise COLL_SHM_ARENA",
           rank_, bytes, length, arena_->capacity(), arena_->free_bytes(),
           arena_->free_ranges(), arena_->largest_free(), arena_->ranges_in_use());
    const off_t file_offset = static_cast<off_t>(arena_offset_ + *at);
    // The eager part's pages are reserved now, the rest by the writers
    // (prepare_write): a full /dev/shm (or a memory limit) is an error
    // there, not a SIGBUS in whichever process first touches a page.
    const size_t eager = lazy_commit_ ? std::min(length, page_round(eager_bytes)) : length;
    if (int err = eager == 0 ? 0
                             : posix_fallocate(fd_.get(), file_offset, static_cast<off_t>(eager))) {
      release_pages(file_offset, length);  // whatever part was reserved
      arena_->give_back(*at, length);
      fail_errno(COLL_ERR_NO_RESOURCES, err,
                 "shm transport: rank %d cannot reserve %zu bytes in /dev/shm for a window of "
                 "%zu bytes (/dev/shm has %s bytes available; is /dev/shm full? df /dev/shm)",
                 rank_, length, bytes, dev_shm_available().c_str());
    }
    return own_.data() + arena_offset_ + *at;
  }

  void free_window(void* addr, size_t bytes) override {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    const auto arena = reinterpret_cast<uintptr_t>(own_.data()) + arena_offset_;
    const size_t length = page_round(bytes);
    if (addr == nullptr || bytes == 0 || a < arena || !arena_->in_use(a - arena, length))
      fail(COLL_ERR_INVALID_ARG,
           "shm transport: free_window(%p, %zu): not a window that alloc_window handed out "
           "(or freed already)",
           addr, bytes);
    if (const RegionEntry* e = live_region_overlapping(a, length))
      fail(COLL_ERR_INVALID_ARG,
           "shm transport: free_window(%p, %zu): the window is still registered (rkey 0x%x: "
           "%llu bytes at 0x%llx); dereg it first",
           addr, bytes, e->rkey.load(std::memory_order_relaxed),
           static_cast<unsigned long long>(e->length), static_cast<unsigned long long>(e->addr));
    release_pages(static_cast<off_t>(arena_offset_ + (a - arena)), length);
    arena_->give_back(a - arena, length);
  }
  bool needs_local_registration() const override { return false; }
  // A CMA write (process_vm_writev) is one copy where the slots take two,
  // but it pins the target's pages one by one, and what that costs depends
  // on the machine. Measured at np 2 on 2-core VMs, in coll_bench_mpi's
  // loop (MPI_Barrier for both libraries):
  //  - an Intel VM (2026-12-01, root 0): ring bcast 16-256 KiB 1.4-1.7x
  //    faster with it, ring allreduce 32-256 KiB 1.15-1.3x; forced ring
  //    bcast lost from 2 MiB (1.45x at 4 MiB), where the selection table
  //    takes scatter_allgather, which does not use it;
  //  - an AMD EPYC KVM guest (2026-12-03, rotating root, 4 alternating runs
  //    a setting): bcast 16-256 KiB 1.5-1.7x SLOWER with it (libcoll/Open
  //    MPI 1.02-1.06 with, 0.56-0.60 without; 256 KiB 60.6 against 39.4
  //    us), allreduce even (16 KiB-256 KiB) to 1.15x slower (512 KiB-2
  //    MiB). There CMA copies 64 KiB at 6.4 GB/s, memcpy at 17.7 GB/s.
  // So the setup times both on this machine (cma_pays) and zero-copy is
  // the default only where CMA copies 64 KiB in at most twice memcpy's
  // time: the two copies the slots take. Off too where CMA is refused
  // (Yama ptrace_scope >= 1, a seccomp profile that blocks it). Every rank
  // of the job agrees (zero-copy needs both ends). COLL_ZCOPY_THRESHOLD
  // overrides it.
  size_t default_zcopy_threshold() const override { return cma_pays_ ? size_t(16) << 10 : 0; }
  bool zero_copy_refused() const override { return !cma_works_; }
  bool cma_works() const { return cma_works_; }
  std::string describe() const override {
    if (!cma_works_) return "shm (zero-copy off: CMA refused)";
    return strfmt("shm (zero-copy %s: CMA copied 64 KiB in %.1f us here, memcpy in %.1f us)",
                  cma_pays_ ? "from 16 KiB" : "off", cma_probe_us_, memcpy_probe_us_);
  }

  bool copies_into(int peer, const void* addr, size_t length) const override {
    return peer >= 0 && peer < size_ && peer != rank_ && length > 0 &&
           kind_of(const_cast<void*>(addr), length) == kRegionInSegment;
  }

  MemoryRegion* reg_write(void* addr, size_t length) override {
    return table_->add(addr, length, kind_of(addr, length));
  }
  // shm+rdma: the same, under the NIC's rkey for this memory.
  MemoryRegion* reg_write_with_key(void* addr, size_t length, uint32_t rkey) {
    return table_->add_with_key(addr, length, kind_of(addr, length), rkey);
  }

  int dereg(MemoryRegion* mr) override { return table_->remove(mr); }
  void set_writable(MemoryRegion* mr, bool writable) override { table_->set_open(mr, writable); }

  int post_write(int peer, uint64_t context, const void* local_addr,
                 size_t length, MemoryRegion* /*mr: not needed, we copy*/,
                 int flags, uint64_t remote_addr, uint32_t rkey) override {
    Target t;
    if (!find_target(peer, remote_addr, length, rkey, &t)) return -1;
    if (t.region.kind == kRegionInSegment) {
      // Our mapping and the owner's are page aligned: alignment carries over.
      apply_write(t.at, local_addr, length);
    } else if (length > 0) {
      if (cma_write(static_cast<pid_t>(t.header->pid), local_addr, length, remote_addr) != 0)
        return -1;
    }
    if (flags & kWriteSignaled) completions_.push_back({context, peer, 0});
    return 0;
  }

  // A writer commits the pages of a peer's window it is about to write
  // into through its own mapping: MADV_POPULATE_WRITE faults them in as
  // writable now, and fails (EFAULT: "a SIGBUS would have been generated")
  // where tmpfs has no page to give, which a copy would have met as a
  // SIGBUS. Pages already there cost a page-table walk.
  // The area is moot: shm commits exactly the range.
  int prepare_write(int peer, uint64_t remote_addr, size_t length, uint32_t rkey,
                    uint64_t /*area_addr*/, size_t /*area_length*/) override {
    if (length == 0 || !lazy_commit_) return 0;
    Target t;
    if (!find_target(peer, remote_addr, length, rkey, &t)) return -1;
    if (t.region.kind != kRegionInSegment) return 0;  // process memory: its owner's own
    const uintptr_t page = page_size();
    const auto at = reinterpret_cast<uintptr_t>(t.at);
    const uintptr_t first = at & ~(page - 1), end = (at + length + page - 1) & ~(page - 1);
    while (madvise(reinterpret_cast<void*>(first), end - first, MADV_POPULATE_WRITE) != 0) {
      if (errno == EINTR) continue;
      if (errno == EFAULT) errno = ENOMEM;
      return -1;
    }
    // And reads a byte of each: on the 2-core development VM a page's first
    // access through a mapping costs about 6 us even after MADV_POPULATE_WRITE
    // (128 KiB: populate 60-100 us, then the first copy in 200-300 us against
    // 3-5; read first, the copy took 3-4 us), so it is taken here, with the
    // commit, rather than in the copy of whichever later message reaches
    // the page first (Channel::commit_slots).
    for (uintptr_t p = first; p < end; p += page)
      (void)__atomic_load_n(reinterpret_cast<const char*>(p), __ATOMIC_RELAXED);
    return 0;
  }

  // Every line: its payload, then its flag with a release store (x86 keeps
  // stores in order anyway; the release keeps the compiler from reordering
  // them and makes it hold on weaker CPUs).
  bool line_writes(int /*peer*/) const override { return true; }
  int post_lines(int peer, const void* src, size_t len, uint64_t flag, uint64_t remote_addr,
                 uint32_t rkey) override {
    constexpr size_t kLine = 64, kPayload = kLine - 8;
    const size_t lines = len == 0 ? 1 : (len + kPayload - 1) / kPayload;
    if (peer < 0 || peer >= size_ || !peers_[peer].data() || (remote_addr % kLine) != 0) {
      errno = EINVAL;
      return -1;
    }
    const Mapping& target = peers_[peer];
    SegmentHeader* h = target.header();
    RegionGrant region;
    if (check_region(h->regions, rkey, remote_addr, lines * kLine, &region) != RegionCheck::kOk ||
        region.kind != kRegionInSegment) {
      errno = EACCES;
      return -1;
    }
    char* dst = target.data() + (remote_addr - h->base);
    const char* from = static_cast<const char*>(src);
    for (size_t j = 0; j < lines; ++j, dst += kLine) {
      const size_t at = j * kPayload;
      if (at < len) std::memcpy(dst + 8, from + at, std::min(kPayload, len - at));
      __atomic_store_n(reinterpret_cast<uint64_t*>(dst), flag, __ATOMIC_RELEASE);
    }
    return 0;
  }

  int poll(Completion* out, int max) override {
    int n = 0;
    while (n < max && !completions_.empty()) {
      out[n++] = completions_.front();
      completions_.pop_front();
    }
    return n;
  }

  ~ShmTransport() override {
    // Tells peers still waiting for us that we are gone on purpose.
    if (own_.data()) __atomic_store_n(&own_.header()->closed, 1, __ATOMIC_RELEASE);
  }

  bool shares_cpu_placement() const override { return true; }
  void publish_cpu(int cpu) override {
    __atomic_store_n(&own_.header()->cpu, int64_t(cpu), __ATOMIC_RELAXED);
  }
  bool other_rank_on_cpu(int cpu) const override {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || !peers_[r].data()) continue;
      if (__atomic_load_n(&peers_[r].header()->cpu, __ATOMIC_RELAXED) == cpu) return true;
    }
    return false;
  }

  int connections() const override {
    int n = 0;
    for (int r = 0; r < size_; ++r) n += r != rank_ && peers_[r].data() != nullptr;
    return n;
  }

  void check_peer(int peer) override {
    if (peer < 0 || peer >= size_ || !peers_[peer].data()) return;  // not ours to watch
    if (__atomic_load_n(&peers_[peer].header()->closed, __ATOMIC_ACQUIRE))
      fail(COLL_ERR_PEER_LOST, "rank %d has left (it finalized or failed)", peer);
    pid_t pid = static_cast<pid_t>(pids_[peer]);
    if ((kill(pid, 0) != 0 && errno == ESRCH) || is_zombie(pid))
      fail(COLL_ERR_PEER_LOST, "rank %d (pid %d) is gone", peer, int(pid));
  }

 private:
  // Where a write of [remote_addr, remote_addr + length) into peer's
  // registered memory goes, once its region check passes: false with
  // errno EINVAL (no such peer here), EACCES (an unknown rkey, or a range
  // outside its region: like IBV_WC_REM_ACCESS_ERR, nothing is written) or
  // ESTALE (registered, but closed between the operations that use it:
  // region_table.hpp).
  struct Target {
    SegmentHeader* header = nullptr;
    RegionGrant region;
    char* at = nullptr;  // through our mapping, for a region in the segment
  };
  // Peers copy through their mapping into what lies in our arena; the
  // header (the region table) is never theirs to write.
  RegionKind kind_of(void* addr, size_t length) const {
    auto a = reinterpret_cast<uintptr_t>(addr);
    auto arena = reinterpret_cast<uintptr_t>(own_.data()) + arena_offset_;
    const size_t arena_bytes = own_.size() - arena_offset_;
    bool inside = a >= arena && length <= arena_bytes && a - arena <= arena_bytes - length;
    return inside ? kRegionInSegment : kRegionProcessMemory;
  }

  bool find_target(int peer, uint64_t remote_addr, size_t length, uint32_t rkey, Target* t) {
    if (peer < 0 || peer >= size_ || !peers_[peer].data()) {
      errno = EINVAL;
      return false;
    }
    const Mapping& target = peers_[peer];
    t->header = target.header();
    const RegionCheck check = check_region(t->header->regions, rkey, remote_addr, length,
                                           &t->region);
    if (check != RegionCheck::kOk) {
      errno = check == RegionCheck::kClosed ? ESTALE : EACCES;
      return false;
    }
    if (t->region.kind == kRegionInSegment) t->at = target.data() + (remote_addr - t->header->base);
    return true;
  }

  void create_segment(const std::string& job, size_t arena_bytes) {
    remove_orphaned_segments();
    std::string name = strfmt("/coll-%s-%d", job.c_str(), rank_);
    if (name.size() >= sizeof(PeerInfo::segment))
      fail(COLL_ERR_INVALID_ARG, "job id too long for a segment name: %s", job.c_str());
    const size_t header = page_round(sizeof(SegmentHeader));
    const size_t arena = page_round(arena_bytes);
    const size_t total = header + arena;
    if (arena < arena_bytes || total < arena)
      fail(COLL_ERR_INVALID_ARG, "shm transport: a window arena of %zu bytes (COLL_SHM_ARENA)",
           arena_bytes);
    fd_.reset(shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
    if (!fd_) fail_errno(COLL_ERR_NO_RESOURCES, errno, "shm_open(%s)", name.c_str());
    own_name_.set(name);
    // The arena's size, but no pages: alloc_window reserves them.
    if (ftruncate(fd_.get(), static_cast<off_t>(total)) != 0)
      fail_errno(COLL_ERR_NO_RESOURCES, errno,
                 "shm transport: cannot size %s to %zu bytes (a window arena of %zu bytes: "
                 "COLL_SHM_ARENA)",
                 name.c_str(), total, arena);
    // The header's pages are reserved now: a full /dev/shm must be an error
    // here, not a SIGBUS later.
    if (int err = posix_fallocate(fd_.get(), 0, static_cast<off_t>(header)))
      fail_errno(COLL_ERR_NO_RESOURCES, err,
                 "cannot reserve %zu bytes in /dev/shm for %s (/dev/shm has %s bytes "
                 "available; is /dev/shm full?)",
                 header, name.c_str(), dev_shm_available().c_str());
    void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_.get(),
                   0);
    if (p == MAP_FAILED)
      fail_errno(COLL_ERR_NO_RESOURCES, errno,
                 "shm transport: mmap of %zu bytes (a window arena of %zu bytes: "
                 "COLL_SHM_ARENA; ulimit -v?)",
                 total, arena);
    own_ = Mapping(p, total);
    // Writers commit the windows' lazy parts with MADV_POPULATE_WRITE
    // (Linux 5.14); a kernel without it (EINVAL) gets every window
    // reserved whole at allocation, as before. Asked of a page that is
    // there already, so it costs nothing. Every rank of the host runs this
    // kernel, so owners and writers agree.
    lazy_commit_ = madvise(p, page_size(), MADV_POPULATE_WRITE) == 0;
    arena_offset_ = header;
    arena_ = std::make_unique<WindowArena>(arena);
    SegmentHeader* h = own_.header();
    h->pid = getpid();
    h->pid_ns = own_pid_namespace();
    h->base = reinterpret_cast<uintptr_t>(p);
    h->arena_offset = header;
    h->arena_bytes = arena;
    h->cpu = -1;
    // The region table is cleared by RegionTable's constructor, after this.
    __atomic_store_n(&h->magic, kMagic, __ATOMIC_RELEASE);
  }

  // Gives the pages of [offset, offset + length) of the segment back to the
  // system: the range reads as zeros afterwards, in every mapping.
  void release_pages(off_t offset, size_t length) {
    if (fallocate(fd_.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, offset,
                  static_cast<off_t>(length)) == 0)
      return;
    // A kernel without hole punching on tmpfs (before 3.5): the pages stay
    // reserved, and are zeroed by hand so that the range reads as zeros.
    std::memset(own_.data() + offset, 0, length);
  }

  // A live registration of ours that overlaps [a, a + length), or null.
  const RegionEntry* live_region_overlapping(uintptr_t a, size_t length) const {
    const RegionEntry* entries = table_->entries();
    for (uint32_t i = 0; i < kMaxRegions; ++i) {
      const RegionEntry& e = entries[i];
      if (e.rkey.load(std::memory_order_relaxed) == 0) continue;
      if (e.addr < a + length && a < e.addr + e.length) return &e;
    }
    return nullptr;
  }

  void exchange_and_map(Bootstrap& boot, double timeout_s) {
    PeerInfo mine{};
    mine.pid = getpid();
    std::snprintf(mine.segment, sizeof mine.segment, "%s", own_name_.str().c_str());
    std::snprintf(mine.host, sizeof mine.host, "%s", host_identity().c_str());
    auto all = boot.allgather(std::string(reinterpret_cast<char*>(&mine), sizeof mine),
                              timeout_s);
    peers_.resize(size_);
    pids_.resize(size_);
    for (int r = 0; r < size_; ++r) {
      if (all[r].size() != sizeof(PeerInfo))
        fail(COLL_ERR_INTERNAL, "shm setup: rank %d sent %zu bytes, expected %zu", r,
             all[r].size(), sizeof(PeerInfo));
      PeerInfo info;
      std::memcpy(&info, all[r].data(), sizeof info);
      info.host[sizeof info.host - 1] = 0;
      info.segment[sizeof info.segment - 1] = 0;
      if (same_host_.empty() && std::strcmp(info.host, mine.host) != 0)
        fail(COLL_ERR_INVALID_ARG,
             "COLL_TRANSPORT=shm needs all ranks on one host, but rank %d runs on "
             "%s and rank %d on %s; use COLL_TRANSPORT=auto (shm+tcp), tcp or rdma",
             rank_, mine.host, r, info.host);
      pids_[r] = info.pid;
      if (r == rank_)
        peers_[r] = map_self();
      else if (same_host_.empty() || same_host_[size_t(r)])
        peers_[r] = map_peer(info.segment);
    }
    // Can this rank write into its peers' memory (process_vm_writev)? Yama
    // (ptrace_scope 1: only into descendants) and container seccomp
    // profiles refuse it; then nobody goes zero-copy. One probe, into the
    // first peer of the host's header; the allgather is also the barrier:
    // everyone has mapped every segment, so the names are no longer needed.
    bool cma = true;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || !peers_[r].data()) continue;
      const uint64_t one = 1;
      const uint64_t at = peers_[r].header()->base + offsetof(SegmentHeader, cma_probe);
      cma = cma_write(static_cast<pid_t>(pids_[r]), &one, sizeof one, at) == 0;
      break;
    }
    // "0": refused; "1": works, does not pay here; "2": works and pays.
    const bool pays = cma && cma_pays_here();
    cma_works_ = true;
    cma_pays_ = true;
    for (const std::string& verdict : boot.allgather(pays ? "2" : cma ? "1" : "0", timeout_s)) {
      cma_works_ = cma_works_ && (verdict == "1" || verdict == "2");
      cma_pays_ = cma_pays_ && verdict == "2";
    }
    own_name_.unlink();
    death_signal_hold_.release();
  }

  Mapping map_self() {
    // A second mapping of our own segment keeps post_write uniform for
    // writes to ourselves.
    return map_segment(fd_.get(), own_name_.str().c_str());
  }

  Mapping map_peer(const char* segment) {
    Fd fd(shm_open(segment, O_RDWR, 0));
    if (fd.get() < 0) fail_errno(COLL_ERR_PEER_LOST, errno, "shm_open(%s) of a peer", segment);
    return map_segment(fd.get(), segment);
  }

  // All of it, the whole window arena included: address space only, the
  // pages are the owner's to reserve.
  Mapping map_segment(int fd, const char* segment) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(SegmentHeader))
      fail(COLL_ERR_INTERNAL, "peer segment %s is too small", segment);
    void* p = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED)
      fail_errno(COLL_ERR_NO_RESOURCES, errno,
                 "mmap of %s (%lld bytes: the segment and window arena of a peer, "
                 "COLL_SHM_ARENA; ulimit -v?)",
                 segment, static_cast<long long>(st.st_size));
    Mapping m(p, static_cast<size_t>(st.st_size));
    if (__atomic_load_n(&m.header()->magic, __ATOMIC_ACQUIRE) != kMagic)
      fail(COLL_ERR_INTERNAL, "peer segment %s is not initialised", segment);
    return m;
  }

  // Times a CMA copy of 64 KiB (into this process: the same kernel path as
  // into a peer) against memcpy's, the best of 8 each, alternating so that
  // a change of the machine's pace touches both; about 0.1 ms in all.
  // Whether zero-copy pays (default_zcopy_threshold).
  bool cma_pays_here() {
    constexpr size_t kBytes = size_t(64) << 10;
    constexpr int kTries = 8;
    std::vector<char> from(kBytes, 1), to(kBytes, 2);
    using Clock = std::chrono::steady_clock;
    auto best = Clock::duration::max();
    auto best_memcpy = Clock::duration::max();
    for (int i = 0; i < kTries; ++i) {
      auto start = Clock::now();
      if (cma_write(getpid(), from.data(), kBytes, reinterpret_cast<uint64_t>(to.data())) != 0)
        return false;
      auto middle = Clock::now();
      std::memcpy(to.data(), from.data(), kBytes);
      asm volatile("" : : "r"(to.data()) : "memory");  // the copy is used
      best = std::min(best, middle - start);
      best_memcpy = std::min(best_memcpy, Clock::now() - middle);
    }
    cma_probe_us_ = std::chrono::duration<double, std::micro>(best).count();
    memcpy_probe_us_ = std::chrono::duration<double, std::micro>(best_memcpy).count();
    return best <= 2 * best_memcpy;
  }

  int cma_write(pid_t pid, const void* src, size_t length, uint64_t remote_addr) {
    struct iovec local{const_cast<void*>(src), length};
    struct iovec remote{reinterpret_cast<void*>(remote_addr), length};
    while (local.iov_len > 0) {
      ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
      if (n < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      if (n == 0) {
        errno = EIO;
        return -1;
      }
      local.iov_base = static_cast<char*>(local.iov_base) + n;
      local.iov_len -= static_cast<size_t>(n);
      remote.iov_base = static_cast<char*>(remote.iov_base) + n;
      remote.iov_len -= static_cast<size_t>(n);
    }
    return 0;
  }

  int rank_;
  int size_;
  std::vector<bool> same_host_;
  bool cma_works_ = false;  // on every rank of the job (exchange_and_map)
  bool cma_pays_ = false;   // and is fast enough on every rank's machine (cma_pays_here)
  double cma_probe_us_ = 0, memcpy_probe_us_ = 0;  // this rank's probe
  // Before own_name_: on a failed setup the name is unlinked before a held
  // signal goes off.
  ParentDeathSignalHold death_signal_hold_;
  ShmName own_name_;
  UniqueFd fd_;  // our segment, open until teardown: alloc_window and free_window use it
  Mapping own_;
  size_t arena_offset_ = 0;  // where the arena starts in own_
  std::unique_ptr<WindowArena> arena_;
  bool lazy_commit_ = false;  // windows are committed in part, by their writers (prepare_write)
  std::unique_ptr<RegionTable> table_;  // in own_'s header
  std::vector<Mapping> peers_;
  std::vector<int64_t> pids_;
  std::deque<Completion> completions_;
};

}  // namespace

std::unique_ptr<Transport> make_shm_transport(Bootstrap& boot,
                                              const TransportOptions& opts) {
  return std::make_unique<ShmTransport>(boot, opts, std::vector<bool>());
}

ShmPart make_shm_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                const std::vector<bool>& same_host) {
  if (same_host.size() != size_t(boot.size()))
    fail(COLL_ERR_INTERNAL, "shm part: %zu host flags for %d ranks", same_host.size(),
         boot.size());
  auto shm = std::make_unique<ShmTransport>(boot, opts, same_host);
  ShmPart part;
  part.regions = shm->region_entries();
  part.cma_works = shm->cma_works();
  ShmTransport* raw = shm.get();
  part.reg_write_with_key = [raw](void* addr, size_t length, uint32_t rkey) {
    return raw->reg_write_with_key(addr, length, rkey);
  };
  part.transport = std::move(shm);
  return part;
}

}  // namespace coll
