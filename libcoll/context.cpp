#include "context.hpp"

#include <sys/mman.h>
#include <sys/resource.h>

#include <sched.h>
#include <signal.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "channel.hpp"
#include "communicator.hpp"
#include "datatype.hpp"
#include "error.hpp"
#include "fault_injection.hpp"
#include "operation.hpp"
#include "slot_sizing.hpp"

namespace coll {
namespace {

constexpr size_t kUnpinnedCacheBytes = size_t(1) << 40;

// Serializes every call into a transport that is not thread-safe
// (transport.hpp), when threads meet inside libcoll. A decorator, so that
// neither the channel nor the backends know about threads; single-threaded
// processes do not pay for it. It forwards every virtual of Transport: a
// new one needs its line here, or the base's default runs (post_message's
// default is two post_writes: correct, slower on tcp).
class LockedTransport final : public Transport {
 public:
  explicit LockedTransport(std::unique_ptr<Transport> inner) : t_(std::move(inner)) {}
  const char* name() const override { return t_->name(); }
  std::string describe() const override { return t_->describe(); }
  int rank() const override { return t_->rank(); }
  int size() const override { return t_->size(); }
  void* alloc_window(size_t bytes, size_t eager_bytes) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->alloc_window(bytes, eager_bytes);
  }
  void free_window(void* addr, size_t bytes) override {
    std::lock_guard<std::mutex> l(m_);
    t_->free_window(addr, bytes);
  }
  MemoryRegion* reg_write(void* addr, size_t length) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->reg_write(addr, length);
  }
  int dereg(MemoryRegion* mr) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->dereg(mr);
  }
  void set_writable(MemoryRegion* mr, bool writable) override {
    std::lock_guard<std::mutex> l(m_);
    t_->set_writable(mr, writable);
  }
  int post_write(int peer, uint64_t context, const void* local_addr, size_t length,
                 MemoryRegion* mr, int flags, uint64_t remote_addr, uint32_t rkey) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->post_write(peer, context, local_addr, length, mr, flags, remote_addr, rkey);
  }
  int post_message(int peer, const void* src, size_t length, uint64_t remote_addr, uint64_t flag,
                   uint64_t flag_addr, uint32_t rkey) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->post_message(peer, src, length, remote_addr, flag, flag_addr, rkey);
  }
  int prepare_write(int peer, uint64_t remote_addr, size_t length, uint32_t rkey,
                    uint64_t area_addr, size_t area_length) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->prepare_write(peer, remote_addr, length, rkey, area_addr, area_length);
  }
  void forget_window(int peer, uint32_t rkey) override {
    std::lock_guard<std::mutex> l(m_);
    t_->forget_window(peer, rkey);
  }
  uint64_t internal_registrations() const override {
    std::lock_guard<std::mutex> l(m_);
    return t_->internal_registrations();
  }
  uint64_t pinned_bytes() const override {
    std::lock_guard<std::mutex> l(m_);
    return t_->pinned_bytes();
  }
  bool line_writes(int peer) const override { return t_->line_writes(peer); }
  int post_lines(int peer, const void* src, size_t len, uint64_t flag, uint64_t remote_addr,
                 uint32_t rkey) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->post_lines(peer, src, len, flag, remote_addr, rkey);
  }
  int poll(Completion* out, int max) override {
    std::lock_guard<std::mutex> l(m_);
    return t_->poll(out, max);
  }
  // The placement words are single atomic loads and stores in shared
  // memory (wait_policy.hpp): no lock.
  bool shares_cpu_placement() const override { return t_->shares_cpu_placement(); }
  void publish_cpu(int cpu) override { t_->publish_cpu(cpu); }
  bool other_rank_on_cpu(int cpu) const override { return t_->other_rank_on_cpu(cpu); }
  bool needs_local_registration() const override { return t_->needs_local_registration(); }
  int connections() const override {
    std::lock_guard<std::mutex> l(m_);
    return t_->connections();
  }
  uint64_t network_bytes() const override {
    std::lock_guard<std::mutex> l(m_);
    return t_->network_bytes();
  }
  size_t default_zcopy_threshold() const override { return t_->default_zcopy_threshold(); }
  bool zero_copy_refused() const override { return t_->zero_copy_refused(); }
  bool direct_writes_like_window() const override { return t_->direct_writes_like_window(); }
  bool direct_writes_like_window_among(const std::vector<int>& ranks) const override {
    return t_->direct_writes_like_window_among(ranks);
  }
  bool copies_into(int peer, const void* addr, size_t length) const override {
    return t_->copies_into(peer, addr, length);  // reads what setup fixed: no lock
  }
  void check_peer(int peer) override {
    std::lock_guard<std::mutex> l(m_);
    t_->check_peer(peer);
  }

 private:
  std::unique_ptr<Transport> t_;
  mutable std::mutex m_;  // mutable: connections() is a const call that locks too
};

using Clock = std::chrono::steady_clock;

}  // namespace

// One wait: its passes, its clock (read every 16th pass), and its
// WaitPolicy, which decides between passes whether to spin, yield or nap
// (wait_policy.hpp: why it yields so rarely).
struct Context::Pacing {
  Pacing(const WaitPolicyParams& params, RankPlacement* placement);
  WaitPolicy policy;
  bool started = false;  // the clock fields are set
  uint64_t pass = 0;
  uint64_t epoch = ~uint64_t(0);
  Clock::time_point last_progress;
  Clock::time_point next_peer_check;
  int left_peer = -1;  // the awaited peer, whose `left` notice the last peer check saw
  uint64_t dumps_seen;  // g_dump_requests when this wait last printed (or began)
  bool dumped = false;      // COLL_DEBUG_DUMP's print of this wait is done
};

namespace {
std::atomic<uint64_t> g_contexts{0};

// The flight recorder's signal (COLL_DUMP_SIGNAL). The handler only counts
// the request: the state it would print changes under the thread it
// interrupted, so the waits print it themselves at their next check
// (Context::check_stalled, within ~10 ms). A rank with no wait inside
// libcoll says so from the handler, with write(2) of a line made at
// coll_init, and so does a wait that ended before a check saw the request
// (Context::wait), so that every rank signalled answers.
std::atomic<uint64_t> g_dump_requests{0};
std::atomic<int> g_waiting{0};  // threads inside Context::wait
char g_idle_line[160];
size_t g_idle_length = 0;
bool g_dump_handler = false;  // ours is installed

void on_dump_signal(int) {
  const int saved = errno;
  g_dump_requests.fetch_add(1, std::memory_order_relaxed);
  if (g_waiting.load(std::memory_order_relaxed) == 0)
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, g_idle_line, g_idle_length);
  errno = saved;
}

}  // namespace

// A dump request from here on is this wait's to answer.
Context::Pacing::Pacing(const WaitPolicyParams& params, RankPlacement* placement)
    : policy(params, placement), dumps_seen(g_dump_requests.load(std::memory_order_relaxed)) {}

namespace {
void install_dump_handler(int rank) {
  struct sigaction old {};
  if (::sigaction(SIGUSR1, nullptr, &old) != 0) return;
  if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;  // the application's
  const int n = std::snprintf(g_idle_line, sizeof g_idle_line,
                              "libcoll: rank %d (pid %d): SIGUSR1: no wait inside libcoll (between "
                              "calls, or polling with coll_test)\n",
                              rank, int(::getpid()));
  g_idle_length = n > 0 ? std::min(size_t(n), sizeof g_idle_line - 1) : 0;
  struct sigaction sa {};
  sa.sa_handler = on_dump_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  g_dump_handler = ::sigaction(SIGUSR1, &sa, nullptr) == 0;
}

void remove_dump_handler() {
  if (!g_dump_handler) return;
  struct sigaction cur {};
  // Put back the default only where the handler is still ours.
  if (::sigaction(SIGUSR1, nullptr, &cur) == 0 && !(cur.sa_flags & SA_SIGINFO) &&
      cur.sa_handler == on_dump_signal) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGUSR1, &dfl, nullptr);
  }
  g_dump_handler = false;
}
}  // namespace

// RDMA pins the windows too. Where RLIMIT_MEMLOCK is small (`ulimit -l 64`
// is a common default) the default slots would not even let coll_init
// register the world's window: they shrink so that the window and the bounce
// buffer (Channel::bounce) take at most half the limit, the rest left to
// user buffers and further communicators. Ranks with the same limit get the
// same size; ranks whose sizes differ are refused at the window exchange.
// Never below 1 KiB (then registration fails, naming `ulimit -l`), never
// above what COLL_SLOT_SIZE's default gives.
size_t Context::slots_for_memlock(size_t configured, int num_slots, int nranks) {
  RegistrationCache::default_max_pinned_bytes();  // raises the soft limit to the hard one
  rlimit limit{};
  if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return configured;
  const size_t budget = size_t(limit.rlim_cur) / 2;
  const size_t n = size_t(nranks), slots = size_t(num_slots);
  const size_t fixed = n * (2 * WindowLayout::kLineBytes +
                            slots * WindowLayout::kLinesPerSlot * WindowLayout::kLineBytes);
  const size_t fitting = budget > fixed ? (budget - fixed) / (slots * (n + 1)) / 64 * 64 : 0;
  return std::min(configured, std::max<size_t>(1024, fitting));
}

Context::Context(std::unique_ptr<Bootstrap> boot, const Config& config, int thread_level)
    : serial_(++g_contexts),
      config_(config),
      thread_level_(thread_level),
      locking_(thread_level == COLL_THREAD_MULTIPLE || config.async_progress),
      boot_(std::move(boot)) {
  for (int c = 0; c < kCollCount; ++c) {
    const CollectiveInfo& info = collective_info(Coll(c));
    const std::string name = env_string(info.knob);
    if (!name.empty() && name != "auto") forced_[c] = &find_algorithm(Coll(c), name);
  }
  select_reduce_kernels(config_.reduce_kernels);

  host_ = gather_host_map(*boot_, config_.timeout_s);
  // A bad COLL_TUNING_FILE fails coll_init, not the first collective. The
  // job-wide oversubscription (alike at every rank) picks the rules.
  load_selection(host_.any_host_oversubscribed);
  // The slots of every window: grown where ranks outnumber CPUs, cut where
  // /dev/shm is too small for them (slot_sizing.hpp), alike on every rank.
  SlotInputs slot_inputs;
  slot_inputs.slot_bytes = config_.slot_bytes;
  slot_inputs.num_slots = config_.num_slots;
  slot_inputs.slot_bytes_set = !env_string("COLL_SLOT_SIZE").empty();
  slot_inputs.num_slots_set = !env_string("COLL_NUM_SLOTS").empty();
  slot_inputs.nranks = boot_->size();
  slot_inputs.oversubscribed = host_.any_host_oversubscribed;
  slot_inputs.windows_in_shm = config_.transport != "tcp" && config_.transport != "rdma";
  slot_inputs.shm_bytes_per_rank = host_.shm_bytes_per_rank;
  const SlotChoice slot_choice = choose_slots(slot_inputs);
  config_.slot_bytes = slot_choice.slot_bytes;
  config_.num_slots = slot_choice.num_slots;
  WindowLayout layout;
  layout.slot_bytes = config_.slot_bytes;
  layout.num_slots = config_.num_slots;
  layout.nranks = boot_->size();
  TransportOptions topts;
  topts.window_arena_bytes = config_.shm_arena_bytes.value_or(
      default_window_arena_bytes(layout.window_bytes(), config_.slot_bytes / Config{}.slot_bytes));
  topts.timeout_s = config_.timeout_s;
  transport_ = make_transport(config_.transport, *boot_, topts, host_.hosts);
  if (locking_) transport_ = std::make_unique<LockedTransport>(std::move(transport_));
  Transport& t = *transport_;
  if (t.needs_local_registration() && env_string("COLL_SLOT_SIZE").empty())
    layout.slot_bytes = config_.slot_bytes =
        slots_for_memlock(config_.slot_bytes, config_.num_slots, boot_->size());
  // Only transports that pin pages (RDMA) are bounded by the locked-memory
  // limit (0: derived from RLIMIT_MEMLOCK); a shm or tcp registration is a
  // table entry, and runs out of entries (NO_RESOURCES: evict and retry).
  const size_t max_pinned = t.needs_local_registration() ? 0 : kUnpinnedCacheBytes;
  std::unique_ptr<MemoryMonitor> monitor;
  std::string no_monitor = "COLL_REGCACHE_MONITOR=none";
  if (!config_.regcache) no_monitor = "COLL_REGCACHE=0";
  if (config_.regcache && config_.regcache_monitor != "none") {
    monitor = MemoryMonitor::start(&no_monitor);
    if (!monitor && config_.regcache_monitor == "userfaultfd")
      fail(COLL_ERR_NO_RESOURCES, "COLL_REGCACHE_MONITOR=userfaultfd: %s", no_monitor.c_str());
  }
  cache_ = std::make_unique<RegistrationCache>(
      [&t](void* addr, size_t len) { return t.reg_write(addr, len); },
      [&t](MemoryRegion* mr) { return t.dereg(mr); }, max_pinned, config_.regcache,
      RegistrationCache::Validation::kAuto, std::move(monitor), config_.regcache_verify);
  // Exposures last one operation: a cached buffer refuses writes between
  // the operations that use it (a no-op on RDMA; shm+rdma closes it to the
  // peers on the host).
  cache_->set_writable_fn([&t](MemoryRegion* mr, bool writable) { t.set_writable(mr, writable); });
  // Ranks that outnumber the cores of their host must not spin: the peer a
  // rank waits for may need its core (wait_policy.hpp).
  const bool oversubscribed = host_.local_ranks > host_.local_cpus;
  wait_params_.oversubscribed = oversubscribed;
  wait_params_.spin_polls = config_.spin_polls.value_or(oversubscribed ? 0 : 64);
  if (t.shares_cpu_placement()) placement_ = std::make_unique<TransportPlacement>(t);

  // The world's window is the one traded through the bootstrap; every other
  // communicator trades its window over its parent.
  Communicator::Window w = Communicator::make_window(*this, boot_->size());
  RemoteRegion mine;
  mine.addr = reinterpret_cast<uintptr_t>(w.mr->addr);
  mine.length = w.mr->length;
  mine.rkey = w.mr->rkey;
  std::vector<std::string> all;
  try {
    all = boot_->allgather(std::string(reinterpret_cast<char*>(&mine), sizeof mine),
                           config_.timeout_s);
  } catch (...) {
    t.dereg(w.mr);
    t.free_window(w.memory, w.bytes);
    throw;
  }
  std::vector<RemoteRegion> peers(all.size());
  std::vector<int> group(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(RemoteRegion))
      fail(COLL_ERR_INTERNAL, "window exchange: rank %zu sent %zu bytes", r, all[r].size());
    std::memcpy(&peers[r], all[r].data(), sizeof(RemoteRegion));
    group[r] = int(r);
  }
  // Every rank computes offsets in its peers' windows from its own layout:
  // the layouts must agree, and the window's size tells.
  for (size_t r = 0; r < peers.size(); ++r) {
    if (peers[r].length != mine.length) {
      t.dereg(w.mr);
      t.free_window(w.memory, w.bytes);
      fail(COLL_ERR_INVALID_ARG,
           "rank %zu's window is %llu bytes, this rank's (%d) %llu: the ranks disagree on "
           "COLL_SLOT_SIZE or COLL_NUM_SLOTS (or, on RDMA, on the locked-memory limit that "
           "sizes the slots when COLL_SLOT_SIZE is unset)",
           r, static_cast<unsigned long long>(peers[r].length), boot_->rank(),
           static_cast<unsigned long long>(mine.length));
    }
  }
  world_ = std::make_unique<Communicator>(*this, next_comm_id(), std::move(group), boot_->rank(), w.layout,
                                          w.memory, w.mr, std::move(peers));
  // No rank writes into a window before every window is registered.
  boot_->barrier(config_.timeout_s);
  world_->build_hierarchy();
  // Armed only now: the calls it counts are the application's (and the
  // internal ones it makes), not coll_init's own exchanges.
  arm_fault(parse_fault_plan(config_.fault_inject), boot_->rank());
  if (config_.dump_signal) install_dump_handler(boot_->rank());
  if (config_.async_progress) progress_thread_ = std::thread([this] { progress_thread_main(); });
  if (config_.debug)
    std::fprintf(stderr,
                 "libcoll: rank %d of %d: bootstrap %s, transport %s, slots %d x %zu B, "
                 "reduce kernels %s, %d ranks on %d cpus of this host: %s, threads %s%s\n",
                 boot_->rank(), boot_->size(), boot_->name(), transport_->describe().c_str(),
                 layout.num_slots, layout.slot_bytes, reduce_kernels_name(), host_.local_ranks,
                 host_.local_cpus,
                 oversubscribed ? "oversubscribed, waits yield at once"
                 : placement_   ? "waits spin, and yield when a rank of ours shares the CPU"
                                : "waits spin first",
                 thread_level_ == COLL_THREAD_MULTIPLE ? "multiple" : "single/funneled/serialized",
                 config_.async_progress ? ", progress thread" : "");
  if (config_.debug && boot_->rank() == 0)
    std::fprintf(stderr, "libcoll: rank 0: %s\n",
                 describe_slot_choice(slot_inputs, slot_choice, host_.shm_host_bytes,
                                      host_.shm_host_ranks)
                     .c_str());
  if (config_.debug) {
    // Said once: what makes reuse safe here, and what caps zero-copy.
    const bool pins = t.needs_local_registration();
    const std::string detector =
        cache_->validation() == RegistrationCache::Validation::kMonitor
            ? std::string(cache_->monitor_name())
            : strfmt("%s (no memory monitor: %s)", cache_->monitor_name(), no_monitor.c_str());
    rlimit memlock{};
    const bool unlimited =
        getrlimit(RLIMIT_MEMLOCK, &memlock) == 0 && memlock.rlim_cur == RLIM_INFINITY;
    std::string limit = "registrations pin nothing on this transport";
    if (pins && unlimited)
      limit = strfmt("user buffers pinned up to %zu bytes at once (RLIMIT_MEMLOCK unlimited)",
                     cache_->max_pinned_bytes());
    else if (pins)
      limit = strfmt("the locked-memory limit caps zero-copy: user buffers pinned up to %zu "
                     "bytes at once, calls on buffers over %zu bytes go through the windows "
                     "(%s)",
                     cache_->max_pinned_bytes(), cache_->max_pinned_bytes() / 4,
                     describe_memlock_limit().c_str());
    std::fprintf(stderr, "libcoll: rank %d: registration cache %s, freed memory detected by %s; %s\n",
                 boot_->rank(), config_.regcache ? "on" : "off", detector.c_str(), limit.c_str());
  }
}

Context::~Context() { finalize(); }

void Context::finalize() noexcept {
  disarm_fault();
  remove_dump_handler();
  if (progress_thread_.joinable()) {
    stop_progress_ = true;
    progress_thread_.join();
  }
  // Peers may still write into our windows (a credit after their last
  // message) until they are done: windows go away only after every rank
  // has seen all its writes complete. A failed communicator skips the
  // handshake, whose peers may be gone; its writes fail harmlessly.
  //
  // The bootstrap barrier is skipped after a failure (a peer may be stuck,
  // and the barrier would wait for it), except a death where the bootstrap
  // ends such a barrier promptly (Bootstrap::barrier_survives_deaths:
  // collrun completes it among the living under --enable-recovery, or
  // fails it at once), and without the barrier a
  // survivor that finishes first would tear down its windows while another
  // still completes their last collective (a credit written into a
  // deregistered window, a transport seen closed mid-call).
  const bool after_death = boot_->barrier_survives_deaths();
  auto allows_barrier = [after_death](int status) {
    return status == 0 ||
           (after_death && (status == COLL_ERR_PEER_LOST || status == COLL_ERR_REVOKED));
  };
  bool all_ok = world_ && allows_barrier(world_->failed_status());
  std::vector<Communicator*> every;
  if (world_) every.push_back(world_.get());
  for (auto& c : comms_) every.push_back(c.get());
  for (Communicator* c : every) {
    if (c->failed_status()) continue;
    try {
      auto op = c->make_internal("finalize", [](Channel& ch) { return ch.quiesce(); });
      {
        std::unique_lock<std::mutex> l(c->progress_mutex(), std::defer_lock);
        if (locking_) l.lock();
        c->start(*op);
      }
      wait(*op);
      if (!allows_barrier(op->status)) all_ok = false;
    } catch (const Error& e) {
      if (!allows_barrier(e.status())) all_ok = false;
    }
  }
  for (Communicator* c : every)
    if (!allows_barrier(c->failed_status())) all_ok = false;
  if (all_ok) {
    try {
      boot_->barrier(config_.timeout_s);
    } catch (const Error&) {
      // Finalize goes on: nothing more can be done for a peer that is gone.
    }
  }
  if (config_.debug && world_) {
    // After the barrier: every peer's writes into our windows are in.
    for (Communicator* c : every) {
      const coll_resource_stats_t s = c->resource_stats();
      std::fprintf(stderr,
                   "libcoll: rank %d: communicator %llu of %d ranks: window %llu B, %llu B "
                   "resident; slots committed at %u peers (%llu B); process: %u connections, "
                   "%llu registrations; %llu messages received placed\n",
                   boot_->rank(), static_cast<unsigned long long>(c->id()), c->size(),
                   static_cast<unsigned long long>(s.window_bytes),
                   static_cast<unsigned long long>(s.window_resident_bytes), s.slot_peers,
                   static_cast<unsigned long long>(s.slots_committed_bytes), s.connections,
                   static_cast<unsigned long long>(s.registrations),
                   static_cast<unsigned long long>(c->channel().placed_received()));
    }
  }
  comms_.clear();
  world_.reset();
  cache_.reset();  // rdma_dereg_mr(3): every region before the PD goes
  // coll_mem_alloc memory not freed stays, as ordinary private memory with
  // its contents, at its address: a program may read its results there
  // after finalize (MPI_Alloc_mem's memory, through the shim, after
  // MPI_Finalize). Copied out before the transport unmaps the segment,
  // moved back to the address after.
  struct Kept {
    void* addr;
    void* copy;
    size_t bytes;
  };
  std::vector<Kept> kept;
  for (const auto& [addr, bytes] : mem_) {
    void* copy = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (copy == MAP_FAILED) continue;  // no room for a copy: it goes with the segment
    std::memcpy(copy, addr, bytes);
    kept.push_back({addr, copy, bytes});
  }
  mem_.clear();
  transport_.reset();
  for (const Kept& k : kept)
    (void)mremap(k.copy, k.bytes, k.bytes, MREMAP_MAYMOVE | MREMAP_FIXED, k.addr);
  // Last: this rank's windows and segments are gone when its launcher
  // hears that it finalized.
  boot_->leave();
}

void* Context::mem_alloc(size_t bytes) {
  if (bytes == 0) fail(COLL_ERR_INVALID_ARG, "coll_mem_alloc: 0 bytes");
  std::lock_guard<std::mutex> l(mem_mutex_);
  // All of it committed now: a full /dev/shm is this call's error, not a
  // SIGBUS at a peer's first write.
  void* p = transport_->alloc_window(bytes, bytes);
  try {
    // In /dev/shm (shm and the hybrids' host part), keep room for what the
    // world's windows may still commit on this host: their slots are
    // committed by the writers at first use, and a full /dev/shm would
    // fail the collectives of every rank here, not this allocation.
    if (host_.local_ranks > 1 && transport_->copies_into(host_peer(), p, bytes)) {
      uint64_t total = 0, available = 0;
      const uint64_t reserve =
          uint64_t(world_->window_bytes()) * uint64_t(host_.local_ranks);
      if (dev_shm_space(&total, &available) && available < reserve)
        fail(COLL_ERR_NO_RESOURCES,
             "coll_mem_alloc: %zu bytes would leave /dev/shm %llu bytes available, less than "
             "the %llu bytes this host's world windows may still commit (df /dev/shm; free "
             "coll_mem_alloc memory, or give /dev/shm more room)",
             bytes, static_cast<unsigned long long>(available),
             static_cast<unsigned long long>(reserve));
    }
    cache_->register_explicit(p, bytes);
  } catch (...) {
    transport_->free_window(p, bytes);
    throw;
  }
  // A child of fork() would share the pages (shm) or break the pinning
  // (rdma): it gets none, as with registered memory under ibv_fork_init.
  (void)madvise(p, bytes, MADV_DONTFORK);
  mem_.emplace_back(p, bytes);
  return p;
}

int Context::host_peer() const {
  const int me = boot_->rank();
  for (int r = 0; r < int(host_.hosts.size()); ++r)
    if (r != me && host_.hosts[size_t(r)] == host_.hosts[size_t(me)]) return r;
  return -1;
}

void Context::mem_free(void* addr) {
  std::lock_guard<std::mutex> l(mem_mutex_);
  auto it = std::find_if(mem_.begin(), mem_.end(), [&](const auto& m) { return m.first == addr; });
  if (it == mem_.end())
    fail(COLL_ERR_INVALID_ARG, "coll_mem_free: %p is not memory from coll_mem_alloc (or freed already)",
         addr);
  try {
    cache_->deregister_explicit(addr);
  } catch (const Error&) {
    fail(COLL_ERR_INVALID_ARG, "coll_mem_free: %p is in use by a collective (in flight, or a "
         "persistent request not yet freed)", addr);
  }
  // Cached registrations of parts of it (none while the explicit one
  // stood, but a stale one must not outlive the memory).
  cache_->invalidate(addr, it->second);
  (void)madvise(addr, it->second, MADV_DOFORK);
  transport_->free_window(addr, it->second);
  mem_.erase(it);
}

void Context::note_dead(int world_rank) {
  std::lock_guard<std::mutex> l(dead_mutex_);
  if (std::find(dead_.begin(), dead_.end(), world_rank) == dead_.end()) dead_.push_back(world_rank);
}

bool Context::known_dead(int world_rank) const {
  std::lock_guard<std::mutex> l(dead_mutex_);
  return std::find(dead_.begin(), dead_.end(), world_rank) != dead_.end();
}

Communicator* Context::adopt(std::unique_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> l(pending_mutex_);
  comms_.push_back(std::move(comm));
  return comms_.back().get();
}

size_t Context::windows() const {
  size_t n = world_ ? world_->windows() : 0;
  for (const auto& c : comms_) n += c->windows();
  return n;
}

bool Context::owns(const Communicator* comm) const {
  if (comm == world_.get()) return true;
  for (const auto& c : comms_)
    if (c.get() == comm) return true;
  return false;
}

void Context::free(Communicator* comm) {
  if (!comm->failed_status()) {
    auto op = comm->make_internal("free", [](Channel& ch) { return ch.close(); });
    {
      std::unique_lock<std::mutex> l(comm->progress_mutex(), std::defer_lock);
      if (locking_) l.lock();
      comm->start(*op);
    }
    wait(*op);
  }
  std::unique_ptr<Communicator> gone;
  {
    std::lock_guard<std::mutex> l(pending_mutex_);
    pending_.erase(std::remove(pending_.begin(), pending_.end(), comm), pending_.end());
    pending_count_ = pending_.size();
    for (auto& c : comms_)
      if (c.get() == comm) gone = std::move(c);
    comms_.erase(std::remove(comms_.begin(), comms_.end(), nullptr), comms_.end());
  }
  gone.reset();
}

void Context::note_pending(Communicator* comm) {
  std::unique_lock<std::mutex> l(pending_mutex_, std::defer_lock);
  if (locking_) l.lock();
  if (comm->listed_pending) return;
  comm->listed_pending = true;
  pending_.push_back(comm);
  pending_count_.store(pending_.size(), std::memory_order_release);
}

void Context::progress_transport() {
  // Ranges the application unmapped are deregistered before any write that
  // arrives now is applied (tcp applies them in poll): a load when none.
  cache_->apply_monitor_reports();
  poll_and_route_completions(*transport_, boot_->rank());
}

bool Context::others_pending(const Communicator& comm) const {
  return pending_count_.load(std::memory_order_acquire) > (comm.listed_pending ? 1u : 0u);
}

// The communicators with queued operations, other than the one a waiter
// drives itself: a rank waiting on one communicator may be the peer another
// rank needs on a second one. Where threads meet, one that another thread
// is advancing is skipped (that thread advances it).
void Context::advance_others(Communicator* except) {
  if (pending_count_.load(std::memory_order_acquire) <= (except && except->listed_pending ? 1 : 0))
    return;
  std::unique_lock<std::mutex> l(pending_mutex_, std::defer_lock);
  if (locking_) l.lock();
  for (size_t i = 0; i < pending_.size();) {
    Communicator* c = pending_[i];
    if (c == except) {
      ++i;
      continue;
    }
    std::unique_lock<std::mutex> cl(c->progress_mutex(), std::defer_lock);
    if (locking_ && !cl.try_lock()) {
      ++i;
      continue;
    }
    c->advance();
    if (c->idle()) {
      c->listed_pending = false;
      pending_[i] = pending_.back();
      pending_.pop_back();
      pending_count_.store(pending_.size(), std::memory_order_release);
    } else {
      ++i;
    }
  }
}

void Context::dump_waits(Communicator& comm, double waited) {
  // One write per dump, so that the ranks' lines do not interleave.
  std::string text = strfmt("libcoll: rank %d (pid %d): waiting %.3f s without progress", boot_->rank(),
                            int(::getpid()), waited);
  const Operation* op = comm.head();
  text += op ? strfmt(" in %s%s, call %llu on communicator %llu (rank %d of %d)",
                      op->info ? "coll_" : "", op->collective,
                      static_cast<unsigned long long>(op->seq),
                      static_cast<unsigned long long>(comm.id()), comm.rank(), comm.size())
             : strfmt(" on communicator %llu (rank %d of %d), no call queued",
                      static_cast<unsigned long long>(comm.id()), comm.rank(), comm.size());
  if (const Blocker* b = comm.blocked(); b && b->peer >= 0) {
    const Channel& ch = b->channel ? *b->channel : comm.channel();
    text += strfmt(", for %s from rank %d of %s (world rank %d)", b->what, b->peer,
                   b->channel ? "a per-host sub-communicator" : "it", ch.transport_rank(b->peer));
  } else if (b) {
    text += strfmt(", for %s", b->what);
  }
  if (op && op->next) {
    text += "; queued after it:";
    int shown = 0;
    for (const Operation* q = op->next; q && shown < 8; q = q->next, ++shown)
      text += strfmt(" %s%s call %llu", q->info ? "coll_" : "", q->collective,
                     static_cast<unsigned long long>(q->seq));
  }
  {
    std::lock_guard<std::mutex> l(pending_mutex_);
    std::string others;
    for (const Communicator* c : pending_)
      if (c != &comm) others += strfmt(" %llu", static_cast<unsigned long long>(c->id()));
    if (!others.empty()) text += "; other communicators with queued operations:" + others;
  }
  text += '\n';
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
}

// Every wait ends: at the timeout without progress, when the peer is found
// dead, or when the transport reports an error.
Clock::time_point Context::check_stalled(Communicator& comm, Pacing& p) {
  const auto now = Clock::now();
  if (!p.started) {
    p.started = true;
    p.last_progress = now;
    p.next_peer_check = now + std::chrono::milliseconds(10);
  }
  if (comm.progress_epoch() != p.epoch) {
    p.epoch = comm.progress_epoch();
    p.last_progress = now;
  }
  const Blocker* b = comm.blocked();
  const int peer = b ? b->peer : -1;
  const double waited = std::chrono::duration<double>(now - p.last_progress).count();
  if (const uint64_t asked = g_dump_requests.load(std::memory_order_relaxed);
      asked != p.dumps_seen ||
      (config_.debug_dump_s > 0 && !p.dumped && waited >= config_.debug_dump_s)) [[unlikely]] {
    p.dumped = p.dumped || asked == p.dumps_seen;
    p.dumps_seen = asked;
    dump_waits(comm, waited);
  }
  if (waited > config_.timeout_s) {
    // Which call: the collective and its number on the communicator (calls
    // are numbered alike on every rank, so the ranks' messages line up).
    const Operation* op = comm.head();
    fail(COLL_ERR_TIMEOUT,
         "rank %d timed out after %.1f s waiting for %s from rank %d in %s%s (call %llu on "
         "this communicator) (COLL_TIMEOUT=%g): is every rank calling the same collective?",
         comm.rank(), waited, b ? b->what : "progress", peer < 0 ? comm.rank() : peer,
         op && op->info ? "coll_" : "", op ? op->collective : "no call",
         static_cast<unsigned long long>(op ? op->seq : 0), config_.timeout_s);
  }
  if (now >= p.next_peer_check) {
    const Channel& ch = b && b->channel ? *b->channel : comm.channel();
    if (peer >= 0) {
      try {
        transport_->check_peer(ch.transport_rank(peer));
      } catch (const Error& e) {
        // The read that found the peer gone (tcp reads its stream to the
        // close) may first have applied its last messages - the very one
        // this wait is for. Look once more: a wait that can go on does, and
        // the loss, which stays, fails the next wait on the peer instead.
        // Without this a survivor fails a call the dead rank completed.
        if (e.status() != COLL_ERR_PEER_LOST || !comm.advance()) throw;
        p.next_peer_check = now + std::chrono::milliseconds(10);
        return now;
      }
    }
    // A revocation (coll_comm_revoke) reaches every member, also one that
    // waits on another: every notice is read, and the communicator is
    // revoked here too (which tells this rank's peers in turn).
    if (comm.check_revoked())
      fail(COLL_ERR_REVOKED, "rank %d: the communicator was revoked while this rank waited in %s%s",
           comm.rank(), comm.head() && comm.head()->info ? "coll_" : "",
           comm.head() ? comm.head()->collective : "a call");
    // A peer whose part of this communicator failed (Channel::notify_failed)
    // will not write what we wait for: fail alike, with its status.
    if (peer >= 0 && b->from_peer)
      if (const int status = ch.peer_failed(peer))
        fail(status,
             "rank %d: the communicator failed at rank %d (%s) while this rank waited for %s "
             "from it; see that rank's error for the cause",
             comm.rank(), peer, coll_strerror(status), b->what);
    // A peer that refused this very call on its own arguments (without
    // COLL_CHECK_ARGS: Channel::notify_refused) will not take part in it.
    // Ranks that refused it too meet it in the refusal's exchange instead.
    const Operation* op = comm.head();
    if (peer >= 0 && b->from_peer && op && !op->refused)
      if (const int status = ch.peer_refused(peer, op->seq))
        fail(status,
             "rank %d: rank %d refused this call on its own arguments (%s; see its error) "
             "while this rank accepted it: the call fails on every rank, and the communicator "
             "with it",
             comm.rank(), peer, coll_strerror(status));
    // And the refusing rank, in the refusal's exchange, finds the peers that
    // accepted the call without needing it (a bcast's root).
    if (op && op->refused && !op->refused_in_agreement)
      if (const int p = comm.channel().accepting_peer(op->seq); p >= 0)
        fail(op->refused,
             "rank %d refused this call on its own arguments, and rank %d accepted it (it sent "
             "the call's data, or failed in it): the call fails on every rank, and the "
             "communicator with it",
             comm.rank(), p);
    // A peer that finalized wrote its `left` notice after everything else
    // it wrote (Channel::quiesce). Seen at the last check too, with passes
    // of the operation in between that saw all of that: the wait is for
    // something the peer will never write.
    const bool left = peer >= 0 && b->from_peer && ch.peer_left(peer);
    if (left && p.left_peer == peer)
      fail(COLL_ERR_PEER_LOST,
           "rank %d: rank %d called coll_finalize while this rank still waited for %s from "
           "it: a rank that finalizes leaves every operation it has not completed",
           comm.rank(), peer, b->what);
    p.left_peer = left ? peer : -1;
    p.next_peer_check = now + std::chrono::milliseconds(10);
  }
  return now;
}

namespace {
// The argument is stored before the function (and read after it): a
// waiter that sees a function sees its argument (set once, in practice).
std::atomic<void (*)(void*)> g_wait_hook{nullptr};
std::atomic<void*> g_wait_hook_arg{nullptr};
}  // namespace

void set_wait_hook(void (*fn)(void*), void* arg) {
  g_wait_hook.store(nullptr, std::memory_order_release);
  g_wait_hook_arg.store(arg, std::memory_order_relaxed);
  g_wait_hook.store(fn, std::memory_order_release);
}

// One pass (once) or passes until op is complete. A failure found here (a
// timeout, a lost peer, a failed transport) fails op's communicator.
bool Context::drive(Operation& op, Pacing& p, bool once) {
  Communicator& comm = *op.comm;
  for (;;) {
    try {
      progress_transport();
      {
        std::unique_lock<std::mutex> cl(comm.progress_mutex(), std::defer_lock);
        if (locking_) cl.lock();
        if (op.complete) return true;
        comm.advance();
        if (op.complete) return true;
        // The clock is read every 16th pass only: most waits of a small
        // collective end within a few passes, and a clock read costs about
        // as much as a whole pass.
        if ((++p.pass & 15) == 0) p.policy.observe(check_stalled(comm, p));
      }
      advance_others(&comm);
    } catch (const Error& e) {
      std::unique_lock<std::mutex> cl(comm.progress_mutex(), std::defer_lock);
      if (locking_) cl.lock();
      std::string message = e.what();
      // A failure that is not this wait's own may hide what it had long been
      // waiting for: tcp fails the whole transport when any peer's
      // connection closes, e.g. a peer that timed out first and exited
      // while this rank waited for a stopped one. Name the awaited peer.
      const Blocker* b = comm.blocked();
      if (e.status() != COLL_ERR_TIMEOUT && p.started && b && b->peer >= 0) {
        const double waited = std::chrono::duration<double>(Clock::now() - p.last_progress).count();
        if (waited >= 1.0)
          message += strfmt(" (meanwhile rank %d had waited %.1f s for %s from rank %d)",
                            comm.rank(), waited, b->what, b->peer);
      }
      comm.fail(e.status(), message);
      return true;
    }
    if (once) return op.complete;
    // Another runtime's progress (libcoll_mpi: MPI's, so that a peer's MPI
    // receive of this rank's pending send completes while we wait here).
    if (auto* hook = g_wait_hook.load(std::memory_order_acquire)) [[unlikely]]
      hook(g_wait_hook_arg.load(std::memory_order_relaxed));
    p.policy.idle();
  }
}

void Context::wait(Operation& op) {
  if (op.complete) return;
  // Made before the count below goes up: a signal in between is answered
  // by the handler and by this wait (twice rather than not at all).
  Pacing p(wait_params_, placement_.get());  // its clock starts at the first check
  p.policy.enter();
  p.policy.begin();
  {
    struct Waiting {
      Waiting() { g_waiting.fetch_add(1, std::memory_order_relaxed); }
      ~Waiting() { g_waiting.fetch_sub(1, std::memory_order_relaxed); }
    } waiting;
    drive(op, p, false);
  }
  // A request that came while this wait ran but before a check printed it
  // (a wait ends within its first 16 passes, where a loaded machine may
  // deliver the signal) gets the handler's answer now: no wait is left.
  if (g_dump_requests.load(std::memory_order_relaxed) != p.dumps_seen && g_idle_length > 0)
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, g_idle_line, g_idle_length);
}

bool Context::test(Operation& op) {
  if (op.complete) return true;
  // A test loop must end too: the timeout runs from the first test that
  // found the operation stuck (kept per operation's communicator epoch).
  thread_local std::unique_ptr<Pacing> p;
  thread_local const Operation* last = nullptr;
  thread_local uint64_t last_context = 0;
  if (last != &op || last_context != serial_ || !p) {
    p = std::make_unique<Pacing>(wait_params_, placement_.get());
    p->policy.enter();
    last = &op;
    last_context = serial_;
  }
  p->pass = 15;  // every test reads the clock
  return drive(op, *p, true);
}

void Context::progress_thread_main() {
  // Advances every communicator with queued operations while the
  // application computes; backs off (1 us naps, then 50 us) when there is
  // nothing to do, so that it takes little from the application's cores.
  unsigned idle = 0;
  while (!stop_progress_.load(std::memory_order_acquire)) {
    bool any = pending_count_.load(std::memory_order_acquire) > 0;
    if (any) {
      try {
        progress_transport();
      } catch (const Error&) {
        // The waiter that owns the operation finds and reports it.
      }
      advance_others(nullptr);
    }
    if (any) {
      idle = 0;
      sched_yield();
    } else {
      struct timespec nap = {0, ++idle < 100 ? 1000 : 50 * 1000};
      nanosleep(&nap, nullptr);
    }
  }
}

}  // namespace coll
