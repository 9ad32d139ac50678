// Process state of the shim: configuration, MPI_Init / MPI_Finalize,
// statistics, MPI progress, error reporting.
//
// Init. PMPI_Init(_thread) first, then coll_init_thread with the level MPI
// provided (libcoll joins the same PMIx job: its world is MPI_COMM_WORLD,
// rank for rank), then one MPI_Allreduce over world that checks that libcoll
// came up on every rank with the same ranks and that the configuration
// (COLL_MPI_*, the thread level) is the same everywhere. Anything else and
// the shim passes every call to MPI on every rank. Then MPI_COMM_WORLD and
// MPI_COMM_SELF get their libcoll communicators.
//
// Finalize. Outstanding served requests are completed, rank 0 prints the
// statistics (COLL_MPI_STATS=1: its own counts, and the sums over all ranks
// in brackets), coll_finalize, then PMPI_Finalize.
//
// Progress. A rank waiting inside libcoll does not advance MPI, and a rank
// blocked inside MPI does not advance libcoll; either could hold up a peer
// that waits for the other kind (an MPI_Isend of this rank that a peer's
// MPI_Recv needs, before a served MPI_Allreduce). So: every wait of the shim
// calls opal_progress() (Open MPI's progress engine) while it polls libcoll
// (a served blocking call waits in libcoll's own blocking call, which calls
// it through coll_set_wait_hook),
// and the shim registers a progress callback with Open MPI
// (opal_progress_register) that advances outstanding served requests
// whenever MPI itself waits (MPI_Recv, a Fortran MPI_WAIT that calls
// PMPI_Wait, a collective passed to MPI, ...). Both are looked up with dlsym;
// without them (another MPI) the shim's own wait and test functions still
// drive its requests. COLL_MPI_PROGRESS_HOOK=0 leaves the callback out.
#include <dlfcn.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coll_mpi.h"
#include "shim.hpp"

namespace shim {

Config g_config;
std::atomic<bool> g_active{false};
std::atomic<bool> g_coll_live{false};
int g_thread_level = MPI_THREAD_SINGLE;
int g_world_rank = 0, g_world_size = 1;

namespace {

bool g_own_coll = false;   // the shim called coll_init (so it calls coll_finalize)
int g_app_inits = 0;       // the program's own coll_init calls while the shim's libcoll is up

// libcoll's own coll_init_thread / coll_finalize: the shim defines these
// names too (below), so it calls the real ones through dlsym.
int real_coll_init_thread(int* argc, char*** argv, int required, int* provided) {
  using Fn = int (*)(int*, char***, int, int*);
  static Fn f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "coll_init_thread"));
  return f ? f(argc, argv, required, provided) : COLL_ERR_INTERNAL;
}
int real_coll_finalize() {
  using Fn = int (*)();
  static Fn f = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "coll_finalize"));
  return f ? f() : COLL_ERR_INTERNAL;
}
bool g_started = false;
uint64_t g_spin = 64;

struct FnStats {
  std::atomic<uint64_t> served{0}, errors{0}, rejected{0};
  std::atomic<uint64_t> passed[kReasonCount] = {};
};
FnStats g_stats[kFnCount];
std::atomic<uint64_t> g_comm_events[int(CommEvent::kCount)] = {};

using ProgressFn = int (*)();
ProgressFn g_opal_progress = nullptr;
// Open MPI's opal_progress_yield_when_idle (on where mpirun oversubscribes),
// or null; and whether it was on when the hook was registered.
bool* g_opal_yield = nullptr;
bool g_opal_yields = false;
int (*g_unregister)(ProgressFn) = nullptr;
bool g_hook_registered = false;

bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

void load_config() {
  Config c;
  c.disabled = env_is("COLL_MPI_DISABLE", "1");
  c.stats = env_is("COLL_MPI_STATS", "1");
  c.progress_hook = !env_is("COLL_MPI_PROGRESS_HOOK", "0");
  const char* list = std::getenv("COLL_MPI_COLLECTIVES");
  if (list && *list && std::strcmp(list, "all") != 0) {
    c.selected = 0;
    std::string text(list);
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      std::string name = text.substr(start, comma - start);
      start = comma + 1;
      while (!name.empty() && (name.back() == ' ')) name.pop_back();
      while (!name.empty() && (name.front() == ' ')) name.erase(0, 1);
      if (name.empty()) continue;
      bool known = name == "none";
      for (int f = 0; f < kFnCount; ++f) {
        const FnInfo& info = fn_info(Fn(f));
        std::string exact = std::strchr(info.mpi_name, '_') + 1;  // "Allreduce", "Allreduce_init"
        for (char& ch : exact) ch = char(std::tolower(static_cast<unsigned char>(ch)));
        if (name == info.knob || name == exact) {
          c.selected |= 1ull << f;
          known = true;
        }
      }
      if (!known && g_world_rank == 0)
        std::fprintf(stderr, "libcoll_mpi: COLL_MPI_COLLECTIVES: unknown collective '%s' (ignored)\n",
                     name.c_str());
    }
  }
  c.selected_text = list && *list ? list : "all";
  g_config = c;
}

uint64_t config_hash() {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  mix(g_config.disabled);
  mix(g_config.selected);
  mix(g_config.progress_hook);
  mix(uint64_t(g_thread_level));
  return h;
}

// Spin while each rank of this host has a CPU, as libcoll does: the union
// of the affinity masks of the host's ranks against their number.
void choose_spin() {
  if (const char* v = std::getenv("COLL_SPIN_POLLS"); v && *v) {
    g_spin = std::strtoull(v, nullptr, 10);
    return;
  }
  MPI_Comm node;
  PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 1;
  PMPI_Comm_size(node, &local);
  cpu_set_t mine, all;
  CPU_ZERO(&mine);
  CPU_ZERO(&all);
  sched_getaffinity(0, sizeof mine, &mine);
  static_assert(sizeof(cpu_set_t) % sizeof(unsigned long) == 0);
  PMPI_Allreduce(&mine, &all, int(sizeof(cpu_set_t) / sizeof(unsigned long)), MPI_UNSIGNED_LONG,
                 MPI_BOR, node);
  PMPI_Comm_free(&node);
  g_spin = local > CPU_COUNT(&all) ? 0 : 64;
}

int progress_hook() {
  if (!requests_outstanding()) return 0;
  thread_local bool inside = false;
  if (inside) return 0;
  inside = true;
  const int n = drive(true);
  inside = false;
  return n;
}

void register_hook() {
  g_opal_progress = reinterpret_cast<ProgressFn>(dlsym(RTLD_DEFAULT, "opal_progress"));
  g_opal_yield = static_cast<bool*>(dlsym(RTLD_DEFAULT, "opal_progress_yield_when_idle"));
  g_opal_yields = g_opal_yield && __atomic_load_n(g_opal_yield, __ATOMIC_RELAXED);
  // A served blocking call waits in libcoll (its wait policy, its
  // synchronous forms of small calls), MPI's progress called each time a
  // poll finds it still waiting.
  coll_set_wait_hook([](void*) { mpi_progress(); }, nullptr);
  if (!g_config.progress_hook) return;
  auto reg = reinterpret_cast<int (*)(ProgressFn)>(dlsym(RTLD_DEFAULT, "opal_progress_register"));
  g_unregister = reinterpret_cast<int (*)(ProgressFn)>(dlsym(RTLD_DEFAULT, "opal_progress_unregister"));
  if (reg && g_unregister && reg(progress_hook) == 0) g_hook_registered = true;
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
    default: return "?";
  }
}

void print_stats() {
  // Rank 0's counts, and the sums over all ranks (a collective over world:
  // MPI_Finalize is one).
  const size_t per_fn = 3 + kReasonCount;  // served, errors, rejected, the reasons
  std::vector<unsigned long long> mine(kFnCount * per_fn + int(CommEvent::kCount)), all(mine.size());
  for (int f = 0; f < kFnCount; ++f) {
    mine[f * per_fn] = g_stats[f].served.load();
    mine[f * per_fn + 1] = g_stats[f].errors.load();
    mine[f * per_fn + 2] = g_stats[f].rejected.load();
    for (int r = 0; r < kReasonCount; ++r) mine[f * per_fn + 3 + r] = g_stats[f].passed[r].load();
  }
  for (int e = 0; e < int(CommEvent::kCount); ++e) mine[kFnCount * per_fn + e] = g_comm_events[e].load();
  PMPI_Reduce(mine.data(), all.data(), int(mine.size()), MPI_UNSIGNED_LONG_LONG, MPI_SUM, 0,
              MPI_COMM_WORLD);
  if (g_world_rank != 0) return;
  std::printf("libcoll_mpi: statistics of rank 0 [sums over all %d ranks]: %s, %s, collectives %s\n",
              g_world_size, g_active.load() ? "active" : (g_config.disabled ? "disabled (COLL_MPI_DISABLE=1)" : "inactive"),
              thread_level_name(g_thread_level), g_config.selected_text.c_str());
  for (int f = 0; f < kFnCount; ++f) {
    const unsigned long long* m = &mine[f * per_fn];
    const unsigned long long* a = &all[f * per_fn];
    unsigned long long passed = 0, passed_all = 0;
    std::string why;
    for (int r = 0; r < kReasonCount; ++r) {
      passed += m[3 + r];
      passed_all += a[3 + r];
      if (m[3 + r]) {
        if (!why.empty()) why += ", ";
        why += reason_name(Reason(r));
        why += ": " + std::to_string(m[3 + r]);
      }
    }
    std::string line = std::string("libcoll_mpi: ") + fn_info(Fn(f)).mpi_name + ": " +
                       std::to_string(m[0]) + " served, " + std::to_string(passed) + " passed to MPI";
    if (!why.empty()) line += " (" + why + ")";
    if (m[1]) line += ", " + std::to_string(m[1]) + " failed in libcoll";
    if (m[2]) line += ", " + std::to_string(m[2]) + " rejected (invalid argument)";
    line += " [all ranks: " + std::to_string(a[0]) + " served, " + std::to_string(passed_all) +
            " passed to MPI]";
    std::printf("%s\n", line.c_str());
  }
  const unsigned long long* m = &mine[kFnCount * per_fn];
  const unsigned long long* a = &all[kFnCount * per_fn];
  std::printf(
      "libcoll_mpi: communicators: %llu derived, %llu congruent to world, %llu of size 1 served "
      "by the self communicator, %llu left to MPI (window budget), %llu failed "
      "[all ranks: %llu derived, %llu congruent, %llu size 1, %llu budget, %llu failed]\n",
      m[0], m[1], m[2], m[3], m[4], a[0], a[1], a[2], a[3], a[4]);
  std::fflush(stdout);
}

}  // namespace

const char* reason_name(Reason r) {
  switch (r) {
    case Reason::kDisabled: return "disabled";
    case Reason::kUnavailable: return "libcoll unavailable";
    case Reason::kNotSelected: return "not in COLL_MPI_COLLECTIVES";
    case Reason::kInterComm: return "inter-communicator";
    case Reason::kComm: return "communicator without libcoll";
    case Reason::kCommPending: return "communicator not set up yet";
    case Reason::kUserOp: return "user op not made through the shim";
    case Reason::kUserOpType: return "user op on a datatype libcoll cannot carry";
    case Reason::kOp: return "op";
    case Reason::kDatatype: return "datatype";
    case Reason::kOpDatatype: return "op not defined on datatype";
    case Reason::kArgs: return "invalid arguments";
    case Reason::kPerPeerTypes: return "a datatype per peer";
    case Reason::kCount: break;
  }
  return "?";
}

void count_served(Fn fn) { g_stats[int(fn)].served.fetch_add(1, std::memory_order_relaxed); }
void count_passed(Fn fn, Reason why) {
  g_stats[int(fn)].passed[int(why)].fetch_add(1, std::memory_order_relaxed);
}
void count_error(Fn fn) { g_stats[int(fn)].errors.fetch_add(1, std::memory_order_relaxed); }
void count_rejected(Fn fn) { g_stats[int(fn)].rejected.fetch_add(1, std::memory_order_relaxed); }
void count_comm(CommEvent e) { g_comm_events[int(e)].fetch_add(1, std::memory_order_relaxed); }

void start(int* argc, char*** argv, int provided) {
  if (g_started) return;
  g_started = true;
  PMPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &g_world_size);
  register_ft_classes();
  g_thread_level = provided;
  load_config();

  int coll_ok = 1;
  if (!g_config.disabled) {
    int initialized = 0;
    coll_initialized(&initialized);
    int rc = COLL_SUCCESS;
    if (!initialized) {
      rc = real_coll_init_thread(argc, argv, provided, nullptr);
      g_own_coll = rc == COLL_SUCCESS;
    }
    int rank = -1, size = -1;
    if (rc == COLL_SUCCESS) {
      coll_comm_rank(coll_comm_world(), &rank);
      coll_comm_size(coll_comm_world(), &size);
    }
    coll_ok = rc == COLL_SUCCESS && rank == g_world_rank && size == g_world_size;
    if (rc != COLL_SUCCESS)
      std::fprintf(stderr, "libcoll_mpi: rank %d: coll_init failed: %s: %s\n", g_world_rank,
                   coll_strerror(rc), coll_comm_last_error(COLL_COMM_NULL));
    else if (!coll_ok)
      std::fprintf(stderr,
                   "libcoll_mpi: rank %d: libcoll's world (rank %d of %d) is not MPI_COMM_WORLD "
                   "(rank %d of %d)\n",
                   g_world_rank, rank, size, g_world_rank, g_world_size);
  }
  // Every rank takes part, disabled or not: the configuration must agree.
  const long long h = (long long)(config_hash() >> 2);
  long long v[3] = {coll_ok, h, -h}, all[3];
  PMPI_Allreduce(v, all, 3, MPI_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  if (g_config.disabled && all[1] == -all[2]) return;
  if (!all[0]) {
    // Not every rank has libcoll: its collectives could not complete, so
    // neither can coll_finalize's; leave libcoll as it is.
    if (g_world_rank == 0)
      std::fprintf(stderr, "libcoll_mpi: libcoll did not start on every rank: every call goes to MPI\n");
    return;
  }
  g_coll_live = true;
  if (all[1] != -all[2]) {
    if (g_world_rank == 0)
      std::fprintf(stderr,
                   "libcoll_mpi: COLL_MPI_* or the thread level differ between ranks: every call "
                   "goes to MPI\n");
    return;
  }
  choose_spin();
  types_init();
  requests_init();
  comms_init();
  if (!comms_start()) {
    if (g_world_rank == 0)
      std::fprintf(stderr, "libcoll_mpi: the world communicator could not be set up: every call goes to MPI\n");
    return;
  }
  register_hook();
  g_active = true;
}

int finish() {
  if (g_active.load()) {
    drain_requests();
    persistent_finalize();
  }
  if (g_config.stats) print_stats();
  if (g_hook_registered) {
    g_unregister(progress_hook);
    g_hook_registered = false;
  }
  if (g_active.load()) coll_set_wait_hook(nullptr, nullptr);
  g_active = false;
  if (g_coll_live.exchange(false)) {
    comms_finalize();
    if (g_own_coll) real_coll_finalize();
  }
  return PMPI_Finalize();
}

// The shim's waits (and libcoll's, through the wait hook) call this once
// per failed poll and then pace themselves: libcoll's wait policy or
// Pacer yields the CPU where the ranks outnumber the cores. Open MPI's
// opal_progress yields too when it finds nothing to do and
// mpi_yield_when_idle is on, which mpirun sets in exactly those jobs: two
// yields per poll, each a context switch there. At np 4 on 2 cores an
// MPI_Allreduce of 4 B took 4.8-5.1 us and 9.0-9.3 context switches per
// barrier + call (counted with a sched_yield wrapper); with opal's yield
// off 2.8-3.1 us and 4.3-4.4 switches, as Open MPI tuned's own calls
// (3.0-3.3 us, 4.4-4.9 switches).
// So opal_progress runs here with its yield off; MPI's own waits keep it.
// Each thread stores false then true, so that whatever the interleaving of
// two threads the last store puts it back; meanwhile another thread's MPI
// wait may spin where it would have yielded, for a poll.
void mpi_progress() {
  if (g_opal_progress) {
    if (g_opal_yields) {
      __atomic_store_n(g_opal_yield, false, __ATOMIC_RELAXED);
      g_opal_progress();
      __atomic_store_n(g_opal_yield, true, __ATOMIC_RELAXED);
    } else {
      g_opal_progress();
    }
    return;
  }
  int flag = 0;
  PMPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
}

void Pacer::pause() {
  ++polls_;
  if (polls_ <= g_spin) return;
  if ((polls_ & 63) == 0) {
    const double now = PMPI_Wtime();
    if (idle_since_ < 0) idle_since_ = now;
    napping_ = now - idle_since_ > 0.5;
  }
  if (napping_) {
    const timespec ts{0, 50000};
    nanosleep(&ts, nullptr);
  } else {
    sched_yield();
  }
}

int error_class(int status) {
  switch (status) {
    case COLL_SUCCESS: return MPI_SUCCESS;
    case COLL_ERR_INVALID_ARG: return MPI_ERR_ARG;
    case COLL_ERR_NO_RESOURCES: return MPI_ERR_NO_MEM;
    case COLL_ERR_INTERNAL: return MPI_ERR_INTERN;
    case COLL_ERR_PEER_LOST: return MPIX_ERR_PROC_FAILED;
    case COLL_ERR_REVOKED: return MPIX_ERR_REVOKED;
    default: return MPI_ERR_OTHER;
  }
}

const char* ft_class_text(int cls) {
  switch (cls) {
    case MPIX_ERR_PROC_FAILED: return "MPIX_ERR_PROC_FAILED: a process of the communicator failed";
    case MPIX_ERR_PROC_FAILED_PENDING:
      return "MPIX_ERR_PROC_FAILED_PENDING: a process that a pending operation needs failed";
    case MPIX_ERR_REVOKED: return "MPIX_ERR_REVOKED: the communicator was revoked";
    default: return nullptr;
  }
}

// Open MPI 4.1 hands out classes from MPI_ERR_LASTCODE + 1 on: added first,
// ULFM's three get the values coll_mpi_ft.h gives them, and MPI's own
// MPI_Error_class, MPI_Error_string (Fortran's too) and error handlers
// accept them. A later MPI_Add_error_class of the program gets the next.
// Should MPI hand out others, the shim's MPI_Error_class / MPI_Error_string
// still answer for them (C only).
void register_ft_classes() {
  for (int want = MPIX_ERR_PROC_FAILED; want <= MPIX_ERR_REVOKED; ++want) {
    int cls = -1;
    if (PMPI_Add_error_class(&cls) != MPI_SUCCESS) return;
    if (cls != want) {
      std::fprintf(stderr, "libcoll_mpi: rank %d: MPI_Add_error_class gave %d, not %d: "
                   "MPIX_ERR_* are known to the shim's MPI_Error_class / MPI_Error_string only\n",
                   g_world_rank, cls, want);
      return;
    }
    PMPI_Add_error_string(cls, ft_class_text(cls));
  }
}

Handler handler_of(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) comm = MPI_COMM_WORLD;
  MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
  if (PMPI_Comm_get_errhandler(comm, &eh) != MPI_SUCCESS) return Handler::kFatal;
  if (eh == MPI_ERRORS_ARE_FATAL) return Handler::kFatal;
  if (eh == MPI_ERRORS_RETURN) return Handler::kReturn;
  PMPI_Errhandler_free(&eh);  // the reference get_errhandler gave
  return Handler::kUser;
}

namespace {
// The error the shim last returned on this thread, for MPI_Error_string.
thread_local int t_last_class = MPI_SUCCESS;
thread_local std::string t_last_text;

int report(MPI_Comm comm, Handler h, int cls, const char* fn, const char* what,
           const std::string& message, std::string detail) {
  // Before the handler runs: a user handler may ask for the text.
  t_last_class = cls;
  t_last_text = std::move(detail);
  if (h == Handler::kFatal) {
    std::fprintf(stderr, "libcoll_mpi: rank %d: %s %s: %s\n", g_world_rank, fn, what,
                 message.c_str());
    std::fflush(stderr);
    PMPI_Abort(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, cls);
  }
  if (h == Handler::kUser && comm != MPI_COMM_NULL) PMPI_Comm_call_errhandler(comm, cls);
  return cls;
}
}  // namespace

int raise_error(MPI_Comm comm, Handler h, const char* fn, int status, const std::string& message) {
  const std::string what = std::string("failed in libcoll: ") + coll_strerror(status);
  return report(comm, h, error_class(status), fn, what.c_str(), message,
                std::string(fn) + ": " + coll_strerror(status) + ": " + message);
}

int raise_class(MPI_Comm comm, Handler h, const char* fn, int cls, const std::string& message) {
  return report(comm, h, cls, fn, "rejected by libcoll_mpi", message,
                std::string(fn) + ": rejected by libcoll_mpi: " + message);
}

void forget_error() { t_last_class = MPI_SUCCESS; }

void error_text(int code, char* text, int* len) {
  if (code == MPI_SUCCESS || code != t_last_class || !text || !len) return;
  std::string s(text, size_t(std::max(0, *len)));
  s += ": libcoll: " + t_last_text;
  s.resize(std::min(s.size(), size_t(MPI_MAX_ERROR_STRING - 1)));
  std::memcpy(text, s.c_str(), s.size() + 1);
  *len = int(s.size());
}

}  // namespace shim

extern "C" int coll_mpi_counts(const char* mpi_function, unsigned long long* served,
                               unsigned long long* passed) {
  if (!mpi_function) return -1;
  for (int f = 0; f < shim::kFnCount; ++f) {
    if (std::strcmp(shim::fn_info(shim::Fn(f)).mpi_name, mpi_function) != 0) continue;
    const auto& s = shim::g_stats[f];
    unsigned long long p = 0;
    for (int r = 0; r < shim::kReasonCount; ++r) p += s.passed[r].load();
    if (served) *served = s.served.load();
    if (passed) *passed = p;
    return 0;
  }
  return -1;
}

extern "C" int coll_mpi_active(void) { return shim::g_active.load() ? 1 : 0; }

// A program that uses libcoll itself as well as MPI (this project's
// benchmark and comparison test) calls coll_init after or before MPI_Init.
// Under the shim libcoll is one per process: the program's coll_init joins
// the shim's (its coll_finalize then leaves it to MPI_Finalize), and a
// coll_init before MPI_Init is the one the shim uses.
extern "C" int coll_init_thread(int* argc, char*** argv, int required, int* provided) {
  if (shim::g_own_coll && shim::g_coll_live.load()) {
    ++shim::g_app_inits;
    if (provided) *provided = shim::g_thread_level < required ? shim::g_thread_level : required;
    return COLL_SUCCESS;
  }
  return shim::real_coll_init_thread(argc, argv, required, provided);
}

extern "C" int coll_init(int* argc, char*** argv) {
  return coll_init_thread(argc, argv, COLL_THREAD_SINGLE, nullptr);
}

extern "C" int coll_finalize(void) {
  if (shim::g_app_inits > 0) {
    --shim::g_app_inits;
    return COLL_SUCCESS;
  }
  if (!shim::g_own_coll && shim::g_coll_live.load()) {
    // The program's libcoll, which the shim used, goes (a collective, like
    // MPI_Finalize): from here on every call goes to MPI, on every rank.
    if (shim::g_active.load()) {
      shim::drain_requests();
      shim::persistent_finalize();
    }
    shim::g_active = false;
    shim::g_coll_live = false;
  }
  return shim::real_coll_finalize();
}

extern "C" int MPI_Error_class(int errorcode, int* errorclass) {
  if (shim::ft_class_text(errorcode) && errorclass) {
    *errorclass = errorcode;
    return MPI_SUCCESS;
  }
  return PMPI_Error_class(errorcode, errorclass);
}

// An error class the shim returned on this thread (and none since) is told
// with libcoll's message after MPI's text; any other code is MPI's alone.
extern "C" int MPI_Error_string(int errorcode, char* string, int* resultlen) {
  int rc = MPI_SUCCESS;
  if (const char* ft = shim::ft_class_text(errorcode); ft && string && resultlen) {
    *resultlen = int(std::strlen(ft));
    std::memcpy(string, ft, size_t(*resultlen) + 1);
  } else {
    rc = PMPI_Error_string(errorcode, string, resultlen);
  }
  if (rc == MPI_SUCCESS) shim::error_text(errorcode, string, resultlen);
  return rc;
}
