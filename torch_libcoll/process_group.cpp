#include "process_group.hpp"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <algorithm>
#include <cstring>
#include <condition_variable>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>

namespace torch_libcoll {
namespace {

// What libcoll does not do, as torch users read it.
[[noreturn]] void unsupported(const std::string& what) {
  TORCH_CHECK(false, what, " is not supported by libcoll");
}

// A failed libcoll call: its status and libcoll's own detail.
std::string libcoll_error(const char* call, int status, coll_comm_t comm) {
  std::string text = std::string("libcoll: ") + call + " failed: " + coll_strerror(status);
  const char* detail = coll_comm_last_error(comm);
  if (detail && *detail) text += std::string(": ") + detail;
  return text;
}

void check_status(const char* call, int status, coll_comm_t comm) {
  if (status != COLL_SUCCESS) TORCH_CHECK(false, libcoll_error(call, status, comm));
}

coll_datatype_t datatype_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return COLL_FLOAT;
    case at::kDouble: return COLL_DOUBLE;
    case at::kHalf: return COLL_FLOAT16;
    case at::kBFloat16: return COLL_BFLOAT16;
    case at::kChar: return COLL_INT8;
    case at::kShort: return COLL_INT16;
    case at::kInt: return COLL_INT32;
    case at::kLong: return COLL_INT64;
    case at::kByte: return COLL_UINT8;
    case at::kBool: return COLL_UINT8;  // 0 or 1 in a byte; ops mapped below
    default: unsupported(std::string("dtype ") + c10::toString(t.scalar_type()));
  }
}

// libcoll's operator for torch's on tensors of `type`, and whether the
// result is then divided by the group's size (AVG: a SUM, then the division).
struct OpPlan {
  coll_op_t op;
  bool average = false;
};

OpPlan op_of(const c10d::ReduceOp& reduce_op, at::ScalarType type) {
  const bool is_float = at::isFloatingType(type);
  const bool is_bool = type == at::kBool;
  const auto name = [&](const char* op) {
    return std::string("ReduceOp.") + op + " on " + c10::toString(type) + " tensors";
  };
  switch (static_cast<c10d::ReduceOp::RedOpType>(reduce_op)) {
    // bool: SUM and MAX are a logical or, PRODUCT and MIN a logical and (as
    // torch computes them on bool tensors); on 0/1 bytes these are BOR, BAND.
    case c10d::ReduceOp::SUM: return {is_bool ? COLL_BOR : COLL_SUM};
    case c10d::ReduceOp::AVG:
      if (!is_float) unsupported(name("AVG"));
      return {COLL_SUM, true};
    case c10d::ReduceOp::PRODUCT: return {is_bool ? COLL_BAND : COLL_PROD};
    case c10d::ReduceOp::MIN: return {is_bool ? COLL_BAND : COLL_MIN};
    case c10d::ReduceOp::MAX: return {is_bool ? COLL_BOR : COLL_MAX};
    case c10d::ReduceOp::BAND:
      if (is_float) unsupported(name("BAND"));
      return {COLL_BAND};
    case c10d::ReduceOp::BOR:
      if (is_float) unsupported(name("BOR"));
      return {COLL_BOR};
    case c10d::ReduceOp::BXOR:
      if (is_float) unsupported(name("BXOR"));
      return {COLL_BXOR};
    default: unsupported("ReduceOp " + std::to_string(int(reduce_op.op_)));
  }
}

void check_tensor(const at::Tensor& t, const char* call) {
  if (!t.device().is_cpu())
    unsupported(std::string(call) + " on a " + t.device().str() + " tensor (CPU tensors only)");
  if (t.layout() != at::kStrided) unsupported(std::string(call) + " on a sparse tensor");
  datatype_of(t);
}

void check_same_type(const at::Tensor& t, const at::Tensor& like, const char* call) {
  check_tensor(t, call);
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "libcoll: ", call,
              ": tensors of different dtypes (", c10::toString(t.scalar_type()), " and ",
              c10::toString(like.scalar_type()), ")");
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "libcoll: ", call, " takes one tensor per call, not ",
              tensors.size());
  check_tensor(tensors[0], call);
  return tensors[0];
}

size_t count_of(const at::Tensor& t) { return static_cast<size_t>(t.numel()); }

// Scratch buffers for the flattened lists, reused from call to call: a
// fresh allocation per call pays its page faults every time (on this VM a
// list reduce_scatter of 2 x 4 MiB took 25-100 ms in at::cat's faults, the
// collective 1 ms), and a reused one also finds libcoll's registration
// cache warm. Idle buffers kept: at most kIdleBuffers and kIdleBytes in
// all (the largest kept); larger ones are freed.
class ScratchPool {
 public:
  static ScratchPool& get() {
    static ScratchPool* pool = new ScratchPool;  // never destroyed: works may outlive exit hooks
    return *pool;
  }

  // A byte tensor of at least `bytes`.
  at::Tensor acquire(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto best = idle_.end();
      for (auto it = idle_.begin(); it != idle_.end(); ++it)
        if (size_t(it->numel()) >= bytes && (best == idle_.end() || it->numel() < best->numel()))
          best = it;
      if (best != idle_.end()) {
        at::Tensor buffer = std::move(*best);
        idle_.erase(best);
        idle_bytes_ -= size_t(buffer.numel());
        return buffer;
      }
    }
    return at::empty({int64_t(std::max<size_t>(bytes, 1))}, at::kByte);
  }

  void release(at::Tensor buffer) {
    const size_t bytes = size_t(buffer.numel());
    if (bytes > kIdleBytes) return;
    std::lock_guard<std::mutex> lock(mutex_);
    idle_.push_back(std::move(buffer));
    idle_bytes_ += bytes;
    while (idle_.size() > kIdleBuffers || idle_bytes_ > kIdleBytes) {
      auto smallest = std::min_element(
          idle_.begin(), idle_.end(),
          [](const at::Tensor& a, const at::Tensor& b) { return a.numel() < b.numel(); });
      idle_bytes_ -= size_t(smallest->numel());
      idle_.erase(smallest);
    }
  }

 private:
  static constexpr size_t kIdleBuffers = 8;
  static constexpr size_t kIdleBytes = size_t(512) << 20;
  std::mutex mutex_;
  std::vector<at::Tensor> idle_;
  size_t idle_bytes_ = 0;
};

// A contiguous 1-D tensor of `numel` elements of `type` from the pool,
// given back when `work` completes.
at::Tensor scratch(WorkLibcoll& work, int64_t numel, at::ScalarType type) {
  const size_t bytes = size_t(numel) * c10::elementSize(type);
  at::Tensor buffer = ScratchPool::get().acquire(bytes);
  work.pooled.push_back(buffer);
  return buffer.narrow(0, 0, int64_t(bytes)).view(type);
}

// The tensors' elements one after another, in a contiguous 1-D scratch
// tensor of the work's.
at::Tensor flatten(const std::vector<at::Tensor>& tensors, WorkLibcoll& work) {
  std::vector<at::Tensor> pieces;
  pieces.reserve(tensors.size());
  int64_t numel = 0;
  for (const at::Tensor& t : tensors) {
    pieces.push_back(t.reshape({-1}));
    numel += t.numel();
  }
  at::Tensor flat = scratch(work, numel, tensors[0].scalar_type());
  at::cat_out(flat, pieces);
  return flat;
}

// Copies consecutive pieces of the 1-D `flat` into `tensors`.
void unflatten_into(const at::Tensor& flat, const std::vector<at::Tensor>& tensors,
                    int64_t offset = 0) {
  for (const at::Tensor& t : tensors) {
    t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
    offset += t.numel();
  }
}

std::vector<size_t> prefix_sums(const std::vector<size_t>& counts) {
  std::vector<size_t> displs(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) displs[i] = displs[i - 1] + counts[i - 1];
  return displs;
}

// The one lock that every start of an operation takes: libcoll wants the
// operations of a communicator started by one thread at a time, in the same
// order on every rank (DDP's reducer and the Python thread may both start).
std::mutex& start_mutex() {
  static std::mutex* mutex = new std::mutex;
  return *mutex;
}
bool world_taken = false;  // under start_mutex: a group already runs on coll_comm_world
int next_tag = 1;          // under start_mutex: coll_comm_create_group's tags

// Drives the operations no caller waits for (DDP waits on futures only):
// one thread a process, polling each work in flight with coll_test; it
// yields between rounds while any is pending and sleeps when none is.
class Progress {
 public:
  static Progress& get() {
    static Progress* progress = new Progress;  // never destroyed: shutdown() joins it
    return *progress;
  }

  void add(c10::intrusive_ptr<WorkLibcoll> work) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable() && !stopping_) thread_ = std::thread([this] { run(); });
    pending_.push_back(std::move(work));
    wake_.notify_one();
  }

  // Returns once every work added has completed.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      wake_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    int idle_rounds = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (pending_.empty()) {
        if (stopping_) return;
        wake_.wait(lock);
        idle_rounds = 0;
        continue;
      }
      std::vector<c10::intrusive_ptr<WorkLibcoll>> round = pending_;
      lock.unlock();
      std::vector<WorkLibcoll*> done;
      for (const auto& work : round)
        if (work->poll()) done.push_back(work.get());
      round.clear();
      lock.lock();
      std::erase_if(pending_, [&](const c10::intrusive_ptr<WorkLibcoll>& work) {
        return std::find(done.begin(), done.end(), work.get()) != done.end();
      });
      idle_rounds = done.empty() ? idle_rounds + 1 : 0;
      if (idle_rounds < 64) {
        lock.unlock();
        std::this_thread::yield();
        lock.lock();
      } else {
        wake_.wait_for(lock, std::chrono::microseconds(200));
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<c10::intrusive_ptr<WorkLibcoll>> pending_;
  std::thread thread_;
  bool stopping_ = false;
};

// Whether a launcher of libcoll's started this process (collrun, a PMIx
// server: mpirun or srun --mpi=pmix, a PMI-1 server: mpirun.mpich): then
// its bootstrap is libcoll's, as coll_init_thread chooses it.
bool started_by_launcher() {
  for (const char* name : {"COLL_BOOTSTRAP", "PMIX_RANK", "PMIX_NAMESPACE", "PMI_FD"})
    if (const char* value = std::getenv(name); value && *value) return true;
  return false;
}

// libcoll's bootstrap through torch's Store (coll_init_oob), where no
// launcher started the job: torchrun-style env://, tcp:// and file://.
// Round k: every rank sets libcoll/oob/k/RANK and gets every rank's; then
// every rank but 0 sets libcoll/oob/k/read/RANK and rank 0 waits for those,
// because a TCPStore's server lives in rank 0's process: rank 0 leaving
// coll_finalize's last round before a peer has read would take the server
// away from under that peer. Lives until the process ends (libcoll calls
// it from coll_finalize, at exit): it holds the store so.
struct StoreRendezvous {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0;
  int size = 0;
  unsigned round = 0;
  std::string error;  // the store's text for the last failed round
};

int store_allgather(const void* sendbuf, void* recvbuf, size_t bytes, void* state) {
  auto& rendezvous = *static_cast<StoreRendezvous*>(state);
  const std::string round = "libcoll/oob/" + std::to_string(++rendezvous.round);
  try {
    const auto* mine = static_cast<const uint8_t*>(sendbuf);
    rendezvous.store->set(round + "/" + std::to_string(rendezvous.rank),
                          std::vector<uint8_t>(mine, mine + bytes));
    for (int r = 0; r < rendezvous.size; ++r) {
      const std::vector<uint8_t> theirs = rendezvous.store->get(round + "/" + std::to_string(r));
      if (theirs.size() != bytes) {
        rendezvous.error = "the store holds " + std::to_string(theirs.size()) + " bytes under " +
                           round + "/" + std::to_string(r) + ", not " + std::to_string(bytes) +
                           " (another job's keys in the same store?)";
        return COLL_ERR_INVALID_ARG;
      }
      if (bytes) std::memcpy(static_cast<uint8_t*>(recvbuf) + size_t(r) * bytes, theirs.data(), bytes);
    }
    if (rendezvous.rank != 0) {
      rendezvous.store->set(round + "/read/" + std::to_string(rendezvous.rank), {});
    } else {
      std::vector<std::string> read;
      for (int r = 1; r < rendezvous.size; ++r) read.push_back(round + "/read/" + std::to_string(r));
      if (!read.empty()) rendezvous.store->wait(read);
    }
    return COLL_SUCCESS;
  } catch (const std::exception& e) {
    // The store's get or wait timed out, or its server is gone.
    rendezvous.error = std::string("torch's store: ") + e.what();
    const std::string what = e.what();
    return what.find("imeout") != std::string::npos || what.find("timed out") != std::string::npos
               ? COLL_ERR_TIMEOUT
               : COLL_ERR_PEER_LOST;
  }
}

// libcoll's world, initialised by the first process group (at
// COLL_THREAD_MULTIPLE: the progress thread tests while callers start and
// wait): from the launcher's bootstrap where one started the job, else,
// for torch's default group, through its store. The group's timeout
// becomes COLL_TIMEOUT unless that is set.
coll_comm_t init_world(std::chrono::milliseconds timeout,
                       const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       bool default_group) {
  int initialized = 0;
  coll_initialized(&initialized);
  if (!initialized) {
    if (timeout.count() > 0)
      ::setenv("COLL_TIMEOUT", std::to_string(double(timeout.count()) / 1000.0).c_str(), 0);
    int provided = 0;
    if (started_by_launcher() || size == 1 || !default_group) {
      check_status("coll_init_thread",
                   coll_init_thread(nullptr, nullptr, COLL_THREAD_MULTIPLE, &provided),
                   COLL_COMM_NULL);
    } else {
      auto* rendezvous = new StoreRendezvous{store, rank, size, 0, {}};  // kept: see above
      const coll_oob_t oob{rank, size, store_allgather, rendezvous};
      const int status = coll_init_oob(&oob, COLL_THREAD_MULTIPLE, &provided);
      if (status != COLL_SUCCESS) {
        std::string text = libcoll_error("coll_init_oob", status, COLL_COMM_NULL);
        if (!rendezvous->error.empty()) text += " (" + rendezvous->error + ")";
        TORCH_CHECK(false, text);
      }
    }
  }
  coll_comm_t world = coll_comm_world();
  TORCH_CHECK(world != COLL_COMM_NULL, "libcoll: no world communicator (finalized already?)");
  return world;
}

std::vector<uint8_t> bytes_of(const std::string& text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

int int_of(const std::vector<uint8_t>& bytes) {
  return std::stoi(std::string(bytes.begin(), bytes.end()));
}

}  // namespace

// ---------------------------------------------------------------- the work

WorkLibcoll::WorkLibcoll(int rank, c10d::OpType type, const char* name, coll_comm_t comm,
                         std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type),
      name_(name),
      comm_(comm),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()))) {}

WorkLibcoll::~WorkLibcoll() {
  // A work is destroyed complete: the progress thread holds it until then.
  std::lock_guard<std::mutex> lock(request_mutex_);
  if (!request_done_ && request_ != COLL_REQUEST_NULL) coll_wait(&request_);
}

void WorkLibcoll::start(const std::function<int(coll_request_t*)>& start) {
  std::lock_guard<std::mutex> lock(request_mutex_);
  check_status(name_, start(&request_), comm_);
}

void WorkLibcoll::complete_locked(int status) {
  request_done_ = true;
  std::exception_ptr error;
  if (status == COLL_SUCCESS) {
    try {
      for (const auto& action : after_success) action();
    } catch (...) {
      error = std::current_exception();
    }
  } else {
    error = std::make_exception_ptr(std::runtime_error(libcoll_error(name_, status, comm_)));
  }
  after_success.clear();
  keep.clear();
  for (at::Tensor& buffer : pooled) ScratchPool::get().release(std::move(buffer));
  pooled.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    completed_ = true;
    exception_ = error;
  }
  cv_.notify_all();
  // The future's callbacks (DDP's) run here, in the completing thread.
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

bool WorkLibcoll::done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_;
}

bool WorkLibcoll::poll() {
  std::unique_lock<std::mutex> lock(request_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;  // a caller is waiting for it
  if (request_done_) return true;
  int flag = 0;
  int status = coll_test(&request_, &flag);
  if (status != COLL_SUCCESS || flag) complete_locked(status);
  return request_done_;
}

bool WorkLibcoll::isCompleted() {
  poll();
  return done();
}

bool WorkLibcoll::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr WorkLibcoll::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> WorkLibcoll::result() { return outputs_; }

bool WorkLibcoll::wait(std::chrono::milliseconds timeout) {
  if (timeout == kNoTimeout) {
    std::lock_guard<std::mutex> lock(request_mutex_);
    if (!request_done_) complete_locked(coll_wait(&request_));
  } else {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!poll()) {
      if (done()) break;  // completed by the thread that held it
      TORCH_CHECK(std::chrono::steady_clock::now() < deadline, "libcoll: ", name_,
                  " not complete within ", timeout.count(), " ms");
      std::this_thread::yield();
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkLibcoll::getFuture() { return future_; }

// --------------------------------------------------------- process group

ProcessGroupLibcoll::ProcessGroupLibcoll(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                         int size, std::chrono::milliseconds timeout,
                                         bool default_group)
    : c10d::ProcessGroup(rank, size), store_(store), timeout_(timeout) {
  std::lock_guard<std::mutex> lock(start_mutex());
  coll_comm_t world = init_world(timeout, store, rank, size, default_group);
  int world_rank = 0, world_size = 0;
  check_status("coll_comm_rank", coll_comm_rank(world, &world_rank), world);
  check_status("coll_comm_size", coll_comm_size(world, &world_size), world);
  TORCH_CHECK(size <= world_size, "libcoll: torch's process group has ", size,
              " ranks but libcoll's world has ", world_size, " (bootstrap \"",
              coll_comm_bootstrap_name(world),
              "\"): libcoll's world is made by the first group: the default group "
              "(init_process_group(\"libcoll\"), through torch's store) or the launcher's "
              "job (collrun -np ", size, " python3 script.py, mpirun, srun)");

  // The members' world ranks, in group order, and the creation's tag,
  // through the group's store (only the members get here).
  store->set("libcoll/world_rank/" + std::to_string(rank), bytes_of(std::to_string(world_rank)));
  if (rank == 0) store->set("libcoll/tag", bytes_of(std::to_string(next_tag++)));
  std::vector<int> ranks(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i)
    ranks[size_t(i)] = int_of(store->get("libcoll/world_rank/" + std::to_string(i)));
  const int tag = int_of(store->get("libcoll/tag"));

  bool whole_world = size == world_size;
  for (int i = 0; i < size && whole_world; ++i) whole_world = ranks[size_t(i)] == i;
  if (whole_world && !world_taken) {
    world_taken = true;  // the same on every process: they all see every such group
    comm_ = world;
  } else {
    check_status("coll_comm_create_group",
                 coll_comm_create_group(world, size, ranks.data(), tag, &comm_), world);
  }
}

// The communicator is not freed here: coll_comm_free is a collective, and
// torch destroys groups in no agreed order. coll_finalize (shutdown) frees it.
ProcessGroupLibcoll::~ProcessGroupLibcoll() = default;

c10::intrusive_ptr<WorkLibcoll> ProcessGroupLibcoll::make_work(c10d::OpType type,
                                                               const char* name,
                                                               std::vector<at::Tensor> outputs) {
  return c10::make_intrusive<WorkLibcoll>(rank_, type, name, comm_, std::move(outputs));
}

void ProcessGroupLibcoll::launch(const c10::intrusive_ptr<WorkLibcoll>& work,
                                 const std::function<int(coll_request_t*)>& start) {
  {
    std::lock_guard<std::mutex> lock(start_mutex());
    work->start(start);
  }
  Progress::get().add(work);
}

namespace {

// A contiguous tensor with t's elements: t itself when contiguous, else a
// copy kept by the work, copied back into t after success when `back`.
at::Tensor stage(const at::Tensor& t, WorkLibcoll& work, bool back) {
  if (t.is_contiguous()) return t;
  at::Tensor buffer = t.contiguous();
  work.keep.push_back(buffer);
  if (back) work.after_success.push_back([t, buffer] { t.copy_(buffer); });
  return buffer;
}

// AVG: the SUM divided by the group's size, before any copy back.
void average_first(WorkLibcoll& work, const OpPlan& plan, const at::Tensor& result, int size) {
  if (!plan.average) return;
  work.after_success.insert(work.after_success.begin(), [result, size] { result.div_(size); });
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::broadcast(std::vector<at::Tensor>& tensors,
                                                              const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  auto work = make_work(c10d::OpType::BROADCAST, "coll_ibcast", tensors);
  at::Tensor buffer = stage(t, *work, true);
  const int root = int(opts.rootRank);
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_ibcast(buffer.data_ptr(), count_of(buffer), datatype_of(buffer), root, comm,
                       request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::allreduce(std::vector<at::Tensor>& tensors,
                                                              const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  const OpPlan plan = op_of(opts.reduceOp, t.scalar_type());
  auto work = make_work(c10d::OpType::ALLREDUCE, "coll_iallreduce", tensors);
  at::Tensor buffer = stage(t, *work, true);
  average_first(*work, plan, buffer, size_);
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_iallreduce(COLL_IN_PLACE, buffer.data_ptr(), count_of(buffer),
                           datatype_of(buffer), plan.op, comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "libcoll: allreduce_coalesced of no tensors");
  for (const at::Tensor& t : tensors) check_same_type(t, tensors[0], "allreduce_coalesced");
  const OpPlan plan = op_of(opts.reduceOp, tensors[0].scalar_type());
  auto work = make_work(c10d::OpType::ALLREDUCE_COALESCED, "coll_iallreduce", tensors);
  at::Tensor flat = flatten(tensors, *work);
  work->keep.push_back(flat);
  average_first(*work, plan, flat, size_);
  work->after_success.push_back([flat, tensors] { unflatten_into(flat, tensors); });
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_iallreduce(COLL_IN_PLACE, flat.data_ptr(), count_of(flat), datatype_of(flat),
                           plan.op, comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::reduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  const OpPlan plan = op_of(opts.reduceOp, t.scalar_type());
  const int root = int(opts.rootRank);
  const bool is_root = root == rank_;
  auto work = make_work(c10d::OpType::REDUCE, "coll_ireduce", tensors);
  at::Tensor buffer = stage(t, *work, is_root);
  if (is_root) average_first(*work, plan, buffer, size_);
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_ireduce(is_root ? COLL_IN_PLACE : buffer.data_ptr(),
                        is_root ? buffer.data_ptr() : nullptr, count_of(buffer),
                        datatype_of(buffer), plan.op, root, comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const at::Tensor& input = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == size_t(size_),
              "libcoll: allgather takes one list of ", size_, " output tensors");
  const std::vector<at::Tensor>& list = outputs[0];
  for (const at::Tensor& t : list) check_same_type(t, input, "allgather");
  auto work = make_work(c10d::OpType::ALLGATHER, "coll_iallgatherv", list);
  for (const at::Tensor& t : list) work->counts_a.push_back(count_of(t));
  work->counts_b = prefix_sums(work->counts_a);
  at::Tensor send = stage(input, *work, false);
  at::Tensor flat = scratch(*work, int64_t(work->counts_b.back() + work->counts_a.back()),
                            input.scalar_type());
  work->keep.push_back(flat);
  work->after_success.push_back([flat, list] { unflatten_into(flat, list); });
  coll_comm_t comm = comm_;
  WorkLibcoll* w = work.get();
  launch(work, [=](coll_request_t* request) {
    return coll_iallgatherv(send.data_ptr(), count_of(send), flat.data_ptr(), w->counts_a.data(),
                            w->counts_b.data(), datatype_of(send), comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  check_tensor(input, "_allgather_base");
  check_same_type(output, input, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * size_, "libcoll: _allgather_base: the output has ",
              output.numel(), " elements, not the group's size times the input's (",
              input.numel() * size_, ")");
  auto work = make_work(c10d::OpType::_ALLGATHER_BASE, "coll_iallgather", {output});
  at::Tensor send = stage(input, *work, false);
  at::Tensor receive = stage(output, *work, true);
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_iallgather(send.data_ptr(), receive.data_ptr(), count_of(send), datatype_of(send),
                           comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  TORCH_CHECK(!inputs.empty(), "libcoll: allgather_coalesced of no tensors");
  TORCH_CHECK(outputs.size() == size_t(size_), "libcoll: allgather_coalesced takes ", size_,
              " output lists, one a rank");
  for (const at::Tensor& t : inputs) check_same_type(t, inputs[0], "allgather_coalesced");
  std::vector<at::Tensor> all_outputs;
  for (const auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(),
                "libcoll: allgather_coalesced: each output list has one tensor an input");
    for (size_t i = 0; i < list.size(); ++i) {
      check_same_type(list[i], inputs[0], "allgather_coalesced");
      TORCH_CHECK(list[i].numel() == inputs[i].numel(),
                  "libcoll: allgather_coalesced: an output's size differs from its input's");
      all_outputs.push_back(list[i]);
    }
  }
  auto work = make_work(c10d::OpType::ALLGATHER_COALESCED, "coll_iallgather", all_outputs);
  at::Tensor send = flatten(inputs, *work);
  at::Tensor flat = scratch(*work, send.numel() * size_, send.scalar_type());
  work->keep.push_back(send);
  work->keep.push_back(flat);
  work->after_success.push_back([flat, all_outputs] { unflatten_into(flat, all_outputs); });
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_iallgather(send.data_ptr(), flat.data_ptr(), count_of(send), datatype_of(send),
                           comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const at::Tensor& input = single(inputs, "gather");
  const int root = int(opts.rootRank);
  const bool is_root = root == rank_;
  std::vector<at::Tensor> list;
  if (is_root) {
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == size_t(size_),
                "libcoll: gather takes, at the root, one list of ", size_, " output tensors");
    list = outputs[0];
    for (const at::Tensor& t : list) {
      check_same_type(t, input, "gather");
      TORCH_CHECK(t.numel() == input.numel(),
                  "libcoll: gather: an output's size differs from the input's");
    }
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "libcoll: gather takes output tensors at the root only");
  }
  auto work = make_work(c10d::OpType::GATHER, "coll_igather", list);
  at::Tensor send = stage(input, *work, false);
  at::Tensor flat;
  if (is_root) {
    flat = scratch(*work, input.numel() * size_, input.scalar_type());
    work->keep.push_back(flat);
    work->after_success.push_back([flat, list] { unflatten_into(flat, list); });
  }
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_igather(send.data_ptr(), is_root ? flat.data_ptr() : nullptr, count_of(send),
                        datatype_of(send), root, comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const at::Tensor& output = single(outputs, "scatter");
  const int root = int(opts.rootRank);
  const bool is_root = root == rank_;
  if (is_root) {
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == size_t(size_),
                "libcoll: scatter takes, at the root, one list of ", size_, " input tensors");
    for (const at::Tensor& t : inputs[0]) {
      check_same_type(t, output, "scatter");
      TORCH_CHECK(t.numel() == output.numel(),
                  "libcoll: scatter: an input's size differs from the output's");
    }
  } else {
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "libcoll: scatter takes input tensors at the root only");
  }
  auto work = make_work(c10d::OpType::SCATTER, "coll_iscatter", outputs);
  at::Tensor send;
  if (is_root) {
    send = flatten(inputs[0], *work);
    work->keep.push_back(send);
  }
  at::Tensor receive = stage(output, *work, true);
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_iscatter(is_root ? send.data_ptr() : nullptr, receive.data_ptr(),
                         count_of(receive), datatype_of(receive), root, comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& output = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == size_t(size_),
              "libcoll: reduce_scatter takes one list of ", size_, " input tensors");
  for (const at::Tensor& t : inputs[0]) check_same_type(t, output, "reduce_scatter");
  TORCH_CHECK(inputs[0][size_t(rank_)].numel() == output.numel(),
              "libcoll: reduce_scatter: this rank's input differs in size from its output");
  const OpPlan plan = op_of(opts.reduceOp, output.scalar_type());
  auto work = make_work(c10d::OpType::REDUCE_SCATTER, "coll_ireduce_scatter", outputs);
  for (const at::Tensor& t : inputs[0]) work->counts_a.push_back(count_of(t));
  at::Tensor send = flatten(inputs[0], *work);
  work->keep.push_back(send);
  at::Tensor receive = stage(output, *work, true);
  average_first(*work, plan, receive, size_);
  coll_comm_t comm = comm_;
  WorkLibcoll* w = work.get();
  launch(work, [=](coll_request_t* request) {
    return coll_ireduce_scatter(send.data_ptr(), receive.data_ptr(), w->counts_a.data(),
                                datatype_of(receive), plan.op, comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  check_tensor(output, "_reduce_scatter_base");
  check_same_type(input, output, "_reduce_scatter_base");
  TORCH_CHECK(input.numel() == output.numel() * size_, "libcoll: _reduce_scatter_base: the input has ",
              input.numel(), " elements, not the group's size times the output's (",
              output.numel() * size_, ")");
  const OpPlan plan = op_of(opts.reduceOp, output.scalar_type());
  auto work = make_work(c10d::OpType::_REDUCE_SCATTER_BASE, "coll_ireduce_scatter_block", {output});
  at::Tensor send = stage(input, *work, false);
  at::Tensor receive = stage(output, *work, true);
  average_first(*work, plan, receive, size_);
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) {
    return coll_ireduce_scatter_block(send.data_ptr(), receive.data_ptr(), count_of(receive),
                                      datatype_of(receive), plan.op, comm, request);
  });
  return work;
}

namespace {

// Elements a rank sends (or receives) in alltoall_base: the splits are in
// rows of dim 0; none given: equal parts.
std::vector<size_t> split_counts(const at::Tensor& t, const std::vector<int64_t>& splits,
                                 int size, const char* which) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t row = rows == 0 ? 0 : t.numel() / rows;
  std::vector<size_t> counts;
  if (splits.empty()) {
    TORCH_CHECK(rows % size == 0, "libcoll: alltoall_base: the ", which, "'s ", rows,
                " rows do not split equally among ", size, " ranks");
    counts.assign(size_t(size), size_t(rows / size * row));
    return counts;
  }
  TORCH_CHECK(splits.size() == size_t(size), "libcoll: alltoall_base: ", splits.size(), " ",
              which, " splits for ", size, " ranks");
  TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t(0)) == rows,
              "libcoll: alltoall_base: the ", which, " splits do not add up to its ", rows,
              " rows");
  for (int64_t split : splits) counts.push_back(size_t(split * row));
  return counts;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& /*opts*/) {
  check_tensor(input, "alltoall_base");
  check_same_type(output, input, "alltoall_base");
  auto work = make_work(c10d::OpType::ALLTOALL_BASE, "coll_ialltoallv", {output});
  work->counts_a = split_counts(input, input_splits, size_, "input");
  work->counts_b = prefix_sums(work->counts_a);
  work->counts_c = split_counts(output, output_splits, size_, "output");
  work->counts_d = prefix_sums(work->counts_c);
  at::Tensor send = stage(input, *work, false);
  at::Tensor receive = stage(output, *work, true);
  coll_comm_t comm = comm_;
  WorkLibcoll* w = work.get();
  launch(work, [=](coll_request_t* request) {
    return coll_ialltoallv(send.data_ptr(), w->counts_a.data(), w->counts_b.data(),
                           receive.data_ptr(), w->counts_c.data(), w->counts_d.data(),
                           datatype_of(send), comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK(inputs.size() == size_t(size_) && outputs.size() == size_t(size_),
              "libcoll: alltoall takes ", size_, " input and ", size_, " output tensors");
  for (const at::Tensor& t : inputs) check_same_type(t, inputs[0], "alltoall");
  for (const at::Tensor& t : outputs) check_same_type(t, inputs[0], "alltoall");
  auto work = make_work(c10d::OpType::ALLTOALL, "coll_ialltoallv", outputs);
  for (const at::Tensor& t : inputs) work->counts_a.push_back(count_of(t));
  for (const at::Tensor& t : outputs) work->counts_c.push_back(count_of(t));
  work->counts_b = prefix_sums(work->counts_a);
  work->counts_d = prefix_sums(work->counts_c);
  at::Tensor send = flatten(inputs, *work);
  at::Tensor flat = scratch(*work, int64_t(work->counts_d.back() + work->counts_c.back()),
                            inputs[0].scalar_type());
  work->keep.push_back(send);
  work->keep.push_back(flat);
  work->after_success.push_back([flat, outputs] { unflatten_into(flat, outputs); });
  coll_comm_t comm = comm_;
  WorkLibcoll* w = work.get();
  launch(work, [=](coll_request_t* request) {
    return coll_ialltoallv(send.data_ptr(), w->counts_a.data(), w->counts_b.data(),
                           flat.data_ptr(), w->counts_c.data(), w->counts_d.data(),
                           datatype_of(send), comm, request);
  });
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::barrier(const c10d::BarrierOptions& /*opts*/) {
  auto work = make_work(c10d::OpType::BARRIER, "coll_ibarrier", {});
  coll_comm_t comm = comm_;
  launch(work, [=](coll_request_t* request) { return coll_ibarrier(comm, request); });
  return work;
}

// Gloo's monitored barrier: every rank reports to rank 0, which waits up to
// the timeout for each in turn and raises naming the first that did not
// report (every one, with wait_all_ranks); otherwise it releases them.
// It runs through the group's store, not libcoll: libcoll's timeout is the
// process's COLL_TIMEOUT, not one a call; a collective that times out
// leaves its communicator unusable (sticky errors), so that a debugging aid
// would break the group it checks; and a collective cannot say which ranks
// it waited for. Through the store, a failed monitored barrier leaves the
// group usable, and the late ranks fail too when they arrive, from the
// verdict that rank 0 left (none waits for a rank 0 that already gave up).
//   libcoll/monitored/N/arrived/R   set by rank R on entering barrier N
//   libcoll/monitored/N/verdict     set by rank 0: "" (passed) or the error's text
//   libcoll/monitored/N/read        a count: the ranks that have read the verdict
// Rank 0 returns once the ranks that arrived have read the verdict (or a
// timeout later): the server of a TCPStore lives in its process, and a
// rank 0 that passed and then exited would take the verdict away from
// under the others.
void ProcessGroupLibcoll::monitoredBarrier(const c10d::BarrierOptions& opts,
                                           bool wait_all_ranks) {
  using clock = std::chrono::steady_clock;
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const auto start = clock::now();
  const uint64_t n = ++monitored_barriers_;
  const auto key = [](uint64_t barrier, const std::string& what) {
    return "libcoll/monitored/" + std::to_string(barrier) + "/" + what;
  };
  const auto arrived = [&](uint64_t barrier, int r) {
    return key(barrier, "arrived/" + std::to_string(r));
  };
  // Whether key k is set by the deadline, polled with check: not with
  // Store::wait's timeout, since a TCPStore client whose wait timed out
  // still gets the server's answer once the key comes, read as the answer
  // to its next request (the next call fails, "Broken pipe" or garbage).
  const auto wait_for = [&](const std::string& k, clock::time_point deadline) {
    auto pause = std::chrono::milliseconds(1);
    for (;;) {
      if (store_->check({k})) return true;
      if (clock::now() >= deadline) return false;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(20));
    }
  };
  // Keys of a passed barrier, which nobody reads again (a store that cannot
  // delete keys, whose deleteKey throws, keeps them).
  const auto forget = [&](const std::string& k) {
    try {
      store_->deleteKey(k);
    } catch (const std::exception&) {
    }
  };
  const std::string verdict = key(n, "verdict");
  // The store's own failures (its server, in rank 0's process for a
  // TCPStore, gone: rank 0 may have failed and left before a late rank came)
  // say where they come from.
  const auto store_failed = [&](const std::exception& e) {
    TORCH_CHECK(false, "libcoll: monitoredBarrier on rank ", rank_, ": torch's store failed",
                rank_ != 0 ? " (rank 0, whose process serves a TCPStore, may have left)" : "",
                ": ", e.what());
  };

  if (rank_ == 0) {
    std::string error;
    try {
      store_->set(arrived(n, 0), {});
      const auto deadline = start + timeout;
      std::vector<int> missing;
      for (int r = 1; r < size_; ++r) {
        // Once one is missing, the time is up: the others are only checked.
        if (!wait_for(arrived(n, r), missing.empty() ? deadline : start)) {
          missing.push_back(r);
          if (!wait_all_ranks) break;
        }
      }
      if (!missing.empty()) {
        std::string ranks;
        for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
        error = std::string(missing.size() == 1 ? "Rank " : "Ranks ") + ranks +
                " failed to pass monitoredBarrier in " + std::to_string(timeout.count()) + " ms";
      }
      store_->set(verdict, bytes_of(error));
      int arrivals = 0;
      for (int r = 1; r < size_; ++r) arrivals += error.empty() || store_->check({arrived(n, r)});
      const auto read_by = clock::now() + timeout;
      auto pause = std::chrono::milliseconds(1);
      while (store_->add(key(n, "read"), 0) < arrivals && clock::now() < read_by) {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(20));
      }
      if (error.empty()) {
        for (int r = 0; r < size_; ++r) forget(arrived(n, r));
        forget(verdict);
        forget(key(n, "read"));
      }
    } catch (const std::exception& e) {
      store_failed(e);
    }
    TORCH_CHECK(error.empty(), "libcoll: ", error);
    return;
  }
  // Rank 0 gives its verdict within the timeout of its own arrival: wait a
  // timeout for it; past that, rank 0 missing is this rank's verdict.
  bool zero_arrived = true, decided = false;
  std::vector<uint8_t> text;
  try {
    store_->set(arrived(n, rank_), {});
    decided = wait_for(verdict, start + timeout);
    if (!decided) {
      zero_arrived = store_->check({arrived(n, 0)});
      if (zero_arrived) decided = wait_for(verdict, clock::now() + timeout);
    }
    if (decided) {
      text = store_->get(verdict);
      store_->add(key(n, "read"), 1);
    }
  } catch (const std::exception& e) {
    store_failed(e);
  }
  TORCH_CHECK(zero_arrived, "libcoll: Rank 0 failed to pass monitoredBarrier in ",
              timeout.count(), " ms (rank ", rank_, " waited for it)");
  TORCH_CHECK(decided, "libcoll: rank ", rank_,
              " reached monitoredBarrier, but rank 0 gave no verdict within ",
              2 * timeout.count(), " ms");
  TORCH_CHECK(text.empty(), "libcoll: rank ", rank_,
              " reached monitoredBarrier, but rank 0 reports: ", std::string(text.begin(), text.end()));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::send(std::vector<at::Tensor>&, int, int) {
  unsupported("send (point-to-point)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::recv(std::vector<at::Tensor>&, int, int) {
  unsupported("recv (point-to-point)");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupLibcoll::recvAnysource(std::vector<at::Tensor>&,
                                                                   int) {
  unsupported("recvAnysource (point-to-point)");
}

void shutdown() {
  Progress::get().stop();
  std::lock_guard<std::mutex> lock(start_mutex());
  int initialized = 0;
  coll_initialized(&initialized);
  if (initialized) coll_finalize();
}

}  // namespace torch_libcoll
