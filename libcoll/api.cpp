// The C API: argument checks live in the collective descriptors and the
// Communicator; here every call is wrapped so that no exception crosses
// into C, handles are validated, and the message of a failure is kept on
// the communicator (coll_comm_last_error).
//
// Handles. coll_comm_t and coll_request_t are not pointers to our objects
// but (generation << 32 | slot + 1) in a handle table: a freed handle, one
// from before coll_finalize, or garbage finds no live slot of its
// generation and gets COLL_ERR_INVALID_ARG, never a crash.
#include <coll/coll.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "communicator.hpp"
#include "context.hpp"
#include "datatype.hpp"
#include "env.hpp"
#include "error.hpp"
#include "user_op.hpp"

namespace {

// What a communicator handle names.
// The last error message of a communicator. Several threads may fail calls
// on one communicator at once (two entering it together, which is
// erroneous and refused, both store why): stores are serialized, and each
// reader gets a copy of its own, valid until its thread's next read.
class ErrorText {
 public:
  ErrorText& operator=(std::string text) {
    std::lock_guard<std::mutex> lock(mutex_);
    text_ = std::move(text);
    return *this;
  }
  const char* read() const {
    thread_local std::string copy;
    std::lock_guard<std::mutex> lock(mutex_);
    copy = text_;
    return copy.c_str();
  }

 private:
  mutable std::mutex mutex_;
  std::string text_;
};

struct CommEntry {
  coll::Communicator* impl = nullptr;
  ErrorText last_error;
};

// What a request handle names: an operation the request owns, and the
// handle of its communicator (checked at every use: the communicator may
// have been freed since).
struct RequestEntry {
  std::unique_ptr<coll::Operation> op;
  coll_comm_t comm = COLL_COMM_NULL;
  std::string last_error;
  // A persistent request from its coll_start until a wait or test returns
  // its completion. Not op.complete: an activation may complete inside
  // coll_start on one rank and not on another, and a second coll_start
  // must be refused on every rank alike, before anything is sent.
  bool active = false;
};

// Never destroyed: a process that exits without coll_finalize (or from a
// signal handler) must not run destructors of operations that may still be
// queued.
template <class T>
class HandleTable {
 public:
  // Takes ownership of obj.
  uintptr_t add(std::unique_ptr<T> obj) {
    std::lock_guard<std::mutex> l(mutex_);
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = next_++;
      if (index / kChunk >= kChunks) throw coll::Error(COLL_ERR_NO_RESOURCES, "too many handles");
      if (!chunks_[index / kChunk].load()) chunks_[index / kChunk].store(new Slot[kChunk]);
    }
    Slot& s = slot(index);
    s.obj = std::move(obj);
    return (uintptr_t(s.generation.load()) << 32) | (uintptr_t(index) + 1);
  }
  T* get(const void* handle) const {
    const auto h = reinterpret_cast<uintptr_t>(handle);
    const uint32_t low = uint32_t(h & 0xffffffffu);
    if (low == 0 || low - 1 >= next_.load(std::memory_order_acquire)) return nullptr;
    const uint32_t index = low - 1;
    Slot* chunk = chunks_[index / kChunk].load(std::memory_order_acquire);
    if (!chunk) return nullptr;
    Slot& s = chunk[index % kChunk];
    if (s.generation.load(std::memory_order_acquire) != uint32_t(h >> 32)) return nullptr;
    return s.obj.get();
  }
  std::unique_ptr<T> remove(const void* handle) {
    std::lock_guard<std::mutex> l(mutex_);
    if (!get(handle)) return nullptr;
    const uint32_t index = uint32_t(reinterpret_cast<uintptr_t>(handle) & 0xffffffffu) - 1;
    Slot& s = slot(index);
    s.generation.fetch_add(1);
    free_.push_back(index);
    return std::move(s.obj);
  }
  // Every live object, for finalize.
  std::vector<std::unique_ptr<T>> remove_all() {
    std::lock_guard<std::mutex> l(mutex_);
    std::vector<std::unique_ptr<T>> all;
    for (uint32_t i = 0; i < next_; ++i) {
      Slot& s = slot(i);
      if (!s.obj) continue;
      s.generation.fetch_add(1);
      free_.push_back(i);
      all.push_back(std::move(s.obj));
    }
    return all;
  }

 private:
  static constexpr uint32_t kChunk = 4096, kChunks = 1024;
  struct Slot {
    std::atomic<uint32_t> generation{1};
    std::unique_ptr<T> obj;
  };
  Slot& slot(uint32_t index) const { return chunks_[index / kChunk].load()[index % kChunk]; }

  std::atomic<Slot*> chunks_[kChunks] = {};
  std::atomic<uint32_t> next_{0};
  std::vector<uint32_t> free_;
  std::mutex mutex_;
};

std::mutex g_mutex;  // guards init / finalize
// Not a unique_ptr: exit() without coll_finalize must not tear down a
// context whose peers may still be in a collective (the old rule: only
// coll_finalize finalizes).
coll::Context* g_context = nullptr;
std::atomic<bool> g_initialized{false};
coll_comm_t g_world = COLL_COMM_NULL;
ErrorText g_init_error;  // last failure of coll_init / coll_finalize / a handle check
HandleTable<CommEntry> g_comms;
HandleTable<RequestEntry> g_requests;

// Runs body, turning exceptions into a status and a stored message.
template <class Text, class Body>
[[gnu::always_inline]] inline int guarded(Text& message, Body body) {
  try {
    body();
    return COLL_SUCCESS;
  } catch (const coll::Error& e) {
    message = e.what();
    return e.status();
  } catch (const std::bad_alloc&) {
    message = "out of memory";
    return COLL_ERR_NO_RESOURCES;
  } catch (const std::exception& e) {
    message = std::string("internal error: ") + e.what();
    return COLL_ERR_INTERNAL;
  } catch (...) {
    message = "internal error: unknown exception";
    return COLL_ERR_INTERNAL;
  }
}

// C callers may pass any int as a coll_datatype_t or coll_op_t, and loading
// an out-of-range value as the C++ enum is undefined behaviour: read the
// bits as an int instead, and let the descriptors reject bad values.
template <class Enum>
int raw_enum(const Enum& e) {
  static_assert(sizeof(int) == sizeof(Enum));
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Every COLL_ERR_INVALID_ARG carries a message: COLL_COMM_NULL's (the
// handle may be bad), and the communicator's where one is known, since
// that is where a caller looks (coll_comm_last_error(comm)).
int bad_handle(const std::string& what) {
  g_init_error = what;
  return COLL_ERR_INVALID_ARG;
}

int comm_error(coll_comm_t comm, const std::string& what) {
  if (CommEntry* e = comm != COLL_COMM_NULL ? g_comms.get(comm) : nullptr) e->last_error = what;
  return bad_handle(what);
}

// A failed wait, test or free of a request: its message also on its
// communicator, if that is still alive.
void copy_request_error(const RequestEntry& r) {
  if (CommEntry* c = g_comms.get(r.comm)) c->last_error = r.last_error;
  g_init_error = r.last_error;
}

// One thread at a time may be inside a call that starts operations on a
// communicator (MPI's rule for collectives); a second one is told so.
class EntryGuard {
 public:
  // Where threads meet (COLL_THREAD_MULTIPLE) the flag is taken with an
  // atomic exchange, which detects every overlap; below that level only
  // one thread calls at a time by contract, and a plain load and store
  // (an exchange costs about 25 ns, a tenth of a small collective here)
  // still catch a program that breaks it, though not every time.
  explicit EntryGuard(coll::Communicator& c) : flag_(c.in_use()) {
    const bool locking = c.context().locking();
    const bool taken = locking ? flag_.exchange(true, std::memory_order_acquire)
                               : flag_.load(std::memory_order_relaxed);
    if (!taken && !locking) flag_.store(true, std::memory_order_relaxed);
    if (!taken) return;
    std::string what =
        "another thread is inside a call on this communicator: concurrent collective calls on "
        "one communicator are erroneous (use one communicator per thread, e.g. coll_comm_dup)";
    // The other threads' calls may already have paired differently on each
    // rank (thread A's call here with thread B's at a peer: same counts,
    // another's data), which no rank can see. Refusing this call alone
    // would let those complete with COLL_SUCCESS; failing the communicator
    // fails the call inside it here and, through the notice fail() posts,
    // every peer's call that waits on this rank, and every later call on
    // every rank (issue 31 item 2). Only where threads meet: below
    // MULTIPLE the caller inside holds no lock that would keep this
    // thread's fail() off its queue.
    if (locking) {
      what += "; the communicator is failed on every rank (free it)";
      std::lock_guard<std::mutex> l(c.progress_mutex());
      c.fail(COLL_ERR_INVALID_ARG, what);
    }
    coll::fail(COLL_ERR_INVALID_ARG, "%s", what.c_str());
  }
  ~EntryGuard() {
    if (armed_) flag_.store(false, std::memory_order_release);  // a plain store on x86
  }
  // The communicator is about to be destroyed: nothing to reset after.
  void dismiss() { armed_ = false; }

 private:
  std::atomic<bool>& flag_;
  bool armed_ = true;
};

// Checks the communicator handle, then runs body(entry, communicator).
template <class Body>
int on_comm(coll_comm_t comm, Body body) {
  if (!g_initialized.load(std::memory_order_acquire)) return COLL_ERR_NOT_INITIALIZED;
  if (comm == COLL_COMM_NULL) return bad_handle("COLL_COMM_NULL is not a communicator");
  CommEntry* e = g_comms.get(comm);
  if (!e) return bad_handle("not a communicator handle (freed, from before coll_finalize, or garbage)");
  return guarded(e->last_error, [&] { body(*e, *e->impl); });
}

// A collective call: blocking (request == nullptr), non-blocking, or
// persistent (init).
enum class Mode { kBlocking, kNonblocking, kPersistent };

int collective(coll_comm_t comm, coll::Coll c, coll::Args args, coll_request_t* request,
               Mode mode) {
  const bool blocking = mode == Mode::kBlocking, persistent = mode == Mode::kPersistent;
  return on_comm(comm, [&](CommEntry& entry, coll::Communicator& cm) {
    coll::Context& ctx = cm.context();
    EntryGuard guard(cm);
    if (!blocking && !request) {
      const coll::Error e(COLL_ERR_INVALID_ARG,
                          coll::strfmt("%s: NULL request", coll::collective_info(c).name));
      // A persistent init is collective (Communicator::agree_at_init):
      // the refuser waits in its exchange as the others do.
      cm.refuse(coll::collective_info(c), e.status(), e.what(), persistent, persistent);
      throw e;
    }
    if (blocking) {
      coll::Operation* op = cm.start_blocking(c, args);
      if (!op) return;
      ctx.wait(*op);
      if (op->status) throw coll::Error(op->status, op->message);
      return;
    }
    (void)entry;
    auto req = std::make_unique<RequestEntry>();
    req->comm = comm;
    req->op = std::make_unique<coll::Operation>();
    coll::Operation& op = *req->op;
    op.comm = &cm;
    if (cm.make_collective(c, args, persistent, op) && !persistent) {
      std::unique_lock<std::mutex> l(cm.progress_mutex(), std::defer_lock);
      if (ctx.locking()) l.lock();
      cm.start(op);
    }
    *request = reinterpret_cast<coll_request_t>(g_requests.add(std::move(req)));
  });
}

// Completes a request's activation (its status is the call's); a
// non-persistent request is then freed.
int complete_request(coll_request_t* request, bool block, int* flag) {
  if (!g_initialized.load(std::memory_order_acquire)) return COLL_ERR_NOT_INITIALIZED;
  if (!request) return bad_handle("NULL request pointer");
  if (*request == COLL_REQUEST_NULL) {
    if (flag) *flag = 1;
    return COLL_SUCCESS;
  }
  RequestEntry* r = g_requests.get(*request);
  if (!r) return bad_handle("not a request handle (freed, from before coll_finalize, or garbage)");
  coll::Operation& op = *r->op;
  // An active operation keeps its communicator from being freed (free
  // completes it first): op.comm is alive while !op.complete.
  int status = guarded(r->last_error, [&] {
    if (op.complete) return;  // inactive persistent request, or done at start
    coll::Context& ctx = op.comm->context();
    if (block)
      ctx.wait(op);
    else
      ctx.test(op);
  });
  if (status) {
    copy_request_error(*r);
    return status;
  }
  const bool done = op.complete;
  if (flag) *flag = done;
  if (!done) return COLL_SUCCESS;
  r->active = false;
  status = op.status;
  if (status) {
    r->last_error = op.message;
    if (CommEntry* c = g_comms.get(r->comm)) c->last_error = op.message;
  }
  if (!op.persistent) {
    g_requests.remove(*request);
    *request = COLL_REQUEST_NULL;
  }
  return status;
}

// The first pair of equal requests (not COLL_REQUEST_NULL) in a waitall
// list, as indices. Lists are short: a quadratic scan allocates nothing;
// long ones are sorted.
std::optional<std::pair<size_t, size_t>> find_duplicate(size_t count,
                                                        const coll_request_t requests[]) {
  if (count <= 32) {
    for (size_t i = 1; i < count; ++i)
      for (size_t j = 0; j < i && requests[i] != COLL_REQUEST_NULL; ++j)
        if (requests[j] == requests[i]) return std::pair{j, i};
    return std::nullopt;
  }
  std::vector<std::pair<coll_request_t, size_t>> sorted;
  sorted.reserve(count);
  for (size_t i = 0; i < count; ++i)
    if (requests[i] != COLL_REQUEST_NULL) sorted.emplace_back(requests[i], i);
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 1; k < sorted.size(); ++k)
    if (sorted[k].first == sorted[k - 1].first)
      return std::pair{sorted[k - 1].second, sorted[k].second};
  return std::nullopt;
}

// Runs make(channel, &made), a creation body, as an operation of the
// parent c (queued behind its earlier operations) and gives what it made
// a handle in *newcomm (nothing made: *newcomm stays COLL_COMM_NULL).
template <class Make>
void make_comm(coll::Communicator& c, const char* what, Make make, coll_comm_t* newcomm,
               bool members_only = false) {
  coll::Context& ctx = c.context();
  std::unique_ptr<coll::Communicator> made;
  auto op = c.make_internal(what, [make, &made](coll::Channel& ch) { return make(ch, &made); });
  op->members_only = members_only;
  {
    std::unique_lock<std::mutex> l(c.progress_mutex(), std::defer_lock);
    if (ctx.locking()) l.lock();
    c.start(*op);
  }
  ctx.wait(*op);
  if (op->status) throw coll::Error(op->status, op->message);
  if (!made) return;  // COLL_UNDEFINED
  auto entry = std::make_unique<CommEntry>();
  entry->impl = ctx.adopt(std::move(made));
  try {
    entry->impl->build_hierarchy();  // every rank of the new communicator
  } catch (...) {
    ctx.free(entry->impl);
    throw;
  }
  *newcomm = reinterpret_cast<coll_comm_t>(g_comms.add(std::move(entry)));
}

}  // namespace

namespace {

// coll_init_thread and coll_init_oob: `call` names the caller in errors;
// `make_boot` makes the bootstrap from the configuration's timeout.
template <typename MakeBoot>
int init_with(const char* call, int required, int* provided, MakeBoot make_boot) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_initialized) {
    g_init_error = coll::strfmt("%s: libcoll is initialized already (coll_init called twice)", call);
    return COLL_ERR_INVALID_ARG;
  }
  if (required < COLL_THREAD_SINGLE || required > COLL_THREAD_MULTIPLE) {
    g_init_error = coll::strfmt(
        "%s: required thread level %d (valid: COLL_THREAD_SINGLE .. "
        "COLL_THREAD_MULTIPLE, 0..3)",
        call, required);
    return COLL_ERR_INVALID_ARG;
  }
  return guarded(g_init_error, [&] {
    coll::Config config = coll::load_config();
    auto boot = make_boot(config.timeout_s);
    g_context = new coll::Context(std::move(boot), config, required);
    auto world = std::make_unique<CommEntry>();
    world->impl = &g_context->world();
    g_world = reinterpret_cast<coll_comm_t>(g_comms.add(std::move(world)));
    if (provided) *provided = required;
    g_init_error = std::string();
    g_initialized = true;
  });
}

}  // namespace

extern "C" {

int coll_init_thread(int* /*argc*/, char*** /*argv*/, int required, int* provided) {
  return init_with("coll_init_thread", required, provided, [](double timeout_s) {
    return coll::make_bootstrap_from_environment(timeout_s);
  });
}

int coll_init_oob(const coll_oob_t* oob, int required, int* provided) {
  // Checked before anything is called: a bad rank or size given to the
  // allgather would have it write outside its recvbuf.
  const char* bad = !oob                                 ? "NULL oob"
                    : !oob->allgather                    ? "NULL oob->allgather"
                    : oob->size < 1                      ? "oob->size below 1"
                    : oob->rank < 0 || oob->rank >= oob->size ? "oob->rank outside [0, size)"
                                                         : nullptr;
  if (bad) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_init_error = oob ? coll::strfmt("coll_init_oob: %s (rank %d, size %d)", bad, oob->rank,
                                      oob->size)
                       : coll::strfmt("coll_init_oob: %s", bad);
    return COLL_ERR_INVALID_ARG;
  }
  const coll_oob_t copy = *oob;
  return init_with("coll_init_oob", required, provided, [&copy](double timeout_s) {
    return coll::make_oob_bootstrap(copy, timeout_s);
  });
}

int coll_init(int* argc, char*** argv) {
  return coll_init_thread(argc, argv, COLL_THREAD_SINGLE, nullptr);
}

int coll_finalize(void) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_initialized) return COLL_ERR_NOT_INITIALIZED;
  g_initialized = false;
  // Operations still queued complete first (the finalize handshake runs
  // behind them); then every handle goes stale.
  int status = guarded(g_init_error, [&] { delete std::exchange(g_context, nullptr); });
  g_requests.remove_all();
  g_comms.remove_all();
  g_world = COLL_COMM_NULL;
  return status;
}

int coll_initialized(int* flag) {
  if (!flag) return bad_handle("coll_initialized: NULL flag");
  *flag = g_initialized.load();
  return COLL_SUCCESS;
}

coll_comm_t coll_comm_world(void) { return g_initialized ? g_world : COLL_COMM_NULL; }

int coll_comm_rank(coll_comm_t comm, int* rank) {
  return on_comm(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!rank) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_rank: NULL rank");
    *rank = c.rank();
  });
}

int coll_comm_size(coll_comm_t comm, int* size) {
  return on_comm(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!size) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_size: NULL size");
    *size = c.size();
  });
}

// dup and split: a collective on the parent (every rank of it calls).
static int create(coll_comm_t comm, int color, int key, bool dup, coll_comm_t* newcomm) {
  return on_comm(comm, [&](CommEntry&, coll::Communicator& c) {
    const char* what = dup ? "coll_comm_dup" : "coll_comm_split";
    if (!newcomm) coll::fail(COLL_ERR_INVALID_ARG, "%s: NULL newcomm", what);
    if (!dup && color < 0 && color != COLL_UNDEFINED)
      coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_split: color %d (a color is >= 0 or COLL_UNDEFINED)",
                 color);
    *newcomm = COLL_COMM_NULL;
    EntryGuard guard(c);
    const int k = dup ? c.rank() : key;
    const int col = dup ? 0 : color;
    make_comm(
        c, what,
        [&c, col, k](coll::Channel& ch, std::unique_ptr<coll::Communicator>* out) {
          return c.split_body(ch, col, k, out);
        },
        newcomm);
  });
}

int coll_comm_dup(coll_comm_t comm, coll_comm_t* newcomm) {
  return create(comm, 0, 0, true, newcomm);
}

int coll_comm_split(coll_comm_t comm, int color, int key, coll_comm_t* newcomm) {
  return create(comm, color, key, false, newcomm);
}

// A collective over the members only (Communicator::create_group_body
// says why that is sound on the parent's channel). The arguments are
// checked here, before anything is sent: a rank that rejects them leaves
// the parent untouched.
int coll_comm_create_group(coll_comm_t comm, int n, const int ranks[], int tag,
                           coll_comm_t* newcomm) {
  return on_comm(comm, [&](CommEntry&, coll::Communicator& c) {
    const char* what = "coll_comm_create_group";
    if (!newcomm) coll::fail(COLL_ERR_INVALID_ARG, "%s: NULL newcomm", what);
    *newcomm = COLL_COMM_NULL;
    const int size = c.size(), me = c.rank();
    if (n <= 0 || n > size)
      coll::fail(COLL_ERR_INVALID_ARG,
                 "%s: n %d (the group has 1 to %d ranks of the parent, the caller among them)",
                 what, n, size);
    if (!ranks) coll::fail(COLL_ERR_INVALID_ARG, "%s: NULL ranks", what);
    if (tag < 0) coll::fail(COLL_ERR_INVALID_ARG, "%s: tag %d (a tag is >= 0)", what, tag);
    std::vector<int> members(ranks, ranks + n);
    std::vector<char> seen(size_t(size), 0);
    bool listed = false;
    for (int i = 0; i < n; ++i) {
      const int r = members[size_t(i)];
      if (r < 0 || r >= size)
        coll::fail(COLL_ERR_INVALID_ARG, "%s: ranks[%d] = %d, not a rank of the parent (0 to %d)",
                   what, i, r, size - 1);
      if (seen[size_t(r)])
        coll::fail(COLL_ERR_INVALID_ARG, "%s: ranks[%d] = %d appears twice", what, i, r);
      seen[size_t(r)] = 1;
      listed = listed || r == me;
    }
    if (!listed)
      coll::fail(COLL_ERR_INVALID_ARG,
                 "%s: the caller (parent rank %d) is not in ranks: only the members call it", what,
                 me);
    // Creations on one parent from several threads take turns: the
    // channel cannot tell two of them apart by their tag (see
    // create_group_body). Before the entry guard, so that the second
    // waits instead of being refused.
    std::lock_guard<std::mutex> serial(c.create_mutex());
    EntryGuard guard(c);
    make_comm(
        c, what,
        [&c, members = std::move(members), tag](coll::Channel& ch,
                                                std::unique_ptr<coll::Communicator>* out) {
          return c.create_group_body(ch, members, tag, out);
        },
        newcomm, /*members_only=*/true);
  });
}

int coll_comm_free(coll_comm_t* comm) {
  if (!g_initialized.load(std::memory_order_acquire)) return COLL_ERR_NOT_INITIALIZED;
  if (!comm) return bad_handle("coll_comm_free: NULL pointer");
  if (*comm == COLL_COMM_NULL) return bad_handle("coll_comm_free: COLL_COMM_NULL");
  if (*comm == g_world)
    return comm_error(*comm, "coll_comm_free: the world communicator is freed by coll_finalize");
  CommEntry* e = g_comms.get(*comm);
  if (!e) return bad_handle("coll_comm_free: not a communicator handle (freed already?)");
  int status = guarded(e->last_error, [&] {
    EntryGuard guard(*e->impl);
    coll::Context& ctx = e->impl->context();
    guard.dismiss();
    ctx.free(e->impl);  // completes its queued operations, closes it, destroys it
  });
  // A request of this communicator that is still allocated now names a
  // communicator that is gone: its handle stays valid and reports that.
  g_comms.remove(*comm);
  *comm = COLL_COMM_NULL;
  return status;
}

}  // extern "C"

namespace {

// Built as prvalues (designated initializers), so that the Args lands in
// collective()'s parameter without a copy: on a small call a copy of its
// 16 words showed.
coll::Args allreduce_args(const void* sendbuf, void* recvbuf, size_t count,
                          coll_datatype_t datatype, coll_op_t op) {
  return coll::Args{.sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
                    .datatype = raw_enum(datatype), .op = raw_enum(op)};
}

coll::Args bcast_args(void* buf, size_t count, coll_datatype_t datatype, int root) {
  return coll::Args{.recvbuf = buf, .count = count, .datatype = raw_enum(datatype), .root = root};
}


coll::Args vector_args(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                       coll_op_t op, int root) {
  coll::Args a = allreduce_args(sendbuf, recvbuf, count, datatype, op);
  a.root = root;
  return a;
}

coll::Args block_args(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                      int root) {
  coll::Args a;
  a.sendbuf = sendbuf;
  a.recvbuf = recvbuf;
  a.count = count;
  a.datatype = raw_enum(datatype);
  a.root = root;
  return a;
}

coll::Args gatherv_args(const void* sendbuf, size_t sendcount, void* recvbuf,
                        const size_t* recvcounts, const size_t* displs, coll_datatype_t datatype,
                        int root) {
  coll::Args a = block_args(sendbuf, recvbuf, 0, datatype, root);
  a.sendcount = sendcount;
  a.recvcounts = recvcounts;
  a.rdispls = displs;
  return a;
}

coll::Args scatterv_args(const void* sendbuf, const size_t* sendcounts, const size_t* displs,
                         void* recvbuf, size_t recvcount, coll_datatype_t datatype, int root) {
  coll::Args a = block_args(sendbuf, recvbuf, 0, datatype, root);
  a.sendcounts = sendcounts;
  a.sdispls = displs;
  a.recvcount = recvcount;
  return a;
}

coll::Args reduce_scatter_args(const void* sendbuf, void* recvbuf, const size_t* recvcounts,
                               coll_datatype_t datatype, coll_op_t op) {
  coll::Args a = allreduce_args(sendbuf, recvbuf, 0, datatype, op);
  a.recvcounts = recvcounts;
  return a;
}

coll::Args alltoallv_args(const void* sendbuf, const size_t* sendcounts, const size_t* sdispls,
                          void* recvbuf, const size_t* recvcounts, const size_t* rdispls,
                          coll_datatype_t datatype) {
  coll::Args a = block_args(sendbuf, recvbuf, 0, datatype, 0);
  a.sendcounts = sendcounts;
  a.sdispls = sdispls;
  a.recvcounts = recvcounts;
  a.rdispls = rdispls;
  return a;
}

}  // namespace

extern "C" {

int coll_allreduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                   coll_op_t op, coll_comm_t comm) {
  return collective(comm, coll::Coll::kAllreduce,
                    allreduce_args(sendbuf, recvbuf, count, datatype, op), nullptr, Mode::kBlocking);
}
int coll_iallreduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                    coll_op_t op, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kAllreduce,
                    allreduce_args(sendbuf, recvbuf, count, datatype, op), request, Mode::kNonblocking);
}
int coll_allreduce_init(const void* sendbuf, void* recvbuf, size_t count,
                        coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                        coll_request_t* request) {
  return collective(comm, coll::Coll::kAllreduce,
                    allreduce_args(sendbuf, recvbuf, count, datatype, op), request, Mode::kPersistent);
}

int coll_bcast(void* buf, size_t count, coll_datatype_t datatype, int root, coll_comm_t comm) {
  return collective(comm, coll::Coll::kBcast, bcast_args(buf, count, datatype, root), nullptr, Mode::kBlocking);
}
int coll_ibcast(void* buf, size_t count, coll_datatype_t datatype, int root, coll_comm_t comm,
                coll_request_t* request) {
  return collective(comm, coll::Coll::kBcast, bcast_args(buf, count, datatype, root), request, Mode::kNonblocking);
}
int coll_bcast_init(void* buf, size_t count, coll_datatype_t datatype, int root, coll_comm_t comm,
                    coll_request_t* request) {
  return collective(comm, coll::Coll::kBcast, bcast_args(buf, count, datatype, root), request, Mode::kPersistent);
}

int coll_barrier(coll_comm_t comm) {
  return collective(comm, coll::Coll::kBarrier, {}, nullptr, Mode::kBlocking);
}
int coll_ibarrier(coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kBarrier, {}, request, Mode::kNonblocking);
}
int coll_barrier_init(coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kBarrier, {}, request, Mode::kPersistent);
}

// The rest of the collective set: blocking, non-blocking and persistent,
// each one call of collective().
int coll_reduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                coll_op_t op, int root, coll_comm_t comm) {
  return collective(comm, coll::Coll::kReduce,
                    vector_args(sendbuf, recvbuf, count, datatype, op, root), nullptr,
                    Mode::kBlocking);
}
int coll_ireduce(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                 coll_op_t op, int root, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kReduce,
                    vector_args(sendbuf, recvbuf, count, datatype, op, root), request,
                    Mode::kNonblocking);
}
int coll_reduce_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                     coll_op_t op, int root, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kReduce,
                    vector_args(sendbuf, recvbuf, count, datatype, op, root), request,
                    Mode::kPersistent);
}

int coll_allgather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                   coll_comm_t comm) {
  return collective(comm, coll::Coll::kAllgather, block_args(sendbuf, recvbuf, count, datatype, 0),
                    nullptr, Mode::kBlocking);
}
int coll_iallgather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                    coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kAllgather, block_args(sendbuf, recvbuf, count, datatype, 0),
                    request, Mode::kNonblocking);
}
int coll_allgather_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                        coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kAllgather, block_args(sendbuf, recvbuf, count, datatype, 0),
                    request, Mode::kPersistent);
}

int coll_allgatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t recvcounts[],
                    const size_t displs[], coll_datatype_t datatype, coll_comm_t comm) {
  return collective(comm, coll::Coll::kAllgatherv,
                    gatherv_args(sendbuf, sendcount, recvbuf, recvcounts, displs, datatype, 0),
                    nullptr, Mode::kBlocking);
}
int coll_iallgatherv(const void* sendbuf, size_t sendcount, void* recvbuf,
                     const size_t recvcounts[], const size_t displs[], coll_datatype_t datatype,
                     coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kAllgatherv,
                    gatherv_args(sendbuf, sendcount, recvbuf, recvcounts, displs, datatype, 0),
                    request, Mode::kNonblocking);
}
int coll_allgatherv_init(const void* sendbuf, size_t sendcount, void* recvbuf,
                         const size_t recvcounts[], const size_t displs[], coll_datatype_t datatype,
                         coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kAllgatherv,
                    gatherv_args(sendbuf, sendcount, recvbuf, recvcounts, displs, datatype, 0),
                    request, Mode::kPersistent);
}

int coll_reduce_scatter_block(const void* sendbuf, void* recvbuf, size_t recvcount,
                              coll_datatype_t datatype, coll_op_t op, coll_comm_t comm) {
  return collective(comm, coll::Coll::kReduceScatterBlock,
                    vector_args(sendbuf, recvbuf, recvcount, datatype, op, 0), nullptr,
                    Mode::kBlocking);
}
int coll_ireduce_scatter_block(const void* sendbuf, void* recvbuf, size_t recvcount,
                               coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                               coll_request_t* request) {
  return collective(comm, coll::Coll::kReduceScatterBlock,
                    vector_args(sendbuf, recvbuf, recvcount, datatype, op, 0), request,
                    Mode::kNonblocking);
}
int coll_reduce_scatter_block_init(const void* sendbuf, void* recvbuf, size_t recvcount,
                                   coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                                   coll_request_t* request) {
  return collective(comm, coll::Coll::kReduceScatterBlock,
                    vector_args(sendbuf, recvbuf, recvcount, datatype, op, 0), request,
                    Mode::kPersistent);
}

int coll_reduce_scatter(const void* sendbuf, void* recvbuf, const size_t recvcounts[],
                        coll_datatype_t datatype, coll_op_t op, coll_comm_t comm) {
  return collective(comm, coll::Coll::kReduceScatter,
                    reduce_scatter_args(sendbuf, recvbuf, recvcounts, datatype, op), nullptr,
                    Mode::kBlocking);
}
int coll_ireduce_scatter(const void* sendbuf, void* recvbuf, const size_t recvcounts[],
                         coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                         coll_request_t* request) {
  return collective(comm, coll::Coll::kReduceScatter,
                    reduce_scatter_args(sendbuf, recvbuf, recvcounts, datatype, op), request,
                    Mode::kNonblocking);
}
int coll_reduce_scatter_init(const void* sendbuf, void* recvbuf, const size_t recvcounts[],
                             coll_datatype_t datatype, coll_op_t op, coll_comm_t comm,
                             coll_request_t* request) {
  return collective(comm, coll::Coll::kReduceScatter,
                    reduce_scatter_args(sendbuf, recvbuf, recvcounts, datatype, op), request,
                    Mode::kPersistent);
}

int coll_gather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                int root, coll_comm_t comm) {
  return collective(comm, coll::Coll::kGather, block_args(sendbuf, recvbuf, count, datatype, root),
                    nullptr, Mode::kBlocking);
}
int coll_igather(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                 int root, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kGather, block_args(sendbuf, recvbuf, count, datatype, root),
                    request, Mode::kNonblocking);
}
int coll_gather_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                     int root, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kGather, block_args(sendbuf, recvbuf, count, datatype, root),
                    request, Mode::kPersistent);
}

int coll_gatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t recvcounts[],
                 const size_t displs[], coll_datatype_t datatype, int root, coll_comm_t comm) {
  return collective(comm, coll::Coll::kGatherv,
                    gatherv_args(sendbuf, sendcount, recvbuf, recvcounts, displs, datatype, root),
                    nullptr, Mode::kBlocking);
}
int coll_igatherv(const void* sendbuf, size_t sendcount, void* recvbuf, const size_t recvcounts[],
                  const size_t displs[], coll_datatype_t datatype, int root, coll_comm_t comm,
                  coll_request_t* request) {
  return collective(comm, coll::Coll::kGatherv,
                    gatherv_args(sendbuf, sendcount, recvbuf, recvcounts, displs, datatype, root),
                    request, Mode::kNonblocking);
}
int coll_gatherv_init(const void* sendbuf, size_t sendcount, void* recvbuf,
                      const size_t recvcounts[], const size_t displs[], coll_datatype_t datatype,
                      int root, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kGatherv,
                    gatherv_args(sendbuf, sendcount, recvbuf, recvcounts, displs, datatype, root),
                    request, Mode::kPersistent);
}

int coll_scatter(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                 int root, coll_comm_t comm) {
  return collective(comm, coll::Coll::kScatter, block_args(sendbuf, recvbuf, count, datatype, root),
                    nullptr, Mode::kBlocking);
}
int coll_iscatter(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                  int root, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kScatter, block_args(sendbuf, recvbuf, count, datatype, root),
                    request, Mode::kNonblocking);
}
int coll_scatter_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                      int root, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kScatter, block_args(sendbuf, recvbuf, count, datatype, root),
                    request, Mode::kPersistent);
}

int coll_scatterv(const void* sendbuf, const size_t sendcounts[], const size_t displs[],
                  void* recvbuf, size_t recvcount, coll_datatype_t datatype, int root,
                  coll_comm_t comm) {
  return collective(comm, coll::Coll::kScatterv,
                    scatterv_args(sendbuf, sendcounts, displs, recvbuf, recvcount, datatype, root),
                    nullptr, Mode::kBlocking);
}
int coll_iscatterv(const void* sendbuf, const size_t sendcounts[], const size_t displs[],
                   void* recvbuf, size_t recvcount, coll_datatype_t datatype, int root,
                   coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kScatterv,
                    scatterv_args(sendbuf, sendcounts, displs, recvbuf, recvcount, datatype, root),
                    request, Mode::kNonblocking);
}
int coll_scatterv_init(const void* sendbuf, const size_t sendcounts[], const size_t displs[],
                       void* recvbuf, size_t recvcount, coll_datatype_t datatype, int root,
                       coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kScatterv,
                    scatterv_args(sendbuf, sendcounts, displs, recvbuf, recvcount, datatype, root),
                    request, Mode::kPersistent);
}

int coll_alltoall(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                  coll_comm_t comm) {
  return collective(comm, coll::Coll::kAlltoall, block_args(sendbuf, recvbuf, count, datatype, 0),
                    nullptr, Mode::kBlocking);
}
int coll_ialltoall(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                   coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kAlltoall, block_args(sendbuf, recvbuf, count, datatype, 0),
                    request, Mode::kNonblocking);
}
int coll_alltoall_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                       coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kAlltoall, block_args(sendbuf, recvbuf, count, datatype, 0),
                    request, Mode::kPersistent);
}

int coll_alltoallv(const void* sendbuf, const size_t sendcounts[], const size_t sdispls[],
                   void* recvbuf, const size_t recvcounts[], const size_t rdispls[],
                   coll_datatype_t datatype, coll_comm_t comm) {
  return collective(
      comm, coll::Coll::kAlltoallv,
      alltoallv_args(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, datatype), nullptr,
      Mode::kBlocking);
}
int coll_ialltoallv(const void* sendbuf, const size_t sendcounts[], const size_t sdispls[],
                    void* recvbuf, const size_t recvcounts[], const size_t rdispls[],
                    coll_datatype_t datatype, coll_comm_t comm, coll_request_t* request) {
  return collective(
      comm, coll::Coll::kAlltoallv,
      alltoallv_args(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, datatype), request,
      Mode::kNonblocking);
}
int coll_alltoallv_init(const void* sendbuf, const size_t sendcounts[], const size_t sdispls[],
                        void* recvbuf, const size_t recvcounts[], const size_t rdispls[],
                        coll_datatype_t datatype, coll_comm_t comm, coll_request_t* request) {
  return collective(
      comm, coll::Coll::kAlltoallv,
      alltoallv_args(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, datatype), request,
      Mode::kPersistent);
}

int coll_scan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
              coll_op_t op, coll_comm_t comm) {
  return collective(comm, coll::Coll::kScan, vector_args(sendbuf, recvbuf, count, datatype, op, 0),
                    nullptr, Mode::kBlocking);
}
int coll_iscan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
               coll_op_t op, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kScan, vector_args(sendbuf, recvbuf, count, datatype, op, 0),
                    request, Mode::kNonblocking);
}
int coll_scan_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                   coll_op_t op, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kScan, vector_args(sendbuf, recvbuf, count, datatype, op, 0),
                    request, Mode::kPersistent);
}

int coll_exscan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                coll_op_t op, coll_comm_t comm) {
  return collective(comm, coll::Coll::kExscan,
                    vector_args(sendbuf, recvbuf, count, datatype, op, 0), nullptr,
                    Mode::kBlocking);
}
int coll_iexscan(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                 coll_op_t op, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kExscan,
                    vector_args(sendbuf, recvbuf, count, datatype, op, 0), request,
                    Mode::kNonblocking);
}
int coll_exscan_init(const void* sendbuf, void* recvbuf, size_t count, coll_datatype_t datatype,
                     coll_op_t op, coll_comm_t comm, coll_request_t* request) {
  return collective(comm, coll::Coll::kExscan,
                    vector_args(sendbuf, recvbuf, count, datatype, op, 0), request,
                    Mode::kPersistent);
}

int coll_test(coll_request_t* request, int* flag) {
  if (!flag) return bad_handle("coll_test: NULL flag");
  return complete_request(request, false, flag);
}

int coll_wait(coll_request_t* request) { return complete_request(request, true, nullptr); }

int coll_waitall(size_t count, coll_request_t requests[]) {
  if (count > 0 && !requests) return bad_handle("coll_waitall: NULL requests with count > 0");
  // A request listed twice would be completed (and, unless persistent,
  // freed) by its first wait and found stale by its second: refused before
  // anything is waited for, so that every request stays as it was.
  if (const auto twice = find_duplicate(count, requests)) {
    const auto [first_index, second_index] = *twice;
    const std::string why = coll::strfmt(
        "coll_waitall: requests[%zu] and requests[%zu] are the same request (each may be listed "
        "once)",
        first_index, second_index);
    RequestEntry* r = g_requests.get(requests[first_index]);
    return r ? comm_error(r->comm, why) : bad_handle(why);
  }
  // Each is waited for in turn; every wait advances them all, so the order
  // does not matter. The first failure is returned, after all are done.
  int first = COLL_SUCCESS;
  for (size_t i = 0; i < count; ++i) {
    const int status = complete_request(&requests[i], true, nullptr);
    if (status && !first) first = status;
  }
  return first;
}

int coll_start(coll_request_t request) {
  if (!g_initialized.load(std::memory_order_acquire)) return COLL_ERR_NOT_INITIALIZED;
  if (request == COLL_REQUEST_NULL) return bad_handle("coll_start: COLL_REQUEST_NULL");
  RequestEntry* r = g_requests.get(request);
  if (!r) return bad_handle("coll_start: not a request handle (freed, or from before coll_finalize)");
  coll::Operation& op = *r->op;
  if (!op.persistent)
    return comm_error(r->comm, "coll_start: not a persistent request (made by coll_*_init)");
  // A local state check, so every rank that starts twice is refused alike
  // and sends nothing; the activation under way is untouched and its wait
  // completes it.
  if (r->active)
    return comm_error(
        r->comm,
        "coll_start: the request is active (started, and not yet completed by "
        "coll_wait, coll_test or coll_waitall): complete it before starting it again");
  if (!op.comm) return bad_handle("coll_start: the request's communicator has been freed");
  const int status = on_comm(r->comm, [&](CommEntry&, coll::Communicator& c) {
    EntryGuard guard(c);
    std::unique_lock<std::mutex> l(c.progress_mutex(), std::defer_lock);
    if (c.context().locking()) l.lock();
    c.start(op);
  });
  if (status == COLL_SUCCESS) r->active = true;
  return status;
}

int coll_request_free(coll_request_t* request) {
  if (!g_initialized.load(std::memory_order_acquire)) return COLL_ERR_NOT_INITIALIZED;
  if (!request) return bad_handle("coll_request_free: NULL pointer");
  if (*request == COLL_REQUEST_NULL) return bad_handle("coll_request_free: COLL_REQUEST_NULL");
  RequestEntry* r = g_requests.get(*request);
  if (!r) return bad_handle("coll_request_free: not a request handle (freed already?)");
  coll::Operation& op = *r->op;
  int status = COLL_SUCCESS;
  // An active request is completed first: its buffers are in use.
  if (!op.complete) status = guarded(r->last_error, [&] { op.comm->context().wait(op); });
  if (status) copy_request_error(*r);
  if (op.persistent && op.comm) op.comm->release_pins(op);
  g_requests.remove(*request);
  *request = COLL_REQUEST_NULL;
  return status;
}

const char* coll_strerror(int status) {
  switch (status) {
    case COLL_SUCCESS: return "COLL_SUCCESS: no error";
    case COLL_ERR_INVALID_ARG: return "COLL_ERR_INVALID_ARG: invalid argument";
    case COLL_ERR_NOT_INITIALIZED: return "COLL_ERR_NOT_INITIALIZED: coll_init has not been called";
    case COLL_ERR_TIMEOUT: return "COLL_ERR_TIMEOUT: a wait passed COLL_TIMEOUT";
    case COLL_ERR_PEER_LOST: return "COLL_ERR_PEER_LOST: a peer process is gone";
    case COLL_ERR_NO_RESOURCES: return "COLL_ERR_NO_RESOURCES: out of resources";
    case COLL_ERR_TRANSPORT: return "COLL_ERR_TRANSPORT: transport error";
    case COLL_ERR_INTERNAL: return "COLL_ERR_INTERNAL: internal error";
    case COLL_ERR_REVOKED: return "COLL_ERR_REVOKED: the communicator was revoked";
    default: return "unknown libcoll status code";
  }
}

const char* coll_comm_last_error(coll_comm_t comm) {
  if (comm == COLL_COMM_NULL) return g_init_error.read();
  CommEntry* e = g_initialized ? g_comms.get(comm) : nullptr;
  return e ? e->last_error.read() : g_init_error.read();
}

// Introspection: "" for a handle that names no live communicator.
static coll::Communicator* live(coll_comm_t comm) {
  CommEntry* e = g_initialized && comm != COLL_COMM_NULL ? g_comms.get(comm) : nullptr;
  return e ? e->impl : nullptr;
}

const char* coll_comm_transport_name(coll_comm_t comm) {
  coll::Communicator* c = live(comm);
  return c ? c->context().transport().name() : "";
}

const char* coll_comm_bootstrap_name(coll_comm_t comm) {
  coll::Communicator* c = live(comm);
  return c ? c->context().bootstrap().name() : "";
}

const char* coll_comm_last_algorithm(coll_comm_t comm, const char* collective) {
  coll::Communicator* c = live(comm);
  return c && collective ? c->last_algorithm(collective) : "";
}

// One allreduce (MAX) of (level, -level) tells every rank whether all
// passed the same valid level: then max(level) == -max(-level). A rank
// that passed a bad level offers one that is out of range (and the
// others' check fails with it), so that no rank changes its level alone.
int coll_comm_set_reproducible(coll_comm_t comm, coll_reproducible_t level) {
  const int wanted = raw_enum(level);
  const bool valid = wanted >= COLL_REPRODUCIBLE_OFF && wanted <= COLL_REPRODUCIBLE_EXACT;
  int32_t offer[2] = {valid ? wanted : COLL_REPRODUCIBLE_EXACT + 1, valid ? -wanted : 0};
  const int status = coll_allreduce(COLL_IN_PLACE, offer, 2, COLL_INT32, COLL_MAX, comm);
  if (status != COLL_SUCCESS) return status;
  return on_comm(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!valid)
      coll::fail(COLL_ERR_INVALID_ARG,
                 "coll_comm_set_reproducible: level %d (COLL_REPRODUCIBLE_OFF, _ORDER or _EXACT)",
                 wanted);
    if (offer[0] > COLL_REPRODUCIBLE_EXACT || offer[0] != -offer[1])
      coll::fail(COLL_ERR_INVALID_ARG,
                 "coll_comm_set_reproducible: the ranks passed different levels, or one passed "
                 "a level out of range (this rank: %d); the level is unchanged",
                 wanted);
    c.set_reproducible(wanted);
  });
}

// Fault recovery (Communicator::revoke ... shrink; docs/architecture.md,
// "Fault recovery"). Each takes the communicator as a call on it does
// (EntryGuard; the progress lock where threads meet), and works on a
// revoked or failed one.
}  // extern "C"

namespace {

template <class Body>
int on_recovery(coll_comm_t comm, Body body) {
  return on_comm(comm, [&](CommEntry& e, coll::Communicator& c) {
    EntryGuard guard(c);
    std::unique_lock<std::mutex> l(c.progress_mutex(), std::defer_lock);
    if (c.context().locking()) l.lock();
    body(e, c);
  });
}

}  // namespace

extern "C" {

int coll_comm_revoke(coll_comm_t comm) {
  return on_recovery(comm, [&](CommEntry&, coll::Communicator& c) {
    int rank = c.rank();
    c.revoke(coll::strfmt("rank %d revoked the communicator (coll_comm_revoke)", rank));
  });
}

int coll_comm_is_revoked(coll_comm_t comm, int* flag) {
  return on_recovery(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!flag) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_is_revoked: NULL flag");
    *flag = c.check_revoked();
  });
}

int coll_comm_get_failed(coll_comm_t comm, int capacity, int ranks[], int* count) {
  return on_recovery(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!count) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_get_failed: NULL count");
    if (capacity < 0)
      coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_get_failed: capacity %d (>= 0)", capacity);
    if (capacity > 0 && !ranks)
      coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_get_failed: NULL ranks with capacity %d",
                 capacity);
    std::vector<int> failed = c.refresh_failed();
    std::sort(failed.begin(), failed.end());
    for (size_t i = 0; i < failed.size() && i < size_t(capacity); ++i) ranks[i] = failed[i];
    *count = int(failed.size());
  });
}

int coll_comm_ack_failed(coll_comm_t comm, int num_to_ack, int* num_acked) {
  return on_recovery(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!num_acked) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_ack_failed: NULL num_acked");
    if (num_to_ack < 0)
      coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_ack_failed: num_to_ack %d (>= 0)", num_to_ack);
    *num_acked = int(c.ack_failed(size_t(num_to_ack)));
  });
}

int coll_comm_agree(coll_comm_t comm, int* flag) {
  return on_recovery(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!flag) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_agree: NULL flag");
    c.agree(flag);
  });
}

int coll_comm_shrink(coll_comm_t comm, coll_comm_t* newcomm) {
  return on_recovery(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!newcomm) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_shrink: NULL newcomm");
    *newcomm = COLL_COMM_NULL;
    auto entry = std::make_unique<CommEntry>();
    entry->impl = c.context().adopt(c.shrink());
    *newcomm = reinterpret_cast<coll_comm_t>(g_comms.add(std::move(entry)));
  });
}

int coll_op_create(coll_user_fn* fn, int commute, void* ctx, coll_op_t* op) {
  if (!fn) return bad_handle("coll_op_create: NULL function");
  if (!op) return bad_handle("coll_op_create: NULL op");
  return guarded(g_init_error, [&] {
    const int handle = coll::create_user_op(coll::UserOp{fn, ctx, commute != 0});
    *op = static_cast<coll_op_t>(handle);
  });
}

int coll_op_free(coll_op_t* op) {
  if (!op) return bad_handle("coll_op_free: NULL pointer");
  const int handle = raw_enum(*op);
  if (handle == raw_enum(COLL_OP_NULL)) return bad_handle("coll_op_free: COLL_OP_NULL");
  if (!coll::free_user_op(handle))
    return bad_handle(coll::is_user_op_handle(handle)
                          ? "coll_op_free: not a live user operator (freed already?)"
                          : "coll_op_free: not a user operator (a built-in one cannot be freed)");
  *op = COLL_OP_NULL;
  return COLL_SUCCESS;
}

size_t coll_datatype_size(coll_datatype_t datatype) {
  return coll::datatype_size(raw_enum(datatype));
}

int coll_comm_regcache_stats(coll_comm_t comm, coll_regcache_stats_t* stats) {
  return on_comm(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!stats) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_regcache_stats: NULL stats");
    *stats = c.context().cache().stats();
  });
}

int coll_comm_resource_stats(coll_comm_t comm, coll_resource_stats_t* stats) {
  return on_comm(comm, [&](CommEntry&, coll::Communicator& c) {
    if (!stats) coll::fail(COLL_ERR_INVALID_ARG, "coll_comm_resource_stats: NULL stats");
    *stats = c.resource_stats();
  });
}

int coll_set_wait_hook(coll_wait_hook_fn* fn, void* arg) {
  coll::set_wait_hook(fn, arg);
  return COLL_SUCCESS;
}

int coll_mem_invalidate(void* addr, size_t len) {
  if (!g_initialized) return COLL_ERR_NOT_INITIALIZED;
  return on_comm(g_world, [&](CommEntry&, coll::Communicator& c) {
    c.context().cache().invalidate(addr, len);
  });
}

int coll_mem_register(void* addr, size_t len) {
  if (!g_initialized) return COLL_ERR_NOT_INITIALIZED;
  return on_comm(g_world, [&](CommEntry&, coll::Communicator& c) {
    c.context().cache().register_explicit(addr, len);
  });
}

int coll_mem_deregister(void* addr) {
  if (!g_initialized) return COLL_ERR_NOT_INITIALIZED;
  return on_comm(g_world, [&](CommEntry&, coll::Communicator& c) {
    c.context().cache().deregister_explicit(addr);
  });
}

int coll_mem_alloc(size_t size, void** ptr) {
  if (!g_initialized) return COLL_ERR_NOT_INITIALIZED;
  if (ptr) *ptr = nullptr;
  return on_comm(g_world, [&](CommEntry&, coll::Communicator& c) {
    if (!ptr) coll::fail(COLL_ERR_INVALID_ARG, "coll_mem_alloc: NULL ptr");
    *ptr = c.context().mem_alloc(size);
  });
}

int coll_mem_free(void* ptr) {
  if (!g_initialized) return COLL_ERR_NOT_INITIALIZED;
  if (!ptr) return COLL_SUCCESS;
  return on_comm(g_world, [&](CommEntry&, coll::Communicator& c) {
    c.context().mem_free(ptr);
  });
}

}  // extern "C"
