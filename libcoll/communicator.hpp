// A communicator: a group of the context's ranks, its own window (memory
// from the transport, registered with reg_write, its {addr, rkey} traded
// with the members when it is created), the channel the algorithms run on,
// the queue of its operations, and its sticky error. Everything a process
// has once (bootstrap, transport, registration cache, configuration) is
// the Context's.
//
// Creating one (dup, split) is a collective over the parent communicator:
// the colors, keys and window keys travel as an allgather through the
// parent's channel, never through the bootstrap. create_group is one over
// the new communicator's members only, through the same channel (see
// create_group_body). Freeing one is a collective over itself: a closing
// handshake (Channel::close) guarantees that no peer still writes into its
// window, which is then deregistered and returned to the transport.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "algorithms.hpp"
#include "arg_check.hpp"
#include "channel.hpp"
#include "operation.hpp"
#include "selection.hpp"

namespace coll {

class Context;

// An internal exchange (split's colors and windows, COLL_CHECK_ARGS's
// signatures): algorithm fn of collective c on `bytes` bytes per rank of
// raw memory, pinned where the transport needs it. Not through the
// selection, so that forced or tuned algorithms never change it.
Task exchange_bytes(Channel& ch, Coll c, AlgorithmFn fn, const void* send, void* recv,
                    size_t bytes);

class Communicator {
 public:
  // group[r]: the context rank of rank r; rank: this process's rank in it.
  // window: memory from Transport::alloc_window, registered as window_mr;
  // peer_windows[r]: rank r's window.
  Communicator(Context& ctx, uint64_t id, std::vector<int> group, int rank,
               const WindowLayout& layout, void* window, MemoryRegion* window_mr,
               std::vector<RemoteRegion> peer_windows);
  // Deregisters the window and gives it back. The caller has run close()
  // (or, at finalize, quiesce() and a bootstrap barrier).
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // Allocates and registers the window of a communicator of `size` ranks.
  struct Window {
    void* memory = nullptr;
    size_t bytes = 0;
    MemoryRegion* mr = nullptr;
    WindowLayout layout;
  };
  static Window make_window(Context& ctx, int size);

  Context& context() const { return ctx_; }
  uint64_t id() const { return id_; }
  int rank() const { return channel_->rank(); }
  int size() const { return channel_->size(); }
  Channel& channel() { return *channel_; }
  // coll_comm_resource_stats.
  coll_resource_stats_t resource_stats() const;
  // Its own window's bytes (fixed at creation: readable from any thread).
  size_t window_bytes() const { return window_.bytes; }
  // Its own window and its sub-communicators' (build_hierarchy).
  size_t windows() const { return 1 + (node_comm_ ? 1 : 0) + (leader_comm_ ? 1 : 0); }
  // "" before the first call of that collective.
  const char* last_algorithm(const std::string& collective) const;
  // coll_comm_set_reproducible, once the ranks agreed on the level.
  void set_reproducible(int level) { reproducible_ = level; }

  // Prepares op as an operation of collective c: args are checked (a bad
  // one throws Error(COLL_ERR_INVALID_ARG) and leaves the communicator
  // usable) and the algorithm chosen. Returns false when the call moves
  // nothing (count 0, or one rank), which is then done here, at once; a
  // persistent operation is always prepared, and pins its buffers now.
  // With COLL_CHECK_ARGS=1 (and more than one rank) every call is
  // prepared, a call that moves nothing too: its task first agrees on the
  // arguments (arg_check.hpp).
  bool make_collective(Coll c, const Args& args, bool persistent, Operation& op);
  // A blocking call, checked (args in place) and chosen as make_collective
  // does. nullptr when it is done here: it moves nothing, or its
  // algorithm's synchronous form (algorithms.hpp, NowFn) finished it at
  // once; else the communicator's own blocking operation, started (under
  // the progress lock where threads meet), for the caller to wait on. A
  // communicator is entered by one thread at a time, and a blocking call is
  // complete before it returns, so one operation serves them all.
  Operation* start_blocking(Coll c, Args& args);
  // An operation that runs body (communicator constructors, the closing
  // handshake).
  std::unique_ptr<Operation> make_internal(const char* what, std::function<Task(Channel&)> body);
  // Queues op (every rank starts operations in the same order) and runs it
  // as far as it goes without waiting.
  void start(Operation& op);
  // Runs the queued operations as far as they go. Returns whether any made
  // progress. The caller holds progress_mutex() where threads meet.
  bool advance();
  bool idle() const { return head_ == nullptr; }
  // What the head operation waits for (nullptr: nothing queued, or not
  // blocked).
  const Blocker* blocked() const;
  // COLL_CHECK_ARGS=1 (with more than one rank).
  bool checks_arguments() const { return arg_check_ != nullptr; }
  // The operation that runs now (nullptr: none).
  const Operation* head() const { return head_; }
  // Counts every resumption: the engine's timeout measures time without
  // progress.
  uint64_t progress_epoch() const { return epoch_; }
  // Ends every queued operation with this failure, and every later one:
  // the communicator is failed (sticky).
  // The caller holds progress_mutex() where threads meet: a second thread
  // may fail the communicator while the first is inside a call on it
  // (api.cpp's EntryGuard), which reads the status without the lock.
  void fail(int status, const std::string& message);
  int failed_status() const { return failed_status_.load(std::memory_order_acquire); }
  // Drops the pins of a persistent operation (coll_request_free); the
  // communicator forgets it.
  void release_pins(Operation& op);

  // Communicator constructors: bodies for make_internal on the parent.
  // split: ranks of equal color, ordered by (key, parent rank); color
  // COLL_UNDEFINED gives *out == nullptr. dup: split with one color and the
  // parent's order.
  Task split_body(Channel& ch, int color, int key, std::unique_ptr<Communicator>* out);
  // create_group (coll_comm_create_group): the parent ranks `members`, in
  // the new order, this rank among them; only they run it. Their new
  // windows' descriptors travel as a Bruck allgather among the members (in
  // parent order) on the parent's channel (bruck_allgather_among):
  // messages only between pairs of members, on the pair sequences that the
  // parent's collectives use too.
  //
  // Why the pair sequences stay in step. A channel delivers a pair's
  // messages in the order they were sent, and a communicator runs its
  // operations one at a time in the order they were started. So a pair of
  // members (p, q) stays in step as long as p and q start the operations
  // that involve both of them (the parent's collectives, and the creations
  // whose groups hold both) in the same relative order. For the parent's
  // collectives that is the rule every collective obeys; for a creation it
  // is what MPI requires too, for blocking calls: two members that
  // disagreed on the order of a blocking parent collective and a creation
  // would deadlock under MPI as well (the creation is collective over its
  // group, and neither may finish before the other's matching call).
  // Non-members never see the creation: what they do meanwhile on the
  // parent involves them, and any pair including one of them keeps its own
  // order. Non-blocking parent collectives pending at the creation are
  // safe when every member started them on the same side of the creation:
  // the creation is queued behind them and starts when they have finished
  // here. That is libcoll's rule for non-blocking collectives ("every rank
  // starts the operations of a communicator in the same order") extended
  // to the creation; MPI might let two members start a pending one on
  // different sides of it, which here deadlocks (COLL_TIMEOUT). And the
  // creation waits for them: a non-member that holds one back holds the
  // creation back too, where MPI would not.
  //
  // What the channel cannot do is match by tag: a pair's messages are one
  // ordered stream, not tagged queues. Two creations whose groups share
  // two members or more, started concurrently from two threads, must
  // therefore run in the same order on those shared members; api.cpp
  // serialises the creations on one parent (a lock), and the tag is
  // checked, not matched: each member's block carries the tag and a
  // signature of the rank list, and a mismatch is COLL_ERR_INVALID_ARG on
  // the members that see it. It fails the parent too (an ordinary Error,
  // not an AgreedError): creations that ran in different orders on two
  // members may have left their pair out of step. Where the mismatched
  // runs wait on each other instead, COLL_TIMEOUT ends them.
  // Nor is the creation numbered among the parent's calls
  // (Operation::members_only): COLL_CHECK_ARGS compares those numbers
  // across all the parent's ranks.
  Task create_group_body(Channel& ch, std::vector<int> members, int tag,
                         std::unique_ptr<Communicator>* out);
  // Held by a creation (create_group) from before it is queued until it has
  // finished: creations on one parent from several threads run one after
  // the other (the channel cannot tell them apart).
  std::mutex& create_mutex() { return create_mutex_; }
  // Where this communicator's ranks span hosts with several on one host at
  // least (and COLL_HIERARCHY is not 0): makes its two sub-communicators
  // (the ranks of this rank's host; the hosts' leaders) by splits over it,
  // hands them to the channel (Hierarchy) and makes the hierarchical
  // algorithms the automatic choice of allreduce, bcast, reduce and
  // barrier. Collective over this communicator, right after it is made.
  void build_hierarchy();

  // --- fault recovery (coll_comm_revoke ... coll_comm_ack_failed; the
  // section "Fault recovery" of docs/architecture.md) ---------------------
  // A name every member gives this communicator (its id is this process's
  // own): the world's is 1, a dup's or split's is derived from the
  // parent's, the call's number and the color, a shrink's from the
  // parent's and the shrink's number. The key of the launcher's survivor
  // rounds (Bootstrap::survivor_round).
  uint64_t key() const { return key_; }
  void set_key(uint64_t key) { key_ = key; }
  // Revokes: every queued and later operation fails with COLL_ERR_REVOKED
  // (it overrides an earlier failure), and every member is told through
  // the failure notice (Channel::notify_failed), which a member's waits
  // read every ~10 ms (Context::check_stalled). why: the message.
  void revoke(const std::string& why);
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // Reads the members' notices: revoked by one of them (revokes here too).
  bool check_revoked();
  // The members known failed here, in the order learned: the transport's
  // verdict on each member (Transport::check_peer), and what the survivor
  // rounds of shrink and agree found (Context::known_dead); never a member
  // that finalized (member_left).
  const std::vector<int>& refresh_failed();
  // Member r finalized: its `left` notice is here or on the world's channel.
  bool member_left(int r);
  // coll_comm_ack_failed: acknowledges the first n of refresh_failed()'s
  // list (never fewer than before); returns how many are acknowledged.
  size_t ack_failed(size_t n);
  size_t acked() const { return acked_; }
  // coll_comm_agree and coll_comm_shrink, through the launcher's survivor
  // rounds (they work on a revoked or failed communicator: nothing goes
  // through its channel). agree: *flag = the AND of the flags of the
  // members that took part; throws COLL_ERR_PEER_LOST (after *flag is set)
  // when some failed member is not acknowledged at some survivor.
  void agree(int* flag);
  std::unique_ptr<Communicator> shrink();

  std::mutex& progress_mutex() { return progress_mutex_; }
  // Set while a thread is inside a call on this communicator: a second
  // thread entering at the same time is erroneous (MPI) and detected.
  std::atomic<bool>& in_use() { return in_use_; }
  // This communicator's reference on the context's list of communicators
  // with queued operations.
  std::atomic<bool> listed_pending{false};

 private:
  const Algorithm* choose(Coll c, const Args& args);
  // Checks args (in place) and chooses the algorithm; nullptr when the call
  // moves nothing (count 0, or one rank), which is then done here. A call
  // refused on this rank's arguments is refused at every rank (refuse;
  // blocking: whether the refusing call waits for that).
  const Algorithm* check_and_choose(Coll c, Args& args, bool blocking);
  void run_local(const CollectiveInfo& info, const Algorithm* algo, const Args& args);
  void prepare_plain(Coll c, const Algorithm* algo, Operation& op);
  // The call done at once by algo's synchronous form (no task, no queue)
  // when its waits are satisfied. False otherwise, with rest empty (nothing
  // was done) or the coroutine that continues the call. Only on an idle
  // communicator that has not failed, and only while no other communicator
  // has queued operations: a call that waits advances those, and this one
  // must not skip that. The caller holds the progress lock where threads
  // meet.
  bool run_now(const Algorithm& algo, const Args& args, Task& rest);
  // The part of make_collective after the check: op joins this
  // communicator; algo (nullptr: nothing to move) runs at each start.
  void prepare(const CollectiveInfo& info, const Algorithm* algo, bool persistent, Operation& op);
  bool make_checked(Coll c, const Args& args, bool persistent, Operation& op);
  // An internal operation that runs info's argument agreement
  // (agree_on_arguments) on its own args, with scratch: a refusal's
  // (refuse) and a persistent init's (agree_at_init; compare: under
  // COLL_CHECK_ARGS, else refusals only).
  std::unique_ptr<Operation> make_agreement(const CollectiveInfo& info, ArgCheck& scratch,
                                            bool compare = true);
  // prepare for a persistent op whose arguments are checked (and, under
  // COLL_CHECK_ARGS, agreed at init): algo at each start, or nothing.
  void prepare_persistent(const CollectiveInfo& info, const Algorithm* algo, Operation& op);
 public:
  // This rank refused a call of info's collective on its own arguments
  // (status, message). Starts an operation that takes the call's place in
  // the agreement exchange, carrying the refusal, so that every rank fails
  // the call alike (AgreedError: the communicator stays usable); waits for
  // it if `wait` (a blocking call). Without COLL_CHECK_ARGS the others
  // are in that exchange only if they refused the call too: the peers that
  // accepted it learn of the refusal first (Channel::notify_refused) and
  // fail the call, and the communicator with it, everywhere; either way no
  // rank completes it with another call's data. One rank: nothing.
  // A refused persistent init (init): every rank is in its exchange (a
  // persistent init is collective, agree_at_init), so no notice; waits.
  void refuse(const CollectiveInfo& info, int status, const std::string& message, bool wait,
              bool init = false);
 private:
  // A persistent init is collective (MPI's rule for persistent
  // collectives), with or without COLL_CHECK_ARGS: the argument agreement
  // runs once, here, and a mismatch or a refusal at any rank fails the
  // init at every rank, so no rank holds a request whose starts would wait
  // for a rank that has none (or complete at a rank that needs nothing of
  // the others and leave its messages to be read as their next call's).
  // The arguments are fixed from here on: the starts run the algorithm
  // alone. op.args are set and checked.
  void agree_at_init(const CollectiveInfo& info, const Operation& op);
  // The agreement's scratch: COLL_CHECK_ARGS's, else one made on first use.
  ArgCheck& agreement_scratch();
  Task checked_call(Channel& ch, Operation& op, const Algorithm* algo);
  void begin(Operation& op);
  void finish(Operation& op);
  void end_activation(Operation& op, int status, const std::string& message);
  // fail's and revoke's parts: the status set (and told to the peers), and
  // every queued operation ended with it.
  void set_failed(int status, const std::string& message);
  void end_queued(int status, const std::string& message);
  void release_own_pins(Operation& op);
  // The message of a success (no string built on the hot path).
  inline static const std::string kNoMessage;
  Blocker* blocked_on(Operation& op);

  Context& ctx_;
  uint64_t id_;
  Window window_;
  std::unique_ptr<Channel> channel_;
  // The wait of an operation whose task has finished but whose signaled
  // writes have not (RDMA).
  std::optional<Channel::FlushWait> flush_;
  const char* last_[kCollCount] = {};
  // build_hierarchy's: the sub-communicators (never queued on: only this
  // communicator's operations use their channels), and per collective the
  // algorithm that is the automatic choice while they exist.
  std::unique_ptr<Communicator> node_comm_, leader_comm_;
  Hierarchy hierarchy_;
  const Algorithm* hierarchical_[kCollCount] = {};
  Choice choice_[kCollCount] = {};  // the last automatic choice per collective
  Operation* head_ = nullptr;
  Operation* tail_ = nullptr;
  uint64_t epoch_ = 0;
  // Operations started, and calls rejected on this rank's arguments alone
  // under COLL_CHECK_ARGS: the next Operation::seq.
  uint64_t calls_ = 0;
  // COLL_CHECK_ARGS=1 on more than one rank: its scratch; nullptr
  // otherwise, the one thing the normal path tests.
  std::unique_ptr<ArgCheck> arg_check_;
  // Without the knob: the scratch of refusals' exchanges, made at the
  // first (refuse).
  std::unique_ptr<ArgCheck> refusal_scratch_;
  // The operations of refused calls (refuse): owned here, dropped once
  // complete.
  std::vector<std::unique_ptr<Operation>> refused_ops_;
  // COLL_FAST_PATH and a channel where writes complete at post.
  bool fast_path_ = false;
  // COLL_REPRODUCIBLE, or coll_comm_set_reproducible: 0 off, 1 order,
  // 2 exact (COLL_REPRODUCIBLE_*).
  int reproducible_ = 0;
  // Set once (fail), the message before the status: a reader that loads a
  // non-zero status (acquire) may read the message.
  std::atomic<int> failed_status_{0};
  std::string failed_message_;
  // Fault recovery (see key(), revoke(), refresh_failed()).
  uint64_t key_ = 1;
  std::atomic<bool> revoked_{false};
  std::vector<int> failed_;  // members known failed, in the order learned
  size_t acked_ = 0;
  uint64_t agreements_ = 0, shrinks_ = 0;  // calls made: part of their rounds' keys
  std::mutex progress_mutex_;
  std::mutex create_mutex_;
  std::atomic<bool> in_use_{false};
  Operation blocking_op_;
  // Persistent operations made on this communicator and not yet freed: when
  // the communicator goes first, their pins are released and their comm
  // cleared (a later coll_start on them is an error).
  std::vector<Operation*> persistent_ops_;
};

}  // namespace coll
