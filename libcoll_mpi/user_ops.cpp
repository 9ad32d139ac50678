// User-defined operators: MPI_Op_create / MPI_Op_free, and the libcoll
// operators that serve reductions with them.
//
// The shim remembers the function and commutativity of every op made by
// MPI_Op_create (the C entry point). A reduction with such an op is served by
// a libcoll user operator (coll_op_create) whose function, the trampoline
// below, calls the user's with (in, inout, &len, &datatype): datatype is the
// MPI_Datatype handle the program passed to the reduction, not one of the
// shim's (a user function may test `*datatype == MPI_INT`), so a libcoll
// operator is made per (MPI_Op, MPI_Datatype) pair and cached with the op.
// A non-commutative op stays one: libcoll then applies it in rank order.
//
// Whole elements. libcoll calls an operator's function on whole elements of
// the libcoll datatype it was given, in chunks of any count. So the shim
// hands libcoll one element of its own per element of the user's datatype:
// a libcoll datatype of the same size (1, 2, 4 or 8 bytes: an unsigned
// integer; 16 or 32: a pair type, whose contents a user operator never
// reads), with the user's buffers as they are. That needs a datatype whose
// elements lie one after another without gaps (a named type, a contiguous
// type, a struct without padding, ...) or a named pair type (its padding is
// libcoll's too); any other datatype with a user op goes to MPI ("user op on
// a datatype libcoll cannot carry"). Since the datatype then decides, and
// not only its type signature, every rank must pass the same datatype - which
// MPI asks of a reduction's arguments anyway.
//
// Ops the shim did not see made (Open MPI's Fortran MPI_OP_CREATE calls
// PMPI_Op_create itself, and marks the function as Fortran's) go to MPI.
//
// Freeing. MPI lets a program free an op while a non-blocking reduction with
// it is pending. libcoll takes an operator's function and context when an
// operation starts, so its handle may go at MPI_Op_free; the context (which
// the trampoline reads) is reference counted: the cache holds it, and so does
// every served call that uses it until the call completes (Plan::user_op).
#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shim.hpp"

namespace shim {
namespace {

// What the trampoline reads; freed (with its libcoll operator) when neither
// the cache nor a call in flight holds it.
struct OpContext {
  MPI_User_function* fn = nullptr;
  MPI_Datatype datatype = MPI_DATATYPE_NULL;  // the program's handle
  coll_op_t op = COLL_OP_NULL;
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;
  OpContext(MPI_User_function* f, MPI_Datatype d) : fn(f), datatype(d) {}
  ~OpContext() {
    if (op != COLL_OP_NULL) coll_op_free(&op);
  }
};

// libcoll calls this from the thread that drives the operation. count may
// exceed INT_MAX (a reduce_scatter_block's whole input): the user's function
// takes an int, so it is called in pieces of whole elements. It cannot throw
// (the user's function is C, and nothing here allocates).
void trampoline(const void* in, void* inout, size_t count, coll_datatype_t carrier,
                void* ctx) noexcept {
  const auto* c = static_cast<const OpContext*>(ctx);
  const size_t size = coll_datatype_size(carrier);  // one element of the user's datatype
  auto* a = static_cast<char*>(const_cast<void*>(in));
  auto* b = static_cast<char*>(inout);
  while (count > 0) {
    int len = int(std::min<size_t>(count, INT_MAX));
    MPI_Datatype datatype = c->datatype;  // a copy: the function may write through its pointer
    c->fn(a, b, &len, &datatype);
    a += size_t(len) * size;
    b += size_t(len) * size;
    count -= size_t(len);
  }
}

// A user's op: its function, and the libcoll operators made for it so far.
struct UserOp {
  MPI_User_function* fn = nullptr;
  bool commute = true;
  std::vector<std::pair<MPI_Datatype, std::shared_ptr<OpContext>>> by_type;
};
// A program that reduces with one op over ever new datatypes (made and
// freed) would grow the cache without end: the oldest entries go beyond
// this many (a call in flight keeps its own reference).
constexpr size_t kTypesPerOp = 16;

std::mutex g_mutex;  // g_ops (MPI_THREAD_MULTIPLE: any thread may create, free or reduce)
std::unordered_map<MPI_Op, UserOp> g_ops;

}  // namespace

bool user_op_carrier(const TypeInfo& t, coll_datatype_t* carrier) {
  if (t.category == Category::kPair) {
    *carrier = t.ctype;  // a named pair type whose layout is libcoll's (types.cpp)
    return true;
  }
  if (t.true_lb != 0 || t.size != t.true_extent || t.extent != t.size) return false;
  for (coll_datatype_t d : {COLL_UINT8, COLL_UINT16, COLL_UINT32, COLL_UINT64, COLL_DOUBLE_INT,
                            COLL_LONG_DOUBLE_INT}) {
    if (MPI_Count(coll_datatype_size(d)) == t.size) {
      *carrier = d;
      return true;
    }
  }
  return false;
}

UserOpLookup user_op(MPI_Op op, MPI_Datatype datatype, coll_op_t* out,
                     std::shared_ptr<void>* keep) {
  std::shared_ptr<OpContext> ctx;
  std::shared_ptr<OpContext> evicted;  // released after the lock: it may free a libcoll op
  {
    std::lock_guard<std::mutex> l(g_mutex);
    auto it = g_ops.find(op);
    if (it == g_ops.end()) return UserOpLookup::kUnknown;
    UserOp& u = it->second;
    for (auto& entry : u.by_type)
      if (entry.first == datatype) ctx = entry.second;
    if (!ctx) {
      ctx = std::make_shared<OpContext>(u.fn, datatype);
      if (coll_op_create(trampoline, u.commute ? 1 : 0, ctx.get(), &ctx->op) != COLL_SUCCESS)
        return UserOpLookup::kNoResources;
      if (u.by_type.size() >= kTypesPerOp) {
        evicted = std::move(u.by_type.front().second);
        u.by_type.erase(u.by_type.begin());
      }
      u.by_type.emplace_back(datatype, ctx);
    }
  }
  *out = ctx->op;
  *keep = std::move(ctx);
  return UserOpLookup::kFound;
}

}  // namespace shim

extern "C" {

int MPI_Op_create(MPI_User_function* fn, int commute, MPI_Op* op) {
  const int rc = PMPI_Op_create(fn, commute, op);
  if (rc != MPI_SUCCESS || !fn) return rc;
  shim::UserOp u;
  u.fn = fn;
  u.commute = commute != 0;
  std::vector<std::pair<MPI_Datatype, std::shared_ptr<shim::OpContext>>> stale;
  {
    std::lock_guard<std::mutex> l(shim::g_mutex);
    // A handle MPI reuses after a free the shim did not see (PMPI_Op_free).
    shim::UserOp& slot = shim::g_ops[*op];
    stale.swap(slot.by_type);
    slot = std::move(u);
  }
  return rc;
}

int MPI_Op_free(MPI_Op* op) {
  std::vector<std::pair<MPI_Datatype, std::shared_ptr<shim::OpContext>>> cached;
  if (op) {
    std::lock_guard<std::mutex> l(shim::g_mutex);
    auto it = shim::g_ops.find(*op);
    if (it != shim::g_ops.end()) {
      cached.swap(it->second.by_type);
      shim::g_ops.erase(it);
    }
  }
  // The libcoll operators go with the last reference (now, or when the
  // last call in flight that uses one completes), outside the lock.
  cached.clear();
  return PMPI_Op_free(op);
}

}  // extern "C"
