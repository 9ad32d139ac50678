#include "communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#include <sys/mman.h>
#include <unistd.h>

#include "context.hpp"
#include "error.hpp"
#include "fault_injection.hpp"
#include "selection.hpp"
#include "user_op.hpp"

namespace coll {

Communicator::Window Communicator::make_window(Context& ctx, int size) {
  Window w;
  w.layout.slot_bytes = ctx.config().slot_bytes;
  w.layout.num_slots = ctx.config().num_slots;
  w.layout.nranks = size;
  w.bytes = w.layout.window_bytes();
  Transport& t = ctx.transport();
  w.memory = t.alloc_window(w.bytes, w.layout.eager_bytes());
  try {
    w.mr = t.reg_write(w.memory, w.bytes);
  } catch (...) {
    t.free_window(w.memory, w.bytes);
    throw;
  }
  return w;
}

Communicator::Communicator(Context& ctx, uint64_t id, std::vector<int> group, int rank,
                           const WindowLayout& layout, void* window, MemoryRegion* window_mr,
                           std::vector<RemoteRegion> peer_windows)
    : ctx_(ctx), id_(id) {
  window_.memory = window;
  window_.bytes = layout.window_bytes();
  window_.mr = window_mr;
  window_.layout = layout;
  Transport& t = ctx.transport();
  channel_ = std::make_unique<Channel>(
      t, layout, window_mr, std::move(peer_windows), std::move(group), rank, ctx.cache(),
      t.zero_copy_refused() ? 0
                            : ctx.config().zcopy_threshold.value_or(t.default_zcopy_threshold()),
      ctx.config().zcopy_threshold.has_value(), id);
  flush_.emplace(*channel_);
  if (ctx.config().check_args && size() > 1) arg_check_ = std::make_unique<ArgCheck>(size());
  fast_path_ = ctx.config().fast_path && channel_->completes_at_post();
  reproducible_ = ctx.config().reproducible;
}

Communicator::~Communicator() {
  refused_ops_.clear();  // their frames are the channel's
  for (Operation* op : std::vector<Operation*>(persistent_ops_)) {
    release_pins(*op);
    op->comm = nullptr;
  }
  channel_.reset();
  // What only this communicator used goes now, not at finalize.
  try {
    ctx_.cache().release_owner(id_);
  } catch (const Error&) {
    // A failed deregistration: the transport frees the rest at teardown.
  }
  Transport& t = ctx_.transport();
  // Dereg first (rdma_dereg_mr(3): before the memory goes; free_window
  // refuses a window that is still registered).
  if (window_.mr) t.dereg(window_.mr);
  // A failed communicator skipped its closing handshake: a peer that is
  // still alive may be copying into the window right now (shm checks the
  // rkey, then copies), so its memory is not reused; the transport frees it
  // at teardown.
  if (failed_status()) return;
  try {
    if (window_.memory) t.free_window(window_.memory, window_.bytes);
  } catch (const Error&) {
    // Cannot happen (ours, dereg'ed); the transport frees it at teardown.
  }
}

coll_resource_stats_t Communicator::resource_stats() const {
  coll_resource_stats_t s{};
  s.window_bytes = window_.bytes;
  // The eager part (the headers: reserved at allocation), and the slot
  // pages in memory, whoever committed them: a shm window's are pages of
  // the tmpfs file; tcp's anonymous pages, once written; rdma's, those
  // pinned (the slot areas registered for their writers: a registration
  // faults its pages in). mincore counts neither a reserved page nobody
  // touched yet nor a hole. The window and its slot area are page aligned.
  const size_t eager = window_.layout.eager_bytes();
  s.window_resident_bytes = eager;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> in_core((window_.bytes - eager + page - 1) / page);
  if (window_.memory && window_.bytes > eager &&
      mincore(static_cast<char*>(window_.memory) + eager, window_.bytes - eager,
              in_core.data()) == 0)
    for (unsigned char c : in_core) s.window_resident_bytes += (c & 1) ? page : 0;
  s.slots_committed_bytes = channel_->committed_bytes();
  s.slot_peers = uint32_t(channel_->committed_peers());
  // Its per-host sub-communicators' windows are its memory too.
  for (const Communicator* sub : {node_comm_.get(), leader_comm_.get()}) {
    if (!sub) continue;
    const coll_resource_stats_t t = sub->resource_stats();
    s.window_bytes += t.window_bytes;
    s.window_resident_bytes += t.window_resident_bytes;
    s.slots_committed_bytes += t.slots_committed_bytes;
  }
  s.connections = uint32_t(std::max(0, ctx_.transport().connections()));
  s.network_bytes = ctx_.transport().network_bytes();
  const RegcacheStats cache = ctx_.cache().stats();
  s.registrations = cache.registrations - cache.deregistrations + ctx_.windows() +
                    ctx_.transport().internal_registrations();
  return s;
}

const char* Communicator::last_algorithm(const std::string& collective) const {
  const CollectiveInfo* c = find_collective(collective);
  if (!c) return "";
  const char* name = last_[int(c->id)];
  return name ? name : "";
}

Blocker* Communicator::blocked_on(Operation& op) {
  if (Blocker* b = op.task.blocked()) return b;
  return op.task.done() ? &*flush_ : nullptr;
}

const Blocker* Communicator::blocked() const {
  return head_ ? const_cast<Communicator*>(this)->blocked_on(*head_) : nullptr;
}

namespace {
// A reduction whose result's bits depend on the order its operands meet.
// MIN, MAX and the integer operators do not (integer SUM and PROD wrap
// exactly); a user operator may.
bool order_sensitive(const Args& a) {
  if (!a.reduce) return false;
  if (is_user_op_handle(a.op)) return true;
  const bool floating = a.datatype == COLL_FLOAT || a.datatype == COLL_DOUBLE ||
                        a.datatype == COLL_FLOAT16 || a.datatype == COLL_BFLOAT16;
  return floating && (a.op == COLL_SUM || a.op == COLL_PROD);
}
}  // namespace

[[gnu::always_inline]] inline const Algorithm* Communicator::choose(Coll c, const Args& args) {
  // A non-commutative user operator: the one algorithm that keeps the rank
  // order, before any knob (a forced ring would give a wrong result). So
  // too, under COLL_REPRODUCIBLE=order, every reduction whose result
  // depends on the order of its operands (floating-point SUM and PROD,
  // user operators): the in-order algorithms all associate the operands as
  // recursive doubling does, which depends on the number of ranks alone
  // (in_order_reduce.cpp), not on sizes, chunks or transport.
  //
  // COLL_REPRODUCIBLE=exact: the sums it makes exact (float, double,
  // float16, bfloat16 SUM in allreduce, reduce, reduce_scatter(_block))
  // run exact_reduction.cpp's algorithms, whose bits do not depend on the
  // number of ranks either; the rest of what is order-sensitive (PROD,
  // user operators, scans) as under order.
  const Algorithm* algo = nullptr;
  if (!args.commutative || (reproducible_ && order_sensitive(args))) [[unlikely]] {
    if (reproducible_ == COLL_REPRODUCIBLE_EXACT && !is_user_op_handle(args.op))
      algo = exact_algorithm(c, args, size());
    if (!algo) algo = in_order_algorithm(c);
  }
  if (!algo) algo = ctx_.forced(c);
  if (!algo) algo = hierarchical_[int(c)];
  if (!algo) {
    // The last choice is kept with the sizes it holds for: programs repeat
    // calls of a few sizes, and a table lookup would show on a small
    // collective (no thread_local either: in a shared library every access
    // to one is a call). Keyed by select_bytes, which every rank computes
    // alike.
    const size_t key = args.select_bytes;
    Choice& last = choice_[int(c)];
    if (!last.algorithm || key < last.min_bytes || key > last.max_bytes)
      last = active_selection().choice(c, size(), key);
    algo = last.algorithm;
    if (channel_->zero_copy_spares_copies(args.bytes)) algo = &zero_copy_choice(*algo, c);
  }
  last_[int(c)] = algo->name;
  return algo;
}

// The call on one rank: the descriptor's, or exact-sum's definition where
// choose gave its algorithm (it makes NaN payloads quiet, as at n ranks).
void Communicator::run_local(const CollectiveInfo& info, const Algorithm* algo, const Args& args) {
  if (reproducible_ == COLL_REPRODUCIBLE_EXACT && algo &&
      algo == exact_algorithm(info.id, args, size())) [[unlikely]]
    exact_local(info.id, args);
  else
    info.local(args);
}

[[gnu::always_inline]] inline const Algorithm* Communicator::check_and_choose(Coll c, Args& args,
                                                                               bool blocking) {
  const CollectiveInfo& info = collective_info(c);
  try {
    info.check(args, size(), rank());
  } catch (const Error& e) {
    // The others may have accepted the call (refuse tells them).
    refuse(info, e.status(), e.what(), blocking);
    throw;
  }
  const Algorithm* algo = choose(c, args);
  if (!info.empty(args) && size() > 1) return algo;
  if (const int failed = failed_status())
    throw Error(failed, "the communicator failed earlier: " + failed_message_);
  if (!info.empty(args)) run_local(info, algo, args);
  return nullptr;
}

// The operation's fields for a call that pins nothing at init, in line:
// every blocking and non-blocking call's path.
void Communicator::prepare_plain(Coll c, const Algorithm* algo, Operation& op) {
  const CollectiveInfo& info = collective_info(c);
  op.comm = this;
  op.collective = info.name;
  op.info = &info;
  op.persistent = false;
  op.algorithm = algo;
}

Operation* Communicator::start_blocking(Coll c, Args& args) {
  Operation& op = blocking_op_;
  const Algorithm* algo = nullptr;
  // COLL_CHECK_ARGS: this test is all that the normal path pays for it.
  if (arg_check_) [[unlikely]] {
    if (!make_checked(c, args, false, op)) return nullptr;
  } else {
    algo = check_and_choose(c, args, true);
    if (!algo) return nullptr;
  }
  std::unique_lock<std::mutex> l(progress_mutex_, std::defer_lock);
  if (ctx_.locking()) l.lock();
  if (algo) {
    Task rest;
    if (algo->now && fast_path_ && run_now(*algo, args, rest)) return nullptr;
    // The arguments are copied only here: the synchronous form works on
    // the caller's (and a `rest` it handed over refers to those, which
    // live until the blocking call returns).
    op.args = args;
    prepare_plain(c, algo, op);
    op.task = std::move(rest);  // empty: begin() makes the task
  }
  start(op);
  return &op;
}

bool Communicator::make_collective(Coll c, const Args& args, bool persistent, Operation& op) {
  // A persistent init is collective with the knob or without (its
  // agreement compares the arguments only under the knob: agree_at_init),
  // so it takes make_checked's path either way.
  if (arg_check_ || persistent) [[unlikely]]
    return make_checked(c, args, persistent, op);
  op.args = args;
  const Algorithm* algo = check_and_choose(c, op.args, false);
  if (!algo) return false;
  prepare_plain(c, algo, op);
  return true;
}

ArgCheck& Communicator::agreement_scratch() {
  if (arg_check_) return *arg_check_;
  if (!refusal_scratch_) refusal_scratch_ = std::make_unique<ArgCheck>(size());
  return *refusal_scratch_;
}

void Communicator::agree_at_init(const CollectiveInfo& info, const Operation& op) {
  if (size() == 1) return;
  // Without the knob only a refusal fails it: the ranks' call numbers may
  // differ there, and arguments that the knob would call a mismatch are
  // the program's to get right, as in its other calls.
  auto check = make_agreement(info, agreement_scratch(), arg_check_ != nullptr);
  Operation* o = check.get();
  o->args = op.args;
  {
    std::unique_lock<std::mutex> l(progress_mutex_, std::defer_lock);
    if (ctx_.locking()) l.lock();
    start(*o);
  }
  ctx_.wait(*o);
  if (o->status) throw Error(o->status, o->message);
}

void Communicator::prepare_persistent(const CollectiveInfo& info, const Algorithm* algo,
                                      Operation& op) {
  const bool trivial = info.empty(op.args) || size() == 1;
  prepare(info, trivial ? nullptr : algo, true, op);
  if (trivial) {
    // A persistent call that moves nothing still starts and completes.
    Operation* o = &op;
    op.body = [o, algo](Channel&) -> Task {
      if (!o->info->empty(o->args)) o->comm->run_local(*o->info, algo, o->args);
      co_return;
    };
  }
}

// Under COLL_CHECK_ARGS every call becomes an operation (there are at
// least two ranks): one that moves nothing must still meet the others'
// signatures, since a rank with count 0 against one with count 5 is
// exactly the mismatch to catch. Also every persistent init, knob or not.
bool Communicator::make_checked(Coll c, const Args& args, bool persistent, Operation& op) {
  const CollectiveInfo& info = collective_info(c);
  op.args = args;
  try {
    info.check(op.args, size(), rank());
  } catch (const Error& e) {
    // The other ranks may have accepted the call and wait in its exchange:
    // this rank takes part in it, carrying its refusal, so that they fail
    // the call too and every rank stays in step. A persistent init is
    // collective here (below): the refuser waits in its exchange.
    refuse(info, e.status(), e.what(), persistent || &op == &blocking_op_, persistent);
    throw;
  }
  const Algorithm* algo = choose(c, op.args);
  if (persistent) {
    agree_at_init(info, op);
    prepare_persistent(info, algo, op);
    return true;
  }
  prepare(info, info.empty(op.args) ? nullptr : algo, persistent, op);
  // The exchange first, then the algorithm prepare chose.
  Operation* o = &op;
  op.algorithm = nullptr;
  op.body = [o, algo = info.empty(op.args) ? nullptr : algo](Channel& ch) {
    return o->comm->checked_call(ch, *o, algo);
  };
  return true;
}

std::unique_ptr<Operation> Communicator::make_agreement(const CollectiveInfo& info,
                                                       ArgCheck& scratch, bool compare) {
  auto op = make_internal(info.name, nullptr);
  Operation* o = op.get();
  op->info = &info;
  op->body = [o, &scratch, compare](Channel& ch) {
    return agree_on_arguments(ch, *o, scratch, compare);
  };
  return op;
}

void Communicator::refuse(const CollectiveInfo& info, int status, const std::string& message,
                          bool wait, bool init) {
  if (size() == 1) return;
  // Operations that ended are dropped here (and with the communicator):
  // one refused call at a time is the usual number.
  std::erase_if(refused_ops_,
                [](const std::unique_ptr<Operation>& o) { return o->complete.load(); });
  // Without COLL_CHECK_ARGS the others run no exchange for an ordinary
  // call: the scratch is made for the first refusal (notify_refused).
  auto op = make_agreement(info, agreement_scratch());
  Operation* o = op.get();
  op->refused = status;
  op->refusal = message;
  op->refused_in_agreement = arg_check_ || init;
  {
    std::unique_lock<std::mutex> l(progress_mutex_, std::defer_lock);
    if (ctx_.locking()) l.lock();
    // Peers that accepted the call and wait for this rank in it learn of
    // the refusal from the notice, by the call's number (start gives the
    // operation calls_), and fail it; under COLL_CHECK_ARGS, and in a
    // persistent init, every rank is in the exchange anyway.
    if (!arg_check_ && !init && !failed_status()) channel_->notify_refused(calls_, status);
    start(*op);
  }
  refused_ops_.push_back(std::move(op));
  // A blocking call returns when the others know (they are in the same
  // call); a non-blocking one at once, its part in the exchange advancing
  // with this rank's later calls (as its request would have).
  if (wait) ctx_.wait(*o);
}

Task Communicator::checked_call(Channel& ch, Operation& op, const Algorithm* algo) {
  co_await agree_on_arguments(ch, op, *arg_check_);
  if (algo) co_await algo->run(ch, op.args);
}

void Communicator::prepare(const CollectiveInfo& info, const Algorithm* algo, bool persistent,
                           Operation& op) {
  op.comm = this;
  op.collective = info.name;
  op.info = &info;
  op.persistent = persistent;
  op.complete.store(true, std::memory_order_relaxed);
  // Known to the communicator, which may go first (see persistent_ops_).
  if (persistent) persistent_ops_.push_back(&op);
  op.algorithm = algo;
  if (!algo || !persistent) return;
  // Pinned once: coll_start performs no cache lookup and no registration.
  try {
    if (channel_->needs_local_registration() || channel_->zero_copy(op.args.bytes)) {
      for (auto [buf, len] : info.buffers(op.args, size()))
        if (len > 0 && len <= channel_->pinnable_bytes())
          op.pins.push_back(ctx_.cache().acquire(buf, len, id_));
    }
  } catch (...) {
    release_pins(op);  // and forget it: the caller drops it
    throw;
  }
  op.held_pins = op.pins.size();
}

std::unique_ptr<Operation> Communicator::make_internal(const char* what,
                                                       std::function<Task(Channel&)> body) {
  auto op = std::make_unique<Operation>();
  op->comm = this;
  op->collective = what;
  op->body = std::move(body);
  return op;
}

[[gnu::always_inline]] inline bool Communicator::run_now(const Algorithm& algo,
                                                          const Args& args, Task& rest) {
  if (head_ || failed_status() || ctx_.others_pending(*this)) return false;
  Polls polls{std::min<uint64_t>(ctx_.spin_polls(), 1024),
              [](void* c) { static_cast<Context*>(c)->progress_transport(); }, &ctx_};
  fault_at_call(id_, calls_);
  try {
    if (!algo.now(*channel_, args, polls, rest)) return false;
  } catch (const Error& e) {
    // A message of the wrong length or a failed transport: as in a task,
    // the ranks are out of step now (sticky).
    ++calls_;
    fail(e.status(), e.what());
    throw;
  }
  ++calls_;
  return true;
}

void Communicator::start(Operation& op) {
  // A persistent request's buffers were pinned at its init: if one was
  // freed since, its registration names pages that are not the buffer any
  // more. Refused before anything is sent (every rank that freed its buffer
  // sees it; its peers then time out or see it fail).
  if (op.held_pins > 0) ctx_.cache().check_held(op.pins, op.collective);
  op.seq = op.members_only ? calls_ : calls_++;
  fault_at_call(id_, op.seq);
  op.complete.store(false, std::memory_order_relaxed);
  op.status = 0;
  op.message.clear();
  op.next = nullptr;
  if (const int failed = failed_status()) {
    end_activation(op, failed, "the communicator failed earlier: " + failed_message_);
    return;
  }
  if (tail_)
    tail_->next = &op;
  else
    head_ = &op;
  tail_ = &op;
  advance();
  // Still queued: waiters on other communicators must advance it too. (A
  // call that completed at once - most blocking ones - never gets here.)
  if (head_) ctx_.note_pending(this);
}

FramePool* frame_pool_of(Communicator& comm) { return &comm.channel().frames(); }

void Communicator::begin(Operation& op) {
  channel_->use_pins(&op.pins);
  // User buffers are pinned where the transport needs it (RDMA); persistent
  // operations hold theirs since their init.
  // Buffers larger than the locked-memory limit lets a call pin are not:
  // such a call does not go zero-copy, and its sends are bounced through a
  // registered buffer (Channel::post_data).
  if (!op.persistent && channel_->needs_local_registration() && op.args.bytes > 0) {
    if (op.info)
      for (auto [buf, len] : op.info->buffers(op.args, size()))
        if (len <= channel_->pinnable_bytes()) channel_->pin(buf, len);
  }
  op.task = op.algorithm ? op.algorithm->run(*channel_, op.args) : op.body(*channel_);
}

// An operation ends only when its writes have completed (its sources may
// then change): after its task, it waits for the channel's signaled writes
// (on transports that copy at post there are none, and it ends at once).
bool Communicator::advance() {
  bool progressed = false;
  while (Operation* op = head_) {
    try {
      if (!op->task) {
        begin(*op);
      } else if (Blocker* b = blocked_on(*op)) {
        if (!b->poll(b)) return progressed;
      }
    } catch (const Error& e) {
      fail(e.status(), e.what());
      return true;
    }
    progressed = true;
    ++epoch_;
    if (!op->task.done() && !op->task.step()) return true;
    if (!op->task.failed() && !flush_->try_now()) return true;  // flushing
    finish(*op);
  }
  return progressed;
}

// The activation is over: its task goes, its own pins are released (a
// persistent operation keeps those of its init), its status is set and,
// last, it is complete: a thread waiting without the progress lock reads
// complete first and then the status (operation.hpp).
void Communicator::end_activation(Operation& op, int status, const std::string& message) {
  op.next = nullptr;
  op.task = Task();
  if (op.pins.size() > op.held_pins) release_own_pins(op);
  op.status = status;
  if (status) op.message = message;  // start() cleared it
  op.complete.store(true, std::memory_order_release);
}

void Communicator::release_own_pins(Operation& op) {
  for (size_t i = op.held_pins; i < op.pins.size(); ++i) {
    try {
      ctx_.cache().release(op.pins[i]);
    } catch (const Error&) {
      // Only a region the cache did not hand out throws: not one of ours.
    }
  }
  op.pins.resize(op.held_pins);
}

void Communicator::finish(Operation& op) {
  head_ = op.next;
  if (!head_) tail_ = nullptr;
  channel_->use_pins(nullptr);
  if (!op.task.failed()) {
    end_activation(op, 0, kNoMessage);
    return;
  }
  int status = COLL_ERR_INTERNAL;
  std::string message = "internal error: unknown exception";
  bool in_step = false;
  try {
    std::rethrow_exception(op.task.error());
  } catch (const Error& e) {
    status = e.status();
    message = e.what();
    in_step = dynamic_cast<const AgreedError*>(&e) != nullptr;
  } catch (const std::bad_alloc&) {
    status = COLL_ERR_NO_RESOURCES;
    message = "out of memory";
  } catch (const std::exception& e) {
    message = std::string("internal error: ") + e.what();
  } catch (...) {
  }
  end_activation(op, status, message);
  // A failure inside the exchange leaves the ranks out of step: sticky.
  // One that every rank reached alike after a completed exchange (an
  // argument mismatch under COLL_CHECK_ARGS) does not.
  if (!in_step) fail(status, message);
}

void Communicator::fail(int status, const std::string& message) {
  if (!failed_status_.load(std::memory_order_relaxed)) set_failed(status, message);
  end_queued(status, message);
}

void Communicator::set_failed(int status, const std::string& message) {
  failed_message_ = message;
  failed_status_.store(status, std::memory_order_release);
  // The peers that wait on this rank learn it now, not at COLL_TIMEOUT
  // (and tell theirs): a mismatch found at one rank fails every rank's
  // call within milliseconds.
  if (size() > 1) channel_->notify_failed(status);
}

void Communicator::end_queued(int status, const std::string& message) {
  while (Operation* op = head_) {
    head_ = op->next;
    end_activation(*op, status, message);
  }
  tail_ = nullptr;
  channel_->use_pins(nullptr);
}

void Communicator::release_pins(Operation& op) {
  persistent_ops_.erase(std::remove(persistent_ops_.begin(), persistent_ops_.end(), &op),
                        persistent_ops_.end());
  for (const MemoryRegion* mr : op.pins) {
    try {
      ctx_.cache().release(mr);
    } catch (const Error&) {
    }
  }
  op.pins.clear();
  op.held_pins = 0;
}

Task exchange_bytes(Channel& ch, Coll c, AlgorithmFn fn, const void* send, void* recv,
                    size_t bytes) {
  const CollectiveInfo& info = collective_info(c);
  Args a;
  a.sendbuf = send;
  a.recvbuf = recv;
  a.count = bytes;
  a.datatype = COLL_UINT8;
  info.check(a, ch.size(), ch.rank());
  // Sources and targets of writes, where the transport needs them
  // registered (the rule begin() applies to user buffers).
  if (ch.needs_local_registration())
    for (auto [buf, len] : info.buffers(a, ch.size())) ch.pin(buf, len);
  co_await fn(ch, a);
}

namespace {

// A member's new window, as traded: all bytes defined (it goes on the wire).
struct Published {
  uint64_t addr, length, rkey;
};

Published publish(const Communicator::Window& w) {
  return {reinterpret_cast<uintptr_t>(w.mr->addr), w.mr->length, w.mr->rkey};
}

// Gives back a window that no communicator took (a failed creation).
void drop_window(Context& ctx, Communicator::Window& w) {
  if (w.mr) ctx.transport().dereg(w.mr);
  if (w.memory) ctx.transport().free_window(w.memory, w.bytes);
  w = {};
}

// The communicator of the parent ranks `members` (in the new order; this
// rank among them), on window w, the members' windows by position.
std::unique_ptr<Communicator> assemble(Context& ctx, Channel& ch, const std::vector<int>& members,
                                       const Communicator::Window& w,
                                       const std::vector<Published>& windows) {
  std::vector<int> group;
  std::vector<RemoteRegion> peers;
  int new_rank = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == ch.rank()) new_rank = int(i);
    group.push_back(ch.transport_rank(members[i]));
    RemoteRegion rr;
    rr.addr = windows[i].addr;
    rr.length = windows[i].length;
    rr.rkey = uint32_t(windows[i].rkey);
    peers.push_back(rr);
  }
  return std::make_unique<Communicator>(ctx, ctx.next_comm_id(), std::move(group), new_rank,
                                        w.layout, w.memory, w.mr, std::move(peers));
}

uint64_t group_signature(const std::vector<int>& members) {
  // FNV-1a over the count and the ranks: alike on every member that was
  // given the same list.
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint64_t v) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(members.size());
  for (int r : members) mix(uint64_t(uint32_t(r)));
  return h;
}

// A child's key (Communicator::key) from its parent's and what tells the
// children of one parent apart (splitmix64's finalizer over both).
uint64_t derive_key(uint64_t parent, uint64_t what) {
  uint64_t z = parent * 0x9e3779b97f4a7c15ull + what + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Task Communicator::split_body(Channel& ch, int color, int key,
                              std::unique_ptr<Communicator>* out) {
  const int n = ch.size();
  const uint64_t seq = head_ ? head_->seq : calls_;  // this creation's number on the parent
  // Colors and keys, then windows: two allgathers over the parent. Every
  // rank takes part in both, COLL_UNDEFINED ones too (they send an empty
  // window). Bruck's: the blocks are a few bytes, and its ceil(log2 n)
  // steps beat the ring's n - 1 most where ranks share cores and every
  // step may wait for a peer to be scheduled.
  auto trade = [&ch](const void* mine, void* all, size_t bytes) {
    return exchange_bytes(ch, Coll::kAllgather, bruck_allgather, mine, all, bytes);
  };
  struct Entry {
    int32_t color, key;
  };
  std::vector<Entry> entries(static_cast<size_t>(n));
  const Entry mine{color, key};
  co_await trade(&mine, entries.data(), sizeof mine);

  std::vector<int> members;  // parent ranks, in the new order
  if (color != COLL_UNDEFINED) {
    for (int r = 0; r < n; ++r)
      if (entries[size_t(r)].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int x, int y) {
      return entries[size_t(x)].key < entries[size_t(y)].key;
    });
  }
  Window w;
  Published pub{};
  if (!members.empty()) {
    w = make_window(ctx_, int(members.size()));
    pub = publish(w);
  }
  std::vector<Published> all(static_cast<size_t>(n));
  try {
    co_await trade(&pub, all.data(), sizeof pub);
  } catch (...) {
    drop_window(ctx_, w);
    throw;
  }
  if (members.empty()) co_return;
  std::vector<Published> windows;
  for (int r : members) windows.push_back(all[size_t(r)]);
  *out = assemble(ctx_, ch, members, w, windows);
  // The call's number tells apart the children of successive calls, the
  // color those of one split.
  (*out)->key_ = derive_key(derive_key(key_, seq), uint64_t(uint32_t(color)));
}

Task Communicator::create_group_body(Channel& ch, std::vector<int> members, int tag,
                                     std::unique_ptr<Communicator>* out) {
  // One allgather among the members only, over the parent's channel: each
  // one's new window, with the tag and the signature of the rank list,
  // which every member then checks against its own (a disagreement is
  // the caller's error: the members' pair sequences on the parent may be
  // out of step after it, so the parent fails too - see api.cpp).
  struct Entry {
    Published window;
    uint64_t tag, signature;
  };
  const uint64_t signature = group_signature(members);
  // The exchange runs over the members in parent order, whatever order the
  // list gives: members that were given the same set in different orders
  // then still complete it and see the other's signature (an error, not a
  // hang). Only members given different sets may wait on each other (and
  // MPI would hang there too).
  std::vector<int> by_rank = members;
  std::sort(by_rank.begin(), by_rank.end());
  auto place = [&by_rank](int r) {
    return size_t(std::lower_bound(by_rank.begin(), by_rank.end(), r) - by_rank.begin());
  };
  Window w = make_window(ctx_, int(members.size()));
  Entry mine{publish(w), uint64_t(uint32_t(tag)), signature};
  std::vector<Entry> all(members.size());  // by parent rank
  try {
    Args a;
    a.sendbuf = &mine;
    a.recvbuf = all.data();
    a.count = sizeof mine;
    a.datatype = COLL_UINT8;
    a.elem_size = 1;
    if (ch.needs_local_registration()) {
      ch.pin(&mine, sizeof mine);
      ch.pin(all.data(), all.size() * sizeof mine);
    }
    co_await bruck_allgather_among(ch, by_rank, int(place(ch.rank())), a);
    for (size_t i = 0; i < members.size(); ++i) {
      const Entry& e = all[i];
      if (e.tag != mine.tag)
        coll::fail(COLL_ERR_INVALID_ARG,
                   "coll_comm_create_group: tag %d here, %llu at parent rank %d: every member "
                   "passes the same tag (or concurrent creations sharing two members ran in "
                   "different orders on them)",
                   tag, static_cast<unsigned long long>(e.tag), by_rank[i]);
      if (e.signature != signature)
        coll::fail(COLL_ERR_INVALID_ARG,
                   "coll_comm_create_group: parent rank %d passed another rank list (count or "
                   "order) than this rank's %zu ranks: every member passes the same list",
                   by_rank[i], members.size());
    }
  } catch (...) {
    drop_window(ctx_, w);
    throw;
  }
  std::vector<Published> windows;
  for (int r : members) windows.push_back(all[place(r)].window);
  *out = assemble(ctx_, ch, members, w, windows);
  // Not numbered among the parent's calls: the group, the tag and the
  // parent's count of calls tell it apart (the same group and tag made
  // twice with no parent call between would share a key).
  (*out)->key_ = derive_key(derive_key(derive_key(key_, signature), uint64_t(uint32_t(tag))),
                            calls_ | (uint64_t(1) << 63));
}

void Communicator::build_hierarchy() {
  const int n = size(), me = rank();
  if (!ctx_.config().hierarchy || n < 3) return;
  // Hosts numbered in the order of their lowest rank.
  const std::vector<std::string>& host_names = ctx_.host_map().hosts;
  std::vector<int> host_of(static_cast<size_t>(n)), node_rank(static_cast<size_t>(n)), on_host;
  std::vector<std::string> seen;
  for (int r = 0; r < n; ++r) {
    const std::string& name = host_names[size_t(channel_->transport_rank(r))];
    const auto at = std::find(seen.begin(), seen.end(), name);
    const int h = int(at - seen.begin());
    if (at == seen.end()) {
      seen.push_back(name);
      on_host.push_back(0);
    }
    host_of[size_t(r)] = h;
    node_rank[size_t(r)] = on_host[size_t(h)]++;
  }
  const int hosts = int(seen.size());
  // One host: nothing to gain. A rank per host: the leaders are everyone.
  if (hosts == 1 || hosts == n) return;
  const bool leads = node_rank[size_t(me)] == 0;
  auto split = [this](int color, int key, std::unique_ptr<Communicator>* out) {
    auto op = make_internal("hierarchy", [this, color, key, out](Channel& ch) {
      return split_body(ch, color, key, out);
    });
    {
      std::unique_lock<std::mutex> l(progress_mutex(), std::defer_lock);
      if (ctx_.locking()) l.lock();
      start(*op);
    }
    ctx_.wait(*op);
    if (op->status) throw Error(op->status, op->message);
  };
  // Both splits on every rank, in this order (they are collectives here).
  split(host_of[size_t(me)], me, &node_comm_);
  split(leads ? 0 : COLL_UNDEFINED, me, &leader_comm_);
  hierarchy_.node = &node_comm_->channel();
  hierarchy_.leaders = leader_comm_ ? &leader_comm_->channel() : nullptr;
  hierarchy_.host_of = std::move(host_of);
  hierarchy_.node_rank = std::move(node_rank);
  channel_->set_hierarchy(&hierarchy_);
  for (Coll c : {Coll::kAllreduce, Coll::kBcast, Coll::kReduce, Coll::kBarrier})
    hierarchical_[int(c)] = &find_algorithm(c, "hierarchical");
}

// --- fault recovery -------------------------------------------------------

void Communicator::revoke(const std::string& why) {
  if (revoked_.exchange(true, std::memory_order_acq_rel)) return;
  // Overrides an earlier failure (PEER_LOST, typically: the failure that
  // made the application revoke): from now on every call says REVOKED.
  set_failed(COLL_ERR_REVOKED, why);
  end_queued(COLL_ERR_REVOKED, why);
}

bool Communicator::check_revoked() {
  if (revoked()) return true;
  if (size() > 1)
    if (const int p = channel_->peer_failed_with(COLL_ERR_REVOKED); p >= 0)
      revoke(strfmt("rank %d: the communicator was revoked (rank %d's coll_comm_revoke, or a "
                    "member that learned it from another)",
                    rank(), p));
  return revoked();
}

// A member that finalized left; it did not fail, and is not one of the
// failed (ULFM's: a process that called MPI_Finalize is not a failed one).
// Its `left` notice (Channel::quiesce, posted after every other write of
// its coll_finalize, on each of its communicators that had not failed) is
// in this communicator's window or the world's; from then on its
// transport may well say it is gone (shm: its segment closed, its process
// exited; tcp: its stream closed, its listener refusing), which is what
// counted it before. A peer whose notice did not reach this rank - tcp
// without a stream between the two (the notice is dropped rather than
// dialed), or a member whose communicators had all failed before it
// finalized - cannot be told from a dead one, and still counts.
bool Communicator::member_left(int r) {
  if (channel_->peer_left(r)) return true;
  Communicator& world = ctx_.world();
  const int w = channel_->transport_rank(r);
  return &world != this && w != world.rank() && world.channel().peer_left(w);
}

const std::vector<int>& Communicator::refresh_failed() {
  for (int r = 0; r < size(); ++r) {
    if (r == rank() || std::find(failed_.begin(), failed_.end(), r) != failed_.end()) continue;
    if (member_left(r)) continue;
    const int world = channel_->transport_rank(r);
    bool dead = ctx_.known_dead(world);
    if (!dead) {
      try {
        ctx_.transport().check_peer(world);
      } catch (const Error& e) {
        // The check may have applied the notice just now (tcp reads its
        // streams there: the notice, then the stream's end).
        dead = e.status() == COLL_ERR_PEER_LOST && !member_left(r);
      }
    }
    if (dead) failed_.push_back(r);
  }
  return failed_;
}

size_t Communicator::ack_failed(size_t n) {
  acked_ = std::max(acked_, std::min(n, refresh_failed().size()));
  return acked_;
}

namespace {

// The members' world ranks, increasing (a survivor round's member list),
// and for each its rank in the communicator.
struct RoundMembers {
  std::vector<int> world;
  std::vector<int> rank;
};

RoundMembers round_members(const Channel& ch, const std::vector<int>& ranks) {
  std::vector<std::pair<int, int>> by_world;
  for (int r : ranks) by_world.emplace_back(ch.transport_rank(r), r);
  std::sort(by_world.begin(), by_world.end());
  RoundMembers m;
  for (auto [w, r] : by_world) {
    m.world.push_back(w);
    m.rank.push_back(r);
  }
  return m;
}

}  // namespace

void Communicator::agree(int* flag) {
  // One survivor round: each member's flag and the failures it has
  // acknowledged. The launcher decides who took part, and every survivor
  // gets the same answer, so the AND and the verdict on acknowledgements
  // below come out alike everywhere.
  std::vector<int> all(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) all[size_t(r)] = r;
  const RoundMembers m = round_members(*channel_, all);
  refresh_failed();
  std::string mine(sizeof(int32_t), '\0');
  const int32_t f = *flag;
  std::memcpy(mine.data(), &f, sizeof f);
  for (size_t i = 0; i < acked_; ++i) {
    const int32_t r = failed_[i];
    mine.append(reinterpret_cast<const char*>(&r), sizeof r);
  }
  const uint64_t key = derive_key(derive_key(key_, 0x4147524545ull), agreements_++);
  auto got = ctx_.bootstrap().survivor_round(key, m.world, mine, ctx_.config().timeout_s);
  if (got.size() != m.world.size())
    coll::fail(COLL_ERR_INTERNAL, "coll_comm_agree: %zu answers for %zu members", got.size(),
         m.world.size());
  int32_t result = ~int32_t(0);
  std::vector<int> dead;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i]) {
      dead.push_back(m.rank[i]);
      ctx_.note_dead(m.world[i]);
      continue;
    }
    if (got[i]->size() < sizeof(int32_t) || (got[i]->size() - sizeof(int32_t)) % sizeof(int32_t))
      coll::fail(COLL_ERR_INTERNAL, "coll_comm_agree: a member's part of %zu bytes", got[i]->size());
    int32_t v;
    std::memcpy(&v, got[i]->data(), sizeof v);
    result &= v;
  }
  refresh_failed();
  *flag = int(result);
  // Uniform: a failure found by the round that some survivor has not
  // acknowledged is every survivor's PEER_LOST.
  for (int d : dead)
    for (size_t i = 0; i < got.size(); ++i) {
      if (!got[i]) continue;
      bool acked = false;
      for (size_t at = sizeof(int32_t); at < got[i]->size(); at += sizeof(int32_t)) {
        int32_t r;
        std::memcpy(&r, got[i]->data() + at, sizeof r);
        acked = acked || r == d;
      }
      if (!acked)
        coll::fail(COLL_ERR_PEER_LOST,
             "coll_comm_agree: rank %d has failed and rank %d has not acknowledged it "
             "(coll_comm_ack_failed); the flag is agreed (%d)",
             d, m.rank[i], int(result));
    }
}

std::unique_ptr<Communicator> Communicator::shrink() {
  // Two survivor rounds: who is alive (the launcher's verdict, the same for
  // every survivor), then the survivors' new windows. A member that dies
  // between the two is missing from the second: the windows were sized for
  // a group that no longer exists, so the survivors drop them and go again
  // with the smaller group (every survivor sees the same answer, so they
  // all go again).
  std::vector<int> alive(static_cast<size_t>(size()));
  for (int r = 0; r < size(); ++r) alive[size_t(r)] = r;
  const uint64_t base = derive_key(derive_key(key_, 0x5348524e4bull), shrinks_++);
  const double timeout = ctx_.config().timeout_s;
  for (uint64_t attempt = 0;; ++attempt) {
    RoundMembers m = round_members(*channel_, alive);
    auto who = ctx_.bootstrap().survivor_round(derive_key(base, 2 * attempt), m.world,
                                               std::string(), timeout);
    alive.clear();
    for (size_t i = 0; i < who.size(); ++i) {
      if (who[i])
        alive.push_back(m.rank[i]);
      else
        ctx_.note_dead(m.world[i]);
    }
    std::sort(alive.begin(), alive.end());  // the new order is the old one
    m = round_members(*channel_, alive);
    Window w = make_window(ctx_, int(alive.size()));
    const Published pub = publish(w);
    std::vector<std::optional<std::string>> windows;
    try {
      windows = ctx_.bootstrap().survivor_round(
          derive_key(base, 2 * attempt + 1), m.world,
          std::string(reinterpret_cast<const char*>(&pub), sizeof pub), timeout);
    } catch (...) {
      drop_window(ctx_, w);
      throw;
    }
    bool complete = true;
    for (size_t i = 0; i < windows.size(); ++i) {
      if (!windows[i]) {
        complete = false;
        ctx_.note_dead(m.world[i]);
      } else if (windows[i]->size() != sizeof(Published)) {
        drop_window(ctx_, w);
        coll::fail(COLL_ERR_INTERNAL, "coll_comm_shrink: a window of %zu bytes", windows[i]->size());
      }
    }
    if (!complete) {
      drop_window(ctx_, w);
      std::vector<int> still;
      for (size_t i = 0; i < windows.size(); ++i)
        if (windows[i]) still.push_back(m.rank[i]);
      alive = still;
      std::sort(alive.begin(), alive.end());
      continue;
    }
    std::vector<int> group;
    std::vector<RemoteRegion> peers;
    int new_rank = -1;
    for (size_t k = 0; k < alive.size(); ++k) {
      const int r = alive[k];
      if (r == rank()) new_rank = int(k);
      const int world = channel_->transport_rank(r);
      group.push_back(world);
      // m.world is increasing, alive in communicator order: find r's place.
      const size_t i = size_t(std::find(m.world.begin(), m.world.end(), world) - m.world.begin());
      Published p;
      std::memcpy(&p, windows[i]->data(), sizeof p);
      RemoteRegion rr;
      rr.addr = p.addr;
      rr.length = p.length;
      rr.rkey = uint32_t(p.rkey);
      peers.push_back(rr);
    }
    refresh_failed();
    auto made = std::make_unique<Communicator>(ctx_, ctx_.next_comm_id(), std::move(group),
                                               new_rank, w.layout, w.memory, w.mr,
                                               std::move(peers));
    made->key_ = derive_key(base, ~uint64_t(0));
    return made;
  }
}

}  // namespace coll
