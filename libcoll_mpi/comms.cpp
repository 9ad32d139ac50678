// MPI communicators and their libcoll communicators.
//
// A libcoll communicator is made by a collective over its libcoll parent
// (coll_comm_split / coll_comm_dup), or over its own members only
// (coll_comm_create_group), so it can only be made at a point where every
// rank of the parent, or every member, takes part, in the parent's
// collective order. An MPI communicator is a subset of world made by a call
// that is collective over *its* parent, or over its members; hence:
//
//  - MPI_COMM_WORLD: a dup of libcoll's world, made at MPI_Init.
//    MPI_COMM_SELF and every communicator of size 1: one shared libcoll
//    communicator of size 1 (made at MPI_Init; nothing of size 1 ever waits).
//  - A communicator made by an intercepted creator that is collective over
//    its parent - MPI_Comm_split, _split_type, _create, _dup,
//    _dup_with_info, MPI_Cart_create, _sub, MPI_Graph_create,
//    MPI_Dist_graph_create(_adjacent) - gets its libcoll communicator right
//    there, from the parent's: coll_comm_split(parent, color, key) with
//    color = the parent rank of the new communicator's rank 0 (the same on
//    every member, different for disjoint communicators) and key = the rank
//    in the new communicator, so that the libcoll order is the MPI order;
//    ranks outside it pass COLL_UNDEFINED. MPI_Comm_dup does it in the
//    keyval's copy callback (coll_comm_dup), i.e. MPI_Comm_dup's own
//    attribute copying carries the libcoll communicator over.
//  - MPI_Comm_create_group (collective over the new communicator only):
//    on its members, coll_comm_create_group over the parent's libcoll
//    communicator, with the new communicator's ranks translated to the
//    parent's (MPI_Group_translate_ranks) in the new order, and MPI's tag.
//    The agreements below run over the new communicator. Left to MPI where
//    the parent is not served (or not set up yet: that takes all its
//    ranks), at MPI_THREAD_MULTIPLE (libcoll checks the tag but cannot
//    match by it: two threads' creations could reach two members in
//    different orders), and where a served operation on the parent is
//    still pending on a member (libcoll would queue the creation behind it,
//    and it may wait for a non-member, which MPI does not make this call
//    wait for).
//  - Any other communicator congruent to world (MPI_Comm_compare gives
//    MPI_IDENT or MPI_CONGRUENT: MPI_Comm_create_group of all ranks from an
//    unserved parent, MPI_Intercomm_merge, MPI_Comm_idup, ...) is set up
//    lazily at the first *blocking* served collective on it
//    (coll_comm_split of libcoll's world, which no served call uses): a
//    blocking collective over all of world is a point every rank reaches,
//    in the same order for every such communicator (MPI requires blocking
//    collectives to be ordered without deadlock). A non-blocking first call
//    cannot wait for that and passes to MPI (the state changes at the same
//    call on every rank). Not done at MPI_THREAD_MULTIPLE, where two
//    threads could set up two communicators in different orders on
//    different ranks.
//  - Everything else (inter-communicators, subsets of unserved parents,
//    ...): passed to MPI.
//
// Agreement. A creation can fail on one rank only (window memory), so each
// is bracketed by two MPI_Allreduce(MIN) over the parent (over the new
// communicator for MPI_Comm_create_group): before it, "can I afford a
// window" (which also makes sure every rank has entered the creator, so
// the blocking libcoll call below needs nothing from MPI's progress: no
// peer is still waiting in MPI for this rank); after it, "did it work".
// Any no leaves the new communicator to MPI on every rank; a failure after
// the libcoll call leaves the parent to MPI from then on. For
// MPI_Comm_create_group only the members learn of such a failure: the
// parent's other ranks keep serving it, and its next served collective
// then fails on them by COLL_TIMEOUT (window memory that the budget let
// through and then failed; nothing else fails there short of a lost peer).
// These cost two small allreduces per communicator creation, never per call.
//
// Caching: a communicator keyval. The attribute value is a ShimComm, or a
// sentinel (decided: not served, inter; or: congruent, not set up yet).
// The delete callback (MPI_Comm_free, MPI_Comm_disconnect) frees the libcoll
// communicator: an MPI_Barrier first (every rank is in MPI_Comm_free, so the
// closing handshake needs no MPI progress), then coll_comm_free.
//
// Window budget. Each libcoll communicator has a window (size x (128 +
// slots x (320 + slot bytes)) bytes); shared memory takes them from an arena
// (COLL_SHM_ARENA). The shim keeps its communicators within 3/4 of it, so
// that an application with many communicators gets the later ones served
// by MPI rather than a libcoll failure. The slot is the configured one
// (128 KiB unless COLL_SLOT_SIZE): where libcoll grows its slots (ranks
// outnumbering CPUs) the floor of its default arena grows by the same
// factor (default_window_arena_bytes), so as many communicators fit as
// this counts; pmpi_many_comms_np4 checks that the budget bites before the
// arena runs out (np 4 on 2 CPUs: 93 served, then left to MPI; with no
// budget libcoll failed the 126th).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "shim.hpp"

namespace shim {
namespace {

// A libcoll communicator made for one MPI communicator (freed with it),
// whose windows hold `cost` bytes of the budget.
ShimComm* owned_comm(coll_comm_t lc, int rank, int size, size_t cost) {
  auto* s = new ShimComm;
  s->lc = lc;
  s->rank = rank;
  s->size = size;
  s->owned = true;
  s->cost = cost;
  return s;
}

int g_keyval = MPI_KEYVAL_INVALID;
ShimComm g_world_sc, g_self_sc;
char g_unserved, g_unserved_inter, g_pending;  // sentinels (their addresses)
bool g_lazy_broken = false;                    // a lazy creation failed: no more
std::atomic<int64_t> g_budget{0};
size_t g_slot_bytes = 128 * 1024, g_num_slots = 4;

bool sentinel(void* v) { return v == &g_unserved || v == &g_unserved_inter || v == &g_pending; }

size_t env_bytes(const char* name, size_t fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  unsigned long long n = std::strtoull(v, &end, 10);
  unsigned shift = 0;
  if (*end == 'k' || *end == 'K') shift = 10;
  if (*end == 'm' || *end == 'M') shift = 20;
  if (*end == 'g' || *end == 'G') shift = 30;
  if (*end == 't' || *end == 'T') shift = 40;
  return size_t(n) << shift;
}

size_t window_cost(int size) {
  return size_t(size) * (128 + g_num_slots * (320 + g_slot_bytes));
}

bool reserve(size_t cost) {
  if (g_budget.fetch_sub(int64_t(cost)) - int64_t(cost) >= 0) return true;
  g_budget.fetch_add(int64_t(cost));
  return false;
}
void release(size_t cost) { g_budget.fetch_add(int64_t(cost)); }

// The libcoll communicator has the MPI communicator's ranks in its order.
bool matches(coll_comm_t lc, int rank, int size) {
  int r = -1, s = -1;
  return coll_comm_rank(lc, &r) == COLL_SUCCESS && coll_comm_size(lc, &s) == COLL_SUCCESS &&
         r == rank && s == size;
}

ShimComm* shared_self() {
  auto* s = new ShimComm;
  s->lc = g_self_sc.lc;
  s->rank = 0;
  s->size = 1;
  return s;
}

void warn_once(const char* what) {
  static std::atomic<bool> said{false};
  if (!said.exchange(true))
    std::fprintf(stderr, "libcoll_mpi: rank %d: %s; the communicators concerned are left to MPI\n",
                 g_world_rank, what);
}

// A communicator that no intercepted creator set up.
void* classify(MPI_Comm comm) {
  int inter = 0;
  PMPI_Comm_test_inter(comm, &inter);
  if (inter) return &g_unserved_inter;
  int size = 0;
  PMPI_Comm_size(comm, &size);
  if (size == 1) {
    count_comm(CommEvent::kShared);
    return shared_self();
  }
  int result = MPI_UNEQUAL;
  PMPI_Comm_compare(comm, MPI_COMM_WORLD, &result);
  if ((result == MPI_IDENT || result == MPI_CONGRUENT) && g_thread_level < MPI_THREAD_MULTIPLE &&
      !g_lazy_broken && !g_world_sc.broken)
    return &g_pending;
  return &g_unserved;
}

// comm is congruent to world and this is a blocking collective on it: every
// rank of world is here.
ShimComm* create_congruent(MPI_Comm comm) {
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const size_t cost = window_cost(size);
  const bool mine = reserve(cost);
  if (!agree(mine, comm)) {
    if (mine) release(cost);
    count_comm(CommEvent::kRefused);
    return nullptr;
  }
  coll_comm_t lc = COLL_COMM_NULL;
  const int rc = coll_comm_split(coll_comm_world(), 0, rank, &lc);
  const bool ok = rc == COLL_SUCCESS && matches(lc, rank, size);
  if (!agree(ok, comm)) {
    // libcoll's world may be left failed on some ranks: no more of these.
    g_lazy_broken = true;
    release(cost);
    count_comm(CommEvent::kFailed);
    warn_once("setting up a libcoll communicator failed");
    return nullptr;
  }
  auto* s = owned_comm(lc, rank, size, cost);
  count_comm(CommEvent::kLazy);
  return s;
}

// What MPI_Comm_dup (and _with_info) tells its copy callback.
struct DupScope {
  MPI_Comm parent = MPI_COMM_NULL;
  bool allowed = false;
  size_t cost = 0;
  bool ran = false;
  int rc = COLL_SUCCESS;
  ShimComm* made = nullptr;
};
thread_local DupScope* t_dup = nullptr;

int copy_cb(MPI_Comm oldcomm, int, void*, void* in, void* out, int* flag) {
  *flag = 0;
  if (sentinel(in)) {
    // Decided for the parent, so for its duplicate too (same group).
    *static_cast<void**>(out) = in;
    *flag = 1;
    return MPI_SUCCESS;
  }
  auto* p = static_cast<ShimComm*>(in);
  if (p->broken) return MPI_SUCCESS;
  if (p->size == 1) {
    *static_cast<void**>(out) = shared_self();
    *flag = 1;
    return MPI_SUCCESS;
  }
  // Only inside the shim's MPI_Comm_dup, where every rank of the parent has
  // agreed: not from MPI_Comm_idup (whose copy runs inside MPI's progress)
  // nor from MPI's own internal dups. The duplicate is then decided later,
  // the same way on every rank (congruent to world: lazily; else MPI).
  DupScope* d = t_dup;
  if (!d || d->parent != oldcomm || !d->allowed || !g_coll_live.load()) return MPI_SUCCESS;
  coll_comm_t lc = COLL_COMM_NULL;
  d->ran = true;
  d->rc = coll_comm_dup(p->lc, &lc);
  if (d->rc != COLL_SUCCESS) return MPI_SUCCESS;
  auto* s = owned_comm(lc, p->rank, p->size, d->cost);
  d->made = s;
  *static_cast<void**>(out) = s;
  *flag = 1;
  return MPI_SUCCESS;
}

int delete_cb(MPI_Comm comm, int, void* value, void*) {
  if (sentinel(value)) return MPI_SUCCESS;
  auto* s = static_cast<ShimComm*>(value);
  if (s->fixed) return MPI_SUCCESS;
  if (s->owned && !s->leak && g_coll_live.load()) {
    // Every rank of comm is in MPI_Comm_free (a collective): once the
    // barrier is passed, coll_comm_free's closing handshake needs nothing
    // from MPI's progress.
    PMPI_Barrier(comm);
    coll_comm_free(&s->lc);  // completes its queued operations first
    drive(false);            // their requests complete while comm is valid
  }
  if (s->owned) release(s->cost);
  forget_comm(comm);
  delete s;
  return MPI_SUCCESS;
}

}  // namespace

void adopt(MPI_Comm comm, coll_comm_t lc) {
  int rank = 0, size = 0;
  coll_comm_rank(lc, &rank);
  coll_comm_size(lc, &size);
  // The window exists already: counted, whether the budget had room or not.
  const size_t cost = window_cost(size);
  g_budget.fetch_sub(int64_t(cost));
  PMPI_Comm_set_attr(comm, g_keyval, owned_comm(lc, rank, size, cost));
  count_comm(CommEvent::kDerived);
}

int agree(int v, MPI_Comm comm) {
  int all = 0;
  PMPI_Allreduce(&v, &all, 1, MPI_INT, MPI_MIN, comm);
  return all;
}

void comms_init() {
  g_slot_bytes = (env_bytes("COLL_SLOT_SIZE", 128 * 1024) + 63) & ~size_t{63};
  g_num_slots = env_bytes("COLL_NUM_SLOTS", 4);
  const size_t world_window = window_cost(g_world_size);
  size_t arena = env_bytes("COLL_SHM_ARENA", 0);
  if (arena == 0) arena = std::max(size_t(256) << 20, 16 * world_window);
  // libcoll's world, the shim's dup of it and the self communicator hold
  // windows already.
  g_budget = int64_t(arena / 4 * 3) - int64_t(2 * world_window + window_cost(1));
  if (const char* b = std::getenv("COLL_MPI_WINDOW_BUDGET"); b && *b)
    g_budget = int64_t(env_bytes("COLL_MPI_WINDOW_BUDGET", 0));

  PMPI_Comm_create_keyval(copy_cb, delete_cb, &g_keyval, nullptr);
  g_world_sc.fixed = g_self_sc.fixed = true;
  g_world_sc.rank = g_world_rank;
  g_world_sc.size = g_world_size;
  g_self_sc.rank = 0;
  g_self_sc.size = 1;
}

// Made at MPI_Init, after the agreement: collectives over libcoll's world.
bool comms_start() {
  coll_comm_t world = COLL_COMM_NULL, self = COLL_COMM_NULL;
  int rc = coll_comm_dup(coll_comm_world(), &world);
  int rc2 = coll_comm_split(coll_comm_world(), g_world_rank, 0, &self);
  const bool ok = rc == COLL_SUCCESS && rc2 == COLL_SUCCESS && matches(world, g_world_rank, g_world_size) &&
                  matches(self, 0, 1);
  if (!agree(ok, MPI_COMM_WORLD)) return false;
  g_world_sc.lc = world;
  g_self_sc.lc = self;
  PMPI_Comm_set_attr(MPI_COMM_WORLD, g_keyval, &g_world_sc);
  PMPI_Comm_set_attr(MPI_COMM_SELF, g_keyval, &g_self_sc);
  return true;
}

void comms_finalize() {
  // The handles go stale with coll_finalize; the delete callbacks of
  // communicators still alive (world, self, unfreed ones) then only free
  // memory.
}

ShimComm* lookup(MPI_Comm comm, bool may_create, Reason* why) {
  if (comm == MPI_COMM_WORLD) {
    if (g_world_sc.broken) *why = Reason::kComm;
    return g_world_sc.broken ? nullptr : &g_world_sc;
  }
  if (comm == MPI_COMM_SELF) return &g_self_sc;
  if (comm == MPI_COMM_NULL) {
    *why = Reason::kArgs;
    return nullptr;
  }
  void* v = nullptr;
  int flag = 0;
  if (PMPI_Comm_get_attr(comm, g_keyval, &v, &flag) != MPI_SUCCESS) {
    *why = Reason::kArgs;  // not a communicator: MPI says so
    return nullptr;
  }
  if (!flag) {
    v = classify(comm);
    PMPI_Comm_set_attr(comm, g_keyval, v);
  }
  if (v == &g_pending) {
    if (!may_create) {
      *why = Reason::kCommPending;
      return nullptr;
    }
    ShimComm* s = g_lazy_broken ? nullptr : create_congruent(comm);
    v = s ? static_cast<void*>(s) : static_cast<void*>(&g_unserved);
    PMPI_Comm_set_attr(comm, g_keyval, v);  // the delete callback ignores the sentinel
  }
  if (v == &g_unserved_inter) {
    *why = Reason::kInterComm;
    return nullptr;
  }
  if (v == &g_unserved) {
    *why = Reason::kComm;
    return nullptr;
  }
  auto* s = static_cast<ShimComm*>(v);
  if (s->broken) {
    *why = Reason::kComm;
    return nullptr;
  }
  return s;
}

void derive(MPI_Comm parent, int rc, MPI_Comm* newcomm) {
  if (!g_active.load()) return;
  Reason why;
  ShimComm* p = lookup(parent, true, &why);
  if (!p) return;  // the new communicator is decided when it is used
  const bool member = rc == MPI_SUCCESS && newcomm && *newcomm != MPI_COMM_NULL;
  if (p->size == 1) {  // a communicator of one rank begets one of one rank
    if (member) {
      PMPI_Comm_set_attr(*newcomm, g_keyval, shared_self());
      count_comm(CommEvent::kShared);
    }
    return;
  }
  int newrank = -1, newsize = 0;
  if (member) {
    PMPI_Comm_rank(*newcomm, &newrank);
    PMPI_Comm_size(*newcomm, &newsize);
  }
  // A member of a communicator of size 1 needs no window (shared self).
  const bool creates = member && newsize > 1;
  const size_t cost = creates ? window_cost(newsize) : 0;
  const bool mine = rc == MPI_SUCCESS && (!creates || reserve(cost));
  if (!agree(mine, parent)) {
    if (mine && creates) release(cost);
    if (creates) {
      PMPI_Comm_set_attr(*newcomm, g_keyval, &g_unserved);
      count_comm(CommEvent::kRefused);
    }
    return;
  }
  int color = COLL_UNDEFINED;
  if (creates) {
    MPI_Group pg, ng;
    PMPI_Comm_group(parent, &pg);
    PMPI_Comm_group(*newcomm, &ng);
    int zero = 0;
    PMPI_Group_translate_ranks(ng, 1, &zero, pg, &color);
    PMPI_Group_free(&pg);
    PMPI_Group_free(&ng);
  }
  coll_comm_t lc = COLL_COMM_NULL;
  const int crc = coll_comm_split(p->lc, color, newrank, &lc);
  const bool ok = crc == COLL_SUCCESS &&
                  (creates ? lc != COLL_COMM_NULL && matches(lc, newrank, newsize) : lc == COLL_COMM_NULL);
  if (!agree(ok, parent)) {
    p->broken = true;  // its libcoll communicator may be failed on some ranks
    if (creates) {
      release(cost);
      PMPI_Comm_set_attr(*newcomm, g_keyval, &g_unserved);
    }
    count_comm(CommEvent::kFailed);
    warn_once("creating a libcoll communicator failed");
    return;
  }
  if (!member) return;
  ShimComm* s;
  if (creates) {
    s = owned_comm(lc, newrank, newsize, cost);
    count_comm(CommEvent::kDerived);
  } else {
    s = shared_self();
    count_comm(CommEvent::kShared);
  }
  PMPI_Comm_set_attr(*newcomm, g_keyval, s);
}

void derive_group(MPI_Comm parent, int tag, int rc, MPI_Comm* newcomm) {
  if (!g_active.load() || rc != MPI_SUCCESS || !newcomm || *newcomm == MPI_COMM_NULL) return;
  Reason why;
  // Not may_create: a parent congruent to world and not set up yet would
  // be set up by a collective over all its ranks, and only the members
  // are here. The parent's state is alike on all its ranks (decided at its
  // creation or agreed over it since).
  ShimComm* p = lookup(parent, false, &why);
  if (!p) return;  // the new communicator is decided when it is used
  int newrank = -1, newsize = 0;
  PMPI_Comm_rank(*newcomm, &newrank);
  PMPI_Comm_size(*newcomm, &newsize);
  if (newsize == 1) {  // a communicator of one rank needs no window
    PMPI_Comm_set_attr(*newcomm, g_keyval, shared_self());
    count_comm(CommEvent::kShared);
    return;
  }
  // libcoll queues the creation behind the parent's operations started
  // here before it: one still pending could wait for a non-member, which
  // MPI does not make wait for this call. And at MPI_THREAD_MULTIPLE two
  // threads' creations on one parent could reach two members in different
  // orders, which libcoll cannot tell apart by their tag. Both: left to MPI.
  const size_t cost = window_cost(newsize);
  const bool mine =
      g_thread_level < MPI_THREAD_MULTIPLE && !requests_pending_on(p->lc) && reserve(cost);
  if (!agree(mine, *newcomm)) {
    if (mine) release(cost);
    PMPI_Comm_set_attr(*newcomm, g_keyval, &g_unserved);
    count_comm(CommEvent::kRefused);
    return;
  }
  // The parent ranks of the new communicator's ranks, in its order: the
  // libcoll parent has the MPI parent's ranks in its order (matches()).
  const size_t n = static_cast<size_t>(newsize);
  std::vector<int> own(n), ranks(n);
  for (size_t i = 0; i < n; ++i) own[i] = int(i);
  MPI_Group pg, ng;
  PMPI_Comm_group(parent, &pg);
  PMPI_Comm_group(*newcomm, &ng);
  PMPI_Group_translate_ranks(ng, newsize, own.data(), pg, ranks.data());
  PMPI_Group_free(&pg);
  PMPI_Group_free(&ng);
  coll_comm_t lc = COLL_COMM_NULL;
  const int crc = coll_comm_create_group(p->lc, newsize, ranks.data(), tag, &lc);
  const bool ok = crc == COLL_SUCCESS && matches(lc, newrank, newsize);
  if (!agree(ok, *newcomm)) {
    // The members' libcoll parent may be failed (the creation failed inside
    // its exchange): they serve it no more. Its other ranks cannot be told
    // (see the top comment).
    // A libcoll communicator made here but not on every member is never
    // freed collectively: coll_finalize tears it down.
    p->broken = true;
    release(cost);
    PMPI_Comm_set_attr(*newcomm, g_keyval, &g_unserved);
    count_comm(CommEvent::kFailed);
    warn_once("creating a libcoll communicator of a group failed");
    return;
  }
  auto* s = owned_comm(lc, newrank, newsize, cost);
  count_comm(CommEvent::kDerived);
  PMPI_Comm_set_attr(*newcomm, g_keyval, s);
}

int comm_dup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Info info, bool with_info) {
  auto dup = [&] { return with_info ? PMPI_Comm_dup_with_info(comm, info, newcomm) : PMPI_Comm_dup(comm, newcomm); };
  if (!g_active.load()) return dup();
  Reason why;
  ShimComm* p = lookup(comm, true, &why);
  if (!p || p->size == 1) return dup();  // sentinels and size 1: the copy callback
  DupScope scope;
  scope.parent = comm;
  scope.cost = window_cost(p->size);
  const bool mine = reserve(scope.cost);
  scope.allowed = agree(mine, comm);
  if (!scope.allowed && mine) release(scope.cost);
  t_dup = &scope;
  const int rc = dup();
  t_dup = nullptr;
  if (!scope.allowed) {
    if (rc == MPI_SUCCESS) PMPI_Comm_set_attr(*newcomm, g_keyval, &g_unserved);
    count_comm(CommEvent::kRefused);
    return rc;
  }
  const bool ok = rc == MPI_SUCCESS && scope.ran && scope.rc == COLL_SUCCESS && scope.made &&
                  matches(scope.made->lc, p->rank, p->size);
  if (!agree(ok, comm)) {
    p->broken = true;
    if (scope.made) {
      scope.made->broken = true;
      scope.made->leak = true;  // not every rank has it: never freed collectively
    } else {
      release(scope.cost);
    }
    count_comm(CommEvent::kFailed);
    warn_once("duplicating a libcoll communicator failed");
    return rc;
  }
  count_comm(CommEvent::kDerived);
  return rc;
}

}  // namespace shim
