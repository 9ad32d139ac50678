// Requests of served non-blocking calls, and the MPI wait/test family.
//
// A served MPI_Iallreduce returns a real MPI_Request: a generalized request
// (MPI_Grequest_start) standing for the libcoll request. The shim keeps the
// outstanding ones in a list; drive() tests each libcoll request and, when
// one is done, unpacks its staged result (non-contiguous datatypes) and
// calls MPI_Grequest_complete. From then on MPI itself completes the handle
// in whatever wait or test the application calls - also in arrays with
// point-to-point requests, also from Fortran, also MPI_Request_free.
//
// drive() runs
//  - in the shim's MPI_Wait, _Waitall, _Waitany, _Waitsome, _Test, _Testall,
//    _Testany, _Testsome, _Request_free: while a served request is
//    outstanding, a wait is a loop of drive() and the PMPI_ test of the same
//    array (which also advances MPI: point-to-point requests in the array,
//    and peers waiting in MPI for this rank); with none outstanding it is the
//    PMPI_ call itself, at no cost;
//  - from Open MPI's progress engine (state.cpp), so a rank blocked in an MPI
//    call the shim does not intercept still advances libcoll.
// libcoll requests are tested by one thread at a time (the list's lock; the
// progress callback only tries it).
//
// Persistent requests (MPIX_X_init). A generalized request cannot be
// started again, so a served persistent call's MPI_Request is a persistent
// receive of zero bytes (PMPI_Recv_init) from this rank to itself, on a
// duplicate of MPI_COMM_SELF with a tag of its own: the proxy. It stands for
// the libcoll persistent request (coll_X_init, made once). MPI_Start and
// MPI_Startall start both (packing the inputs that have a staging copy
// again first: the user refills them between starts); when drive() finds
// the libcoll request done it unpacks the result and sends the zero bytes
// to itself, which completes the proxy. So MPI completes the handle, in any
// wait or test, and leaves it what MPI says a persistent request is after
// completion: inactive, allocated, startable; a wait on it while inactive
// returns at once with an empty status. MPI_Request_free of an inactive one
// frees both requests; of an active one it hands the user MPI_REQUEST_NULL
// and the shim frees both when the operation completes (MPI: the operation
// completes, then the request is freed).
//
// Errors. A served request that failed in libcoll is reported by the wait or
// test that completes it, through its communicator's error handler (taken
// when it failed): MPI_ERRORS_ARE_FATAL prints the libcoll message and
// aborts; otherwise the call returns the MPI error class (MPI_ERR_IN_STATUS
// with the class in the status for the array forms). A wait that is not the
// shim's (MPI_Request_get_status, ...) sees the class returned by the query
// callback instead.
#include <algorithm>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "shim.hpp"

namespace shim {
namespace {

struct ShimReq {
  Fn fn = Fn::kIallreduce;
  MPI_Comm comm = MPI_COMM_NULL;
  coll_comm_t lc = COLL_COMM_NULL;
  coll_request_t lreq = COLL_REQUEST_NULL;
  MPI_Request greq = MPI_REQUEST_NULL;
  Staging stage;
  std::vector<size_t> arrays[4];  // libcoll reads the plan's arrays until the operation completes
  std::shared_ptr<void> user_op;  // and a user op's context (user_ops.cpp)
  int status = COLL_SUCCESS;
  std::string message;
  Handler handler = Handler::kFatal;
  // A persistent request: greq is its proxy (above), tag the proxy's tag.
  bool persistent = false;
  int tag = -1;
  std::mutex state;      // running and freed: MPI_Start / _Request_free against the completion
  bool running = false;  // started, its completion not yet signalled to the proxy
  bool freed = false;    // MPI_Request_free while running: completion frees it
};

std::mutex g_mutex;  // g_outstanding, and testing their libcoll requests
std::vector<ShimReq*> g_outstanding;
std::atomic<int> g_outstanding_n{0};
std::mutex g_failed_mutex;
std::unordered_map<MPI_Request, ShimReq*> g_failed;  // completed with an error, not yet returned
std::atomic<int> g_failed_n{0};
thread_local bool t_in_wait = false;  // the shim reports errors itself

int query_fn(void* extra, MPI_Status* status) {
  auto* r = static_cast<ShimReq*>(extra);
  PMPI_Status_set_elements_x(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  if (r->status != COLL_SUCCESS && !t_in_wait) return error_class(r->status);
  return MPI_SUCCESS;
}

int free_fn(void* extra) {
  auto* r = static_cast<ShimReq*>(extra);
  if (r->status != COLL_SUCCESS) {
    std::lock_guard<std::mutex> l(g_failed_mutex);
    auto it = g_failed.find(r->greq);
    if (it != g_failed.end() && it->second == r) {
      g_failed.erase(it);
      g_failed_n.fetch_sub(1);
    }
  }
  r->stage.release();
  delete r;
  return MPI_SUCCESS;
}

int cancel_fn(void*, int) { return MPI_SUCCESS; }  // a collective is not cancelled

// The persistent requests by their MPI handle (the proxy), the proxies'
// communicator, and their tags (one per live request, so that a signal
// completes only its own proxy).
std::mutex g_persist_mutex;
std::unordered_map<MPI_Request, ShimReq*> g_persistent;
std::atomic<int> g_persistent_n{0};  // persistent ShimReqs alive (also freed ones still running)
MPI_Comm g_proxy_comm = MPI_COMM_NULL;
std::unordered_set<int> g_live_tags;
int g_next_tag = 0, g_tag_ub = 0;

// A tag no live proxy has (g_persist_mutex held): the next one, wrapping at
// MPI_TAG_UB. A tag is not taken back when its request is freed, so that a
// signal still on its way cannot complete a new proxy; it comes round again
// only after MPI_TAG_UB more requests. -1: none left.
int take_tag() {
  if (g_tag_ub == 0) {
    int* ub = nullptr;
    int flag = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    g_tag_ub = flag && ub ? *ub : 32767;
  }
  for (int tries = 0; tries <= g_tag_ub; ++tries) {
    const int tag = g_next_tag;
    g_next_tag = g_next_tag >= g_tag_ub ? 0 : g_next_tag + 1;
    if (g_live_tags.insert(tag).second) return tag;
  }
  return -1;
}

ShimReq* find_persistent(MPI_Request h) {
  std::lock_guard<std::mutex> l(g_persist_mutex);
  auto it = g_persistent.find(h);
  return it == g_persistent.end() ? nullptr : it->second;
}

// Completes r's proxy: the zero bytes to itself, matched by the posted
// receive at once. Non-blocking, as it may run in Open MPI's progress engine.
void signal_proxy(const ShimReq* r) {
  MPI_Request s = MPI_REQUEST_NULL;
  if (PMPI_Isend(nullptr, 0, MPI_BYTE, 0, r->tag, g_proxy_comm, &s) == MPI_SUCCESS)
    PMPI_Request_free(&s);
}

void forget_failure(ShimReq* r) {
  if (g_failed_n.load() == 0) return;
  std::lock_guard<std::mutex> l(g_failed_mutex);
  auto it = g_failed.find(r->greq);
  if (it != g_failed.end() && it->second == r) {
    g_failed.erase(it);
    g_failed_n.fetch_sub(1);
  }
}

// Frees a persistent request that is not running (no longer in
// g_persistent): the libcoll request, the staging, the proxy.
void destroy(ShimReq* r) {
  forget_failure(r);
  if (r->lreq != COLL_REQUEST_NULL && g_coll_live.load()) coll_request_free(&r->lreq);
  r->stage.release();
  if (r->greq != MPI_REQUEST_NULL) PMPI_Request_free(&r->greq);
  if (r->tag >= 0) {
    std::lock_guard<std::mutex> l(g_persist_mutex);
    g_live_tags.erase(r->tag);
  }
  g_persistent_n.fetch_sub(1);
  delete r;
}

// The libcoll request of a persistent r is done (r->status).
void complete_persistent(ShimReq* r) {
  if (r->status == COLL_SUCCESS && r->stage.unpack() != MPI_SUCCESS) {
    r->status = COLL_ERR_INTERNAL;
    r->message = "MPI_Unpack of the result failed";
  }
  if (r->status != COLL_SUCCESS) count_error(r->fn);
  bool freed;
  {
    // Signalled under the state lock: a start or free in another thread
    // waits until the proxy is complete.
    std::lock_guard<std::mutex> l(r->state);
    r->running = false;
    freed = r->freed;
    if (!freed && r->status != COLL_SUCCESS) {
      r->handler = handler_of(r->comm);
      std::lock_guard<std::mutex> lf(g_failed_mutex);
      g_failed[r->greq] = r;  // reported by the wait that completes the proxy
      g_failed_n.fetch_add(1);
    }
    signal_proxy(r);
  }
  if (freed) destroy(r);  // the user's handle is gone: the error too (MPI's rule)
}

int start(ShimReq* r) {
  {
    std::lock_guard<std::mutex> l(r->state);
    if (r->running)
      return raise_class(r->comm, handler_of(r->comm), "MPI_Start", MPI_ERR_REQUEST,
                         std::string("the ") + fn_info(r->fn).mpi_name +
                             " request is active (started and not completed)");
    r->running = true;
  }
  // The previous activation's failure, reported or not (until then a wait
  // on the inactive request reports it again).
  forget_failure(r);
  r->status = COLL_SUCCESS;
  r->message.clear();
  const int prep = r->stage.repack();
  const int status = coll_start(r->lreq);
  if (status != COLL_SUCCESS) {
    {
      std::lock_guard<std::mutex> l(r->state);
      r->running = false;
    }
    count_error(r->fn);
    return raise_error(r->comm, handler_of(r->comm), "MPI_Start", status,
                       coll_comm_last_error(r->lc));
  }
  const int rc = PMPI_Start(&r->greq);
  if (rc != MPI_SUCCESS) {
    // The operation is started on every rank: finish it here.
    if (wait_coll(&r->lreq) == COLL_SUCCESS) r->stage.unpack();
    std::lock_guard<std::mutex> l(r->state);
    r->running = false;
    return rc;
  }
  {
    std::lock_guard<std::mutex> l(g_mutex);
    g_outstanding.push_back(r);
    g_outstanding_n.store(int(g_outstanding.size()), std::memory_order_release);
  }
  if (prep != MPI_SUCCESS && r->comm != MPI_COMM_NULL) {
    // An MPI failure of this rank's packing: MPI's own error path.
    PMPI_Comm_call_errhandler(r->comm, prep);
  }
  return prep;
}

// The libcoll request of r is done (r->status): finish it and hand it to MPI.
void complete(ShimReq* r) {
  if (r->persistent) {
    complete_persistent(r);
    return;
  }
  if (r->status == COLL_SUCCESS && r->stage.unpack() != MPI_SUCCESS) {
    r->status = COLL_ERR_INTERNAL;
    r->message = "MPI_Unpack of the result failed";
  }
  r->stage.release();
  r->user_op.reset();  // may free the libcoll operator of an MPI op freed meanwhile
  if (r->status != COLL_SUCCESS) {
    count_error(r->fn);
    r->handler = handler_of(r->comm);
    std::lock_guard<std::mutex> l(g_failed_mutex);
    g_failed[r->greq] = r;
    g_failed_n.fetch_add(1);
  }
  PMPI_Grequest_complete(r->greq);  // r may be gone after this (freed already)
}

bool active() { return g_outstanding_n.load(std::memory_order_acquire) > 0 || g_failed_n.load() > 0; }

// What the shim must report for a failed request in an array.
struct Failed {
  int index;
  Fn fn;
  MPI_Comm comm;
  int status;
  std::string message;
  Handler handler;
};

void failed_in(int n, const MPI_Request* reqs, std::vector<Failed>& out) {
  out.clear();
  if (g_failed_n.load() == 0) return;
  std::lock_guard<std::mutex> l(g_failed_mutex);
  for (int i = 0; i < n; ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    auto it = g_failed.find(reqs[i]);
    if (it == g_failed.end()) continue;
    const ShimReq* r = it->second;
    out.push_back({i, r->fn, r->comm, r->status, r->message, r->handler});
  }
}

int report(const Failed& f) {
  return raise_error(f.comm, f.handler, fn_info(f.fn).mpi_name, f.status, f.message);
}

// The array forms: MPI_ERR_IN_STATUS, each status with its request's class.
int report_in_status(int rc, const std::vector<const Failed*>& done, MPI_Status* statuses,
                     const int* position_of_index, int n_status) {
  if (done.empty() || (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)) return rc;
  if (statuses != MPI_STATUSES_IGNORE) {
    if (rc == MPI_SUCCESS)
      for (int k = 0; k < n_status; ++k) statuses[k].MPI_ERROR = MPI_SUCCESS;
    for (const Failed* f : done) {
      const int k = position_of_index ? position_of_index[f->index] : f->index;
      if (k >= 0) statuses[k].MPI_ERROR = error_class(f->status);
    }
  }
  report(*done.front());
  return MPI_ERR_IN_STATUS;
}

struct InWait {
  InWait() { t_in_wait = true; }
  ~InWait() { t_in_wait = false; }
};

}  // namespace

void requests_init() {}

bool requests_outstanding() { return g_outstanding_n.load(std::memory_order_acquire) > 0; }

int drive(bool try_only) {
  std::vector<ShimReq*> done;
  {
    std::unique_lock<std::mutex> l(g_mutex, std::defer_lock);
    if (try_only) {
      if (!l.try_lock()) return 0;
    } else {
      l.lock();
    }
    for (size_t i = 0; i < g_outstanding.size();) {
      ShimReq* r = g_outstanding[i];
      int flag = 0;
      const int rc = coll_test(&r->lreq, &flag);
      if (rc != COLL_SUCCESS || flag) {
        r->status = rc;
        if (rc != COLL_SUCCESS) r->message = coll_comm_last_error(r->lc);
        done.push_back(r);
        g_outstanding[i] = g_outstanding.back();
        g_outstanding.pop_back();
      } else {
        ++i;
      }
    }
    g_outstanding_n.store(int(g_outstanding.size()), std::memory_order_release);
  }
  // Outside the lock: MPI_Grequest_complete may run free_fn.
  for (ShimReq* r : done) complete(r);
  return int(done.size());
}

void drain_requests() {
  Pacer pacer;
  while (requests_outstanding()) {
    drive(false);
    mpi_progress();
    pacer.pause();
  }
}

bool requests_pending_on(coll_comm_t lc) {
  drive(false);  // those that have finished are not pending
  std::lock_guard<std::mutex> l(g_mutex);
  for (const ShimReq* r : g_outstanding)
    if (r->lc == lc) return true;
  return false;
}

void forget_comm(MPI_Comm comm) {
  {
    std::lock_guard<std::mutex> l(g_mutex);
    for (ShimReq* r : g_outstanding)
      if (r->comm == comm) r->comm = MPI_COMM_NULL;
  }
  {
    std::lock_guard<std::mutex> l(g_persist_mutex);
    for (auto& [h, r] : g_persistent)
      if (r->comm == comm) r->comm = MPI_COMM_NULL;
  }
  std::lock_guard<std::mutex> l(g_failed_mutex);
  for (auto& [h, r] : g_failed)
    if (r->comm == comm) r->comm = MPI_COMM_NULL;
}

int wait_coll(coll_request_t* request) {
  Pacer pacer;
  for (;;) {
    int flag = 0;
    const int rc = coll_test(request, &flag);
    if (rc != COLL_SUCCESS || flag) return rc;
    mpi_progress();
    pacer.pause();
  }
}

namespace {
// r takes the started or made libcoll request and what it reads: the
// plan's staging, libcoll's count and displacement arrays, and a user op's
// context (a persistent request's for its whole life: libcoll took the
// function and context at its init, and MPI_Op_free may come before a
// later MPI_Start).
void take(ShimReq* r, coll_request_t lreq, Plan& plan) {
  r->lreq = lreq;
  r->stage = plan.stage;
  plan.stage = Staging{};
  r->arrays[0] = std::move(plan.scounts);
  r->arrays[1] = std::move(plan.sdispls);
  r->arrays[2] = std::move(plan.rcounts);
  r->arrays[3] = std::move(plan.rdispls);
  r->user_op = std::move(plan.user_op);
}
}  // namespace

int make_request(Fn fn, MPI_Comm comm, coll_comm_t lc, coll_request_t lreq, Plan& plan,
                 MPI_Request* request) {
  auto* r = new ShimReq;
  r->fn = fn;
  r->comm = comm;
  r->lc = lc;
  take(r, lreq, plan);
  const int rc = PMPI_Grequest_start(query_fn, free_fn, cancel_fn, r, &r->greq);
  if (rc != MPI_SUCCESS) {
    // The operation is started on every rank: finish it here.
    wait_coll(&r->lreq);
    r->stage.unpack();
    r->stage.release();
    delete r;
    *request = MPI_REQUEST_NULL;
    return rc;
  }
  *request = r->greq;
  int flag = 0;
  const int crc = coll_test(&r->lreq, &flag);
  if (crc != COLL_SUCCESS || flag) {
    r->status = crc;
    if (crc != COLL_SUCCESS) r->message = coll_comm_last_error(lc);
    complete(r);
    return MPI_SUCCESS;
  }
  std::lock_guard<std::mutex> l(g_mutex);
  g_outstanding.push_back(r);
  g_outstanding_n.store(int(g_outstanding.size()), std::memory_order_release);
  return MPI_SUCCESS;
}

int make_persistent(Fn fn, MPI_Comm comm, coll_comm_t lc, coll_request_t lreq, Plan& plan,
                    MPI_Request* request) {
  auto* r = new ShimReq;
  g_persistent_n.fetch_add(1);
  r->fn = fn;
  r->comm = comm;
  r->lc = lc;
  r->persistent = true;
  take(r, lreq, plan);
  int rc = MPI_SUCCESS;
  {
    std::lock_guard<std::mutex> l(g_persist_mutex);
    if (g_proxy_comm == MPI_COMM_NULL) rc = PMPI_Comm_dup(MPI_COMM_SELF, &g_proxy_comm);
    if (rc == MPI_SUCCESS) r->tag = take_tag();
    if (rc == MPI_SUCCESS && r->tag < 0) rc = MPI_ERR_INTERN;
    if (rc == MPI_SUCCESS)
      rc = PMPI_Recv_init(nullptr, 0, MPI_BYTE, 0, r->tag, g_proxy_comm, &r->greq);
    if (rc == MPI_SUCCESS) g_persistent[r->greq] = r;
  }
  if (rc != MPI_SUCCESS) {
    // Nothing started: this rank's call fails, as for a rejected argument.
    destroy(r);
    *request = MPI_REQUEST_NULL;
    count_error(fn);
    return raise_class(comm, handler_of(comm), fn_info(fn).mpi_name, rc,
                       "its MPI request could not be made");
  }
  *request = r->greq;
  return MPI_SUCCESS;
}

bool persistent_live() { return g_persistent_n.load(std::memory_order_acquire) > 0; }

bool start_persistent(MPI_Request* request, int* rc) {
  if (!persistent_live() || !request || *request == MPI_REQUEST_NULL) return false;
  ShimReq* r = find_persistent(*request);
  if (!r) return false;
  *rc = start(r);
  return true;
}

bool free_persistent(MPI_Request* request, int* rc) {
  if (!persistent_live() || !request || *request == MPI_REQUEST_NULL) return false;
  ShimReq* r = nullptr;
  {
    std::lock_guard<std::mutex> l(g_persist_mutex);
    auto it = g_persistent.find(*request);
    if (it == g_persistent.end()) return false;
    r = it->second;
    g_persistent.erase(it);
  }
  *request = MPI_REQUEST_NULL;
  *rc = MPI_SUCCESS;
  {
    std::lock_guard<std::mutex> l(r->state);
    if (r->running) {
      r->freed = true;  // complete_persistent frees it
      return true;
    }
  }
  destroy(r);
  return true;
}

void persistent_finalize() {
  // After drain_requests: none is running. These are the ones the program
  // did not free.
  std::vector<ShimReq*> left;
  {
    std::lock_guard<std::mutex> l(g_persist_mutex);
    for (auto& [h, r] : g_persistent) left.push_back(r);
    g_persistent.clear();
  }
  for (ShimReq* r : left) destroy(r);
  MPI_Comm proxies = MPI_COMM_NULL;
  {
    std::lock_guard<std::mutex> l(g_persist_mutex);
    std::swap(proxies, g_proxy_comm);
  }
  // Unlocked: its attribute callbacks (comms.cpp) come back to forget_comm.
  if (proxies != MPI_COMM_NULL) PMPI_Comm_free(&proxies);
}

}  // namespace shim

// ---- the MPI wait/test family -------------------------------------------------

using shim::Failed;

extern "C" {

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (!request || !shim::active()) return PMPI_Wait(request, status);
  std::vector<Failed> failed;
  shim::failed_in(1, request, failed);
  int rc;
  {
    shim::InWait in;
    shim::Pacer pacer;
    for (;;) {
      if (!shim::requests_outstanding()) {
        rc = PMPI_Wait(request, status);
        break;
      }
      shim::drive(false);
      int flag = 0;
      rc = PMPI_Test(request, &flag, status);
      if (rc != MPI_SUCCESS || flag) break;
      pacer.pause();
    }
  }
  if (rc == MPI_SUCCESS && !failed.empty()) rc = shim::report(failed[0]);
  return rc;
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (!request || !shim::active()) return PMPI_Test(request, flag, status);
  std::vector<Failed> failed;
  shim::failed_in(1, request, failed);
  if (shim::requests_outstanding()) shim::drive(false);
  int rc;
  {
    shim::InWait in;
    rc = PMPI_Test(request, flag, status);
  }
  if (rc == MPI_SUCCESS && *flag && !failed.empty()) rc = shim::report(failed[0]);
  return rc;
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (count <= 0 || !requests || !shim::active()) return PMPI_Waitall(count, requests, statuses);
  std::vector<Failed> failed;
  shim::failed_in(count, requests, failed);
  int rc;
  {
    shim::InWait in;
    shim::Pacer pacer;
    for (;;) {
      if (!shim::requests_outstanding()) {
        rc = PMPI_Waitall(count, requests, statuses);
        break;
      }
      shim::drive(false);
      int flag = 0;
      rc = PMPI_Testall(count, requests, &flag, statuses);
      if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || flag) break;
      pacer.pause();
    }
  }
  std::vector<const Failed*> done;
  for (const Failed& f : failed) done.push_back(&f);
  return shim::report_in_status(rc, done, statuses, nullptr, count);
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (count <= 0 || !requests || !shim::active()) return PMPI_Testall(count, requests, flag, statuses);
  std::vector<Failed> failed;
  shim::failed_in(count, requests, failed);
  if (shim::requests_outstanding()) shim::drive(false);
  int rc;
  {
    shim::InWait in;
    rc = PMPI_Testall(count, requests, flag, statuses);
  }
  if (!*flag) return rc;
  std::vector<const Failed*> done;
  for (const Failed& f : failed) done.push_back(&f);
  return shim::report_in_status(rc, done, statuses, nullptr, count);
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (count <= 0 || !requests || !shim::active()) return PMPI_Waitany(count, requests, index, status);
  std::vector<Failed> failed;
  shim::failed_in(count, requests, failed);
  int rc;
  {
    shim::InWait in;
    shim::Pacer pacer;
    for (;;) {
      if (!shim::requests_outstanding()) {
        rc = PMPI_Waitany(count, requests, index, status);
        break;
      }
      shim::drive(false);
      int flag = 0;
      rc = PMPI_Testany(count, requests, index, &flag, status);
      if (rc != MPI_SUCCESS || flag) break;
      pacer.pause();
    }
  }
  if (rc == MPI_SUCCESS)
    for (const Failed& f : failed)
      if (f.index == *index) return shim::report(f);
  return rc;
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (count <= 0 || !requests || !shim::active())
    return PMPI_Testany(count, requests, index, flag, status);
  std::vector<Failed> failed;
  shim::failed_in(count, requests, failed);
  if (shim::requests_outstanding()) shim::drive(false);
  int rc;
  {
    shim::InWait in;
    rc = PMPI_Testany(count, requests, index, flag, status);
  }
  if (rc == MPI_SUCCESS && *flag)
    for (const Failed& f : failed)
      if (f.index == *index) return shim::report(f);
  return rc;
}

namespace {
int some_result(int rc, const std::vector<Failed>& failed, int count, int outcount,
                const int indices[], MPI_Status statuses[]) {
  if (outcount == MPI_UNDEFINED || outcount <= 0 || failed.empty()) return rc;
  std::vector<int> position(size_t(count), -1);
  for (int k = 0; k < outcount; ++k) position[size_t(indices[k])] = k;
  std::vector<const Failed*> done;
  for (const Failed& f : failed)
    if (position[size_t(f.index)] >= 0) done.push_back(&f);
  return shim::report_in_status(rc, done, statuses, position.data(), outcount);
}
}  // namespace

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (incount <= 0 || !requests || !shim::active())
    return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  std::vector<Failed> failed;
  shim::failed_in(incount, requests, failed);
  int rc;
  {
    shim::InWait in;
    shim::Pacer pacer;
    for (;;) {
      if (!shim::requests_outstanding()) {
        rc = PMPI_Waitsome(incount, requests, outcount, indices, statuses);
        break;
      }
      shim::drive(false);
      rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
      if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *outcount != 0) break;
      pacer.pause();
    }
  }
  return some_result(rc, failed, incount, *outcount, indices, statuses);
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  if (incount <= 0 || !requests || !shim::active())
    return PMPI_Testsome(incount, requests, outcount, indices, statuses);
  std::vector<Failed> failed;
  shim::failed_in(incount, requests, failed);
  if (shim::requests_outstanding()) shim::drive(false);
  int rc;
  {
    shim::InWait in;
    rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
  }
  return some_result(rc, failed, incount, *outcount, indices, statuses);
}

int MPI_Request_free(MPI_Request* request) {
  int rc;
  if (shim::free_persistent(request, &rc)) return rc;
  // A served request goes on in the background (its libcoll request stays
  // in the list until done); MPI frees the handle when both happened.
  if (shim::requests_outstanding()) shim::drive(false);
  return PMPI_Request_free(request);
}

int MPI_Start(MPI_Request* request) {
  int rc;
  if (shim::start_persistent(request, &rc)) return rc;
  return PMPI_Start(request);
}

int MPI_Startall(int count, MPI_Request requests[]) {
  if (count <= 0 || !requests || !shim::persistent_live()) return PMPI_Startall(count, requests);
  // The shim's requests start in array order (the same on every rank, as
  // MPI requires of collectives); MPI's own go to PMPI_Startall together.
  std::vector<MPI_Request> theirs;
  std::vector<int> at;
  int first = MPI_SUCCESS;
  for (int i = 0; i < count; ++i) {
    int rc;
    if (shim::start_persistent(&requests[i], &rc)) {
      if (rc != MPI_SUCCESS && first == MPI_SUCCESS) first = rc;
    } else {
      theirs.push_back(requests[i]);
      at.push_back(i);
    }
  }
  if (theirs.empty()) return first;
  const int rc = PMPI_Startall(int(theirs.size()), theirs.data());
  for (size_t k = 0; k < theirs.size(); ++k) requests[at[k]] = theirs[k];
  return first != MPI_SUCCESS ? first : rc;
}

}  // extern "C"
