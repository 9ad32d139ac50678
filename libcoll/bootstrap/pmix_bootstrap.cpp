// Bootstrap through a PMIx server: Open MPI's mpirun (4.x has one built
// in) or Slurm's srun --mpi=pmix. An allgather is PMIx_Put of this rank's
// blob under a fresh key, PMIx_Commit, PMIx_Fence with PMIX_COLLECT_DATA
// (so that every rank's data is local afterwards) and a PMIx_Get per rank.
//
// The PMIx client library is reference counted: PMIx_Init and
// PMIx_Finalize pair up per caller, so this works whether the application
// calls MPI_Init (which initializes PMIx too) before or after coll_init.
// Fences are collective over the namespace in call order, so ranks must
// call MPI_Init and coll_init in the same order, as they must anyway.
#include <pmix.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "job_secret.hpp"

namespace coll {
namespace {

// Counts the PMIx bootstraps this process made, so that a later one never
// reads a key a former one put (PMIx keeps values for the whole job).
std::atomic<uint64_t> pmix_bootstrap_epoch{0};

int coll_status_of(pmix_status_t status) {
  switch (status) {
    case PMIX_ERR_TIMEOUT:
      return COLL_ERR_TIMEOUT;
    case PMIX_ERR_UNREACH:
    case PMIX_ERR_LOST_CONNECTION:
    case PMIX_ERR_PROC_TERM_WO_SYNC:
    case PMIX_ERR_JOB_ABORTED:
    case PMIX_ERR_JOB_ABORTED_BY_SIG:
    case PMIX_ERR_PROC_ABORTED_BY_SIG:
      return COLL_ERR_PEER_LOST;
    default:
      return COLL_ERR_TRANSPORT;
  }
}

// PMIx takes whole seconds; 0 would mean "no timeout".
int pmix_timeout_seconds(double timeout_s) {
  if (!(timeout_s > 0)) return 1;
  return static_cast<int>(std::min(std::ceil(timeout_s), 1e6));
}

// An info array with PMIX_TIMEOUT (and optionally PMIX_COLLECT_DATA) that
// frees what PMIX_INFO_LOAD copied.
class InfoArray {
 public:
  explicit InfoArray(double timeout_s, bool collect_data = false) {
    for (pmix_info_t& info : infos_) PMIX_INFO_CONSTRUCT(&info);
    int seconds = pmix_timeout_seconds(timeout_s);
    PMIX_INFO_LOAD(&infos_[0], PMIX_TIMEOUT, &seconds, PMIX_INT);
    if (collect_data) {
      bool yes = true;
      PMIX_INFO_LOAD(&infos_[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
      count_ = 2;
    }
  }
  ~InfoArray() {
    for (pmix_info_t& info : infos_) PMIX_INFO_DESTRUCT(&info);
  }
  InfoArray(const InfoArray&) = delete;
  InfoArray& operator=(const InfoArray&) = delete;

  const pmix_info_t* data() const { return infos_; }
  size_t size() const { return count_; }

 private:
  pmix_info_t infos_[2];
  size_t count_ = 1;
};

struct ValueDeleter {
  void operator()(pmix_value_t* value) const { PMIX_VALUE_RELEASE(value); }
};
using ValuePtr = std::unique_ptr<pmix_value_t, ValueDeleter>;

// A fence in flight. PMIx_Fence blocks until the server answers, which may
// be never if a rank does not come; the non-blocking form lets the wait be
// bounded. If the wait gives up, the callback may still come later: it
// owns a reference, so the state outlives whichever finishes last.
struct FenceState {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
  InfoArray info;

  explicit FenceState(double timeout_s) : info(timeout_s, true) {}

  static void on_done(pmix_status_t status, void* cbdata) {
    auto* owner = static_cast<std::shared_ptr<FenceState>*>(cbdata);
    {
      std::lock_guard<std::mutex> lock((*owner)->mutex);
      (*owner)->done = true;
      (*owner)->status = status;
    }
    (*owner)->finished.notify_all();
    delete owner;
  }
};

class PmixBootstrap final : public Bootstrap {
 public:
  PmixBootstrap(const pmix_proc_t& me, int size)
      : me_(me),
        size_(size),
        job_id_(job_id_from_launcher_name("pmix_", me.nspace)),
        epoch_(pmix_bootstrap_epoch.fetch_add(1)) {}

  ~PmixBootstrap() override { PMIx_Finalize(nullptr, 0); }
  PmixBootstrap(const PmixBootstrap&) = delete;
  PmixBootstrap& operator=(const PmixBootstrap&) = delete;

  const char* name() const override { return "pmix"; }
  int rank() const override { return static_cast<int>(me_.rank); }
  int size() const override { return size_; }
  std::string job_id() const override { return job_id_; }
  const std::string& secret() const override { return secret_; }

  // The job's secret (Bootstrap::secret): rank 0 makes it, and the
  // key-value store carries it to every rank through this bootstrap's own
  // allgather (PMIx_Put, fence, PMIx_Get). The store is the job's: a PMIx
  // server serves the processes it launched, which prove who they are when
  // they connect (its psec check: the uid, or munge), so another user's
  // process cannot read it. COLL_JOB_SECRET is not used here: inherited
  // from an enclosing collrun job, or set on one node only, it need not be
  // the same on every rank, and the store's is.
  void share_secret(double timeout_s) { secret_ = secret_from_rank0(*this, timeout_s); }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double timeout_s) override {
    std::string key = "coll." + std::to_string(epoch_) + "." + std::to_string(++round_);

    // PMIx_Put copies the value, so pointing at our string is enough.
    pmix_value_t value;
    PMIX_VALUE_CONSTRUCT(&value);
    value.type = PMIX_BYTE_OBJECT;
    value.data.bo.bytes = const_cast<char*>(mine.data());
    value.data.bo.size = mine.size();
    check(PMIx_Put(PMIX_GLOBAL, key.c_str(), &value), "PMIx_Put", key);
    check(PMIx_Commit(), "PMIx_Commit", key);
    fence(timeout_s, key);

    std::vector<std::string> blobs(static_cast<size_t>(size_));
    InfoArray info(timeout_s);
    for (int rank = 0; rank < size_; ++rank) {
      if (rank == static_cast<int>(me_.rank)) {
        blobs[static_cast<size_t>(rank)] = mine;
        continue;
      }
      pmix_proc_t peer;
      PMIX_PROC_LOAD(&peer, me_.nspace, static_cast<pmix_rank_t>(rank));
      pmix_value_t* raw = nullptr;
      pmix_status_t status = PMIx_Get(&peer, key.c_str(), info.data(), info.size(), &raw);
      ValuePtr got(raw);
      if (status != PMIX_SUCCESS)
        fail(coll_status_of(status), "PMIx_Get of %s from rank %d (namespace %s) failed: %s",
             key.c_str(), rank, me_.nspace, PMIx_Error_string(status));
      if (!got || got->type != PMIX_BYTE_OBJECT)
        fail(COLL_ERR_INTERNAL,
             "PMIx_Get of %s from rank %d gave a value of type %d, not a "
             "byte object: another program put that key?",
             key.c_str(), rank, got ? static_cast<int>(got->type) : -1);
      if (got->data.bo.size > 0)
        blobs[static_cast<size_t>(rank)].assign(got->data.bo.bytes, got->data.bo.size);
    }
    return blobs;
  }

 private:
  void fence(double timeout_s, const std::string& key) {
    auto state = std::make_shared<FenceState>(timeout_s);
    auto* callback_owner = new std::shared_ptr<FenceState>(state);
    // nullptr procs: all processes of our namespace.
    pmix_status_t status = PMIx_Fence_nb(nullptr, 0, state->info.data(), state->info.size(),
                                         &FenceState::on_done, callback_owner);
    if (status == PMIX_OPERATION_SUCCEEDED) {  // done; no callback comes
      delete callback_owner;
      return;
    }
    if (status != PMIX_SUCCESS) {
      delete callback_owner;
      check(status, "PMIx_Fence_nb", key);
    }
    std::unique_lock<std::mutex> lock(state->mutex);
    double bounded = std::clamp(std::isnan(timeout_s) ? 0.0 : timeout_s, 0.0, 1e9);
    bool done = state->finished.wait_for(lock, std::chrono::duration<double>(bounded),
                                         [&] { return state->done; });
    // Our wait and the PMIx server's PMIX_TIMEOUT run out at about the same
    // moment: whichever comes first, the same message.
    if (!done || state->status == PMIX_ERR_TIMEOUT)
      fail(COLL_ERR_TIMEOUT,
           "bootstrap allgather (PMIx fence for %s, rank %u of %d, namespace "
           "%s) timed out after %g s: a rank did not reach it",
           key.c_str(), me_.rank, size_, me_.nspace, timeout_s);
    check(state->status, "PMIx_Fence", key);
  }

  void check(pmix_status_t status, const char* call, const std::string& key) {
    if (status == PMIX_SUCCESS) return;
    fail(coll_status_of(status), "%s for %s (rank %u of %d, namespace %s): %s", call, key.c_str(),
         me_.rank, size_, me_.nspace, PMIx_Error_string(status));
  }

  pmix_proc_t me_;
  int size_;
  std::string job_id_;
  uint64_t epoch_;
  uint64_t round_ = 0;
  std::string secret_;  // its bytes
};

void debug_note(const char* fmt, const char* detail) {
  if (bootstrap_debug_enabled()) std::fprintf(stderr, fmt, detail);
}

// The process that holds the reference below (a fork child inherits the
// exit handler, not the connection to the server).
pid_t pmix_holder_pid = 0;

// Once PMIx_Init has worked, this process keeps one more reference to its
// PMIx client until it exits. Without it a program that bootstraps, ends
// (coll_finalize) and bootstraps again with nothing else holding PMIx
// (no MPI) finalized its client in between: the server counted the rank as
// gone, and a peer already in the next bootstrap's fence got
// PMIX_ERR_PARTIAL_SUCCESS (seen once in CI: collrun_pmix_bootstrap's
// no-mpi case, "PMIx_Fence ... PARTIAL SUCCESS" at ranks 0 and 2). The
// reference is given back at exit, where a finalize belongs (MPI_Finalize
// before it only drops MPI's own).
void hold_pmix_until_exit() {
  static std::once_flag once;
  std::call_once(once, [] {
    pmix_proc_t me;
    PMIX_PROC_CONSTRUCT(&me);
    if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return;
    pmix_holder_pid = ::getpid();
    std::atexit(+[] {
      if (::getpid() == pmix_holder_pid) PMIx_Finalize(nullptr, 0);
    });
  });
}

}  // namespace

std::unique_ptr<Bootstrap> make_pmix_bootstrap(double timeout_s) {
  if (!environment_names_pmix_server()) return nullptr;
  pmix_proc_t me;
  PMIX_PROC_CONSTRUCT(&me);
  pmix_status_t status = PMIx_Init(&me, nullptr, 0);
  if (status != PMIX_SUCCESS) {
    debug_note("libcoll: PMIx_Init failed (%s): trying the next bootstrap\n",
               PMIx_Error_string(status));
    return nullptr;
  }
  hold_pmix_until_exit();
  // From here PMIx_Finalize must balance PMIx_Init on every path.
  struct FinalizeUnlessKept {
    bool keep = false;
    ~FinalizeUnlessKept() {
      if (!keep) PMIx_Finalize(nullptr, 0);
    }
  } finalize_guard;

  pmix_proc_t job;
  PMIX_PROC_LOAD(&job, me.nspace, PMIX_RANK_WILDCARD);
  InfoArray info(timeout_s);
  pmix_value_t* raw = nullptr;
  status = PMIx_Get(&job, PMIX_JOB_SIZE, info.data(), info.size(), &raw);
  ValuePtr value(raw);
  if (status != PMIX_SUCCESS || !value)
    fail(COLL_ERR_TRANSPORT, "PMIx_Get(PMIX_JOB_SIZE) for namespace %s: %s", me.nspace,
         PMIx_Error_string(status));
  uint64_t size = 0;
  PMIX_VALUE_GET_NUMBER(status, value.get(), size, uint64_t);
  if (status != PMIX_SUCCESS || size < 1 || size > (1u << 24) || me.rank >= size)
    fail(COLL_ERR_TRANSPORT,
         "PMIx gave a job size of %llu (value type %d) for rank %u of "
         "namespace %s",
         static_cast<unsigned long long>(size), static_cast<int>(value->type), me.rank, me.nspace);
  auto bootstrap = std::make_unique<PmixBootstrap>(me, static_cast<int>(size));
  finalize_guard.keep = true;  // the bootstrap's destructor balances PMIx_Init now
  bootstrap->share_secret(timeout_s);
  if (std::getenv(job_secret::kEnv))
    debug_note(
        "libcoll: %s is not used under PMIx: the job secret is rank 0's, from the PMIx "
        "key-value store\n",
        job_secret::kEnv);
  return bootstrap;
}

}  // namespace coll
