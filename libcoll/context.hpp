// Context: what a process has once. The bootstrap, the host map, the
// transport (its endpoints and connections), the registration cache of user
// buffers (one per protection domain, shared by every communicator), the
// configuration and the forced algorithms, the world communicator, and the
// progress engine that advances the operations of every communicator.
//
// Owned in that order and torn down in reverse: communicators (windows
// deregistered), cache (every user buffer deregistered), transport (its
// protection domain), bootstrap.
//
// Progress. An operation advances only when some thread runs the engine:
// in every libcoll call that waits or tests, and with COLL_ASYNC_PROGRESS=1
// in a progress thread. A wait advances every communicator with queued
// operations, not only its own: a rank waiting on one communicator may be
// the peer another rank needs on a second one.
//
// Threads. With COLL_THREAD_MULTIPLE (or a progress thread) the transport is
// reached through a lock, and each communicator's operations through its
// progress mutex, taken with try_lock by waiters on other communicators (the
// thread that holds it advances them).
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "algorithms.hpp"
#include "bootstrap/bootstrap.hpp"
#include "env.hpp"
#include "regcache.hpp"
#include "transport/host_identity.hpp"
#include "transport/transport.hpp"
#include "wait_policy.hpp"

namespace coll {

// coll_set_wait_hook's function: called by Context::drive's blocking waits
// after each pass that left the operation incomplete.
void set_wait_hook(void (*fn)(void*), void* arg);

class Communicator;
struct Operation;

class Context {
 public:
  Context(std::unique_ptr<Bootstrap> boot, const Config& config, int thread_level);
  // Finalize: every communicator still alive is quiesced, then a bootstrap
  // barrier, then everything is torn down.
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Config& config() const { return config_; }
  // Rank r's host (transport ranks), as the bootstrap's host map gives it.
  const HostMap& host_map() const { return host_; }
  Bootstrap& bootstrap() { return *boot_; }
  Transport& transport() { return *transport_; }
  RegistrationCache& cache() { return *cache_; }
  Communicator& world() { return *world_; }
  int thread_level() const { return thread_level_; }
  // Whether threads meet inside libcoll (THREAD_MULTIPLE or the progress
  // thread): locks are taken only then.
  bool locking() const { return locking_; }
  // COLL_<NAME>_ALGO, or nullptr (choose by the selection table).
  const Algorithm* forced(Coll c) const { return forced_[int(c)]; }
  uint64_t next_comm_id() { return next_id_.fetch_add(1); }

  // A communicator made by dup/split: owned by the context from now on.
  Communicator* adopt(std::unique_ptr<Communicator> comm);
  // Frees a communicator (not the world): its queued operations are
  // completed, the closing handshake runs, its window goes.
  void free(Communicator* comm);
  bool owns(const Communicator* comm) const;
  // The registered windows of the world and every dup/split alive, their
  // per-host sub-communicators' included.
  size_t windows() const;

  // coll_mem_alloc / coll_mem_free: memory that peers on this host write
  // into by a plain copy (a range of this rank's shm segment; anonymous
  // memory on tcp and rdma), registered explicitly for every communicator
  // (pinned once on rdma), and not inherited by fork()ed children
  // (MADV_DONTFORK, as registered memory under verbs). Throws
  // COLL_ERR_NO_RESOURCES when the segment's arena (COLL_SHM_ARENA) or
  // /dev/shm cannot hold it, COLL_ERR_INVALID_ARG for 0 bytes, a free of
  // memory it did not hand out, or of memory a collective is using.
  void* mem_alloc(size_t bytes);
  void mem_free(void* addr);
  // A rank on this host other than this one, or -1.
  int host_peer() const;

  // World ranks found dead by a survivor round (Communicator::agree,
  // shrink): every communicator that holds them counts them failed.
  void note_dead(int world_rank);
  bool known_dead(int world_rank) const;

  // --- the progress engine -------------------------------------------------
  // Waits until op's activation is complete (advancing everything else
  // meanwhile). Every wait ends: at COLL_TIMEOUT without progress, when the
  // peer waited for is found dead, or when the transport fails; the
  // operation then completes with that error.
  void wait(Operation& op);
  // One round of progress; true when op is complete.
  bool test(Operation& op);
  // The communicator has queued operations: waiters on others advance it.
  void note_pending(Communicator* comm);
  // Whether a communicator other than comm may have queued operations
  // (that a waiting call would advance). comm stays listed after its own
  // operations ended until another waiter drops it (advance_others).
  bool others_pending(const Communicator& comm) const;
  // Polls the transport and routes completions to their channels.
  void progress_transport();
  // The polls a wait spins before anything else (wait_policy.hpp).
  uint64_t spin_polls() const { return wait_params_.spin_polls; }

 private:
  struct Pacing;
  static size_t slots_for_memlock(size_t configured, int num_slots, int nranks);
  void advance_others(Communicator* except);
  bool drive(Operation& op, Pacing& pacing, bool once);
  std::chrono::steady_clock::time_point check_stalled(Communicator& comm, Pacing& pacing);
  // The flight recorder's line for a wait on comm (SIGUSR1, COLL_DEBUG_DUMP):
  // the call, whom it waits on and for what, what is queued behind it.
  void dump_waits(Communicator& comm, double waited);
  void progress_thread_main();
  void finalize() noexcept;

  uint64_t serial_;  // this process's n-th context (a test loop's state names it)
  Config config_;
  int thread_level_;
  bool locking_;
  WaitPolicyParams wait_params_;
  std::unique_ptr<TransportPlacement> placement_;  // where the transport tells
  const Algorithm* forced_[kCollCount] = {};
  std::unique_ptr<Bootstrap> boot_;
  HostMap host_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<RegistrationCache> cache_;
  std::unique_ptr<Communicator> world_;
  std::vector<std::unique_ptr<Communicator>> comms_;  // dup/split, alive
  std::vector<Communicator*> pending_;  // may have queued operations
  std::mutex pending_mutex_;
  std::atomic<size_t> pending_count_{0};
  std::atomic<uint64_t> next_id_{1};
  std::vector<std::pair<void*, size_t>> mem_;  // coll_mem_alloc's, under mem_mutex_
  std::mutex mem_mutex_;
  std::vector<int> dead_;  // note_dead's, under dead_mutex_
  mutable std::mutex dead_mutex_;
  std::thread progress_thread_;
  std::atomic<bool> stop_progress_{false};
};

}  // namespace coll
