// User-defined operators: MPI_Op_create / MPI_Op_free, and the libcoll
// operators that serve reductions with them.
//
// The shim remembers the function and commutativity of every op made by
// MPI_Op_create (the C entry point) or by Fortran's MPI_OP_CREATE (mpif.h
// and `use mpi`: fortran.cpp has Open MPI make the op, so that MPI knows its
// function for Fortran's, then records it here). A reduction with such an op
// is served by a libcoll user operator (coll_op_create) whose function, a
// trampoline below, calls the user's with (in, inout, &len, &datatype):
// datatype is the handle the program passed to the reduction, not one of the
// shim's (a user function may test `*datatype == MPI_INT`, or in Fortran
// `DATATYPE == MPI_INTEGER`), so a libcoll operator is made per (MPI_Op,
// MPI_Datatype) pair and cached with the op. A Fortran function gets Fortran
// arguments: LEN as an INTEGER, DATATYPE as the INTEGER handle
// (MPI_Type_c2f), both by reference. A non-commutative op stays one: libcoll
// then applies it in rank order.
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
// Ops the shim did not see made go to MPI ("user op not made through the
// shim"): in Open MPI 4.1 those of mpi_f08's MPI_Op_create, whose wrapper
// calls Open MPI's pmpi_op_create_, a PMPI name the shim leaves alone.
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

// What a trampoline reads; freed (with its libcoll operator) when neither
// the cache nor a call in flight holds it.
struct OpContext {
  MPI_User_function* fn = nullptr;            // made in C, or
  FortranUserFunction* fortran_fn = nullptr;  // made in Fortran
  MPI_Datatype datatype = MPI_DATATYPE_NULL;  // the program's handle
  MPI_Fint fortran_datatype = 0;              // the same, as Fortran's INTEGER
  coll_op_t op = COLL_OP_NULL;
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;
  OpContext(MPI_User_function* f, FortranUserFunction* ff, MPI_Datatype d)
      : fn(f), fortran_fn(ff), datatype(d), fortran_datatype(ff ? PMPI_Type_c2f(d) : 0) {}
  ~OpContext() {
    if (op != COLL_OP_NULL) coll_op_free(&op);
  }
};

// libcoll calls a trampoline from the thread that drives the operation.
// count may exceed INT_MAX (a reduce_scatter_block's whole input): the
// user's function takes an int, so it is called in pieces of whole elements.
// A trampoline cannot throw (the user's function is C or Fortran, and
// nothing here allocates).
template <typename Call>
void in_pieces(const void* in, void* inout, size_t count, coll_datatype_t carrier,
               Call call) noexcept {
  const size_t size = coll_datatype_size(carrier);  // one element of the user's datatype
  auto* a = static_cast<char*>(const_cast<void*>(in));
  auto* b = static_cast<char*>(inout);
  while (count > 0) {
    const int len = int(std::min<size_t>(count, INT_MAX));
    call(a, b, len);
    a += size_t(len) * size;
    b += size_t(len) * size;
    count -= size_t(len);
  }
}

// The arguments are copies: the function may write through its pointers.
void trampoline(const void* in, void* inout, size_t count, coll_datatype_t carrier,
                void* ctx) noexcept {
  const auto* c = static_cast<const OpContext*>(ctx);
  in_pieces(in, inout, count, carrier, [c](char* a, char* b, int len) {
    MPI_Datatype datatype = c->datatype;
    c->fn(a, b, &len, &datatype);
  });
}
void fortran_trampoline(const void* in, void* inout, size_t count, coll_datatype_t carrier,
                        void* ctx) noexcept {
  const auto* c = static_cast<const OpContext*>(ctx);
  in_pieces(in, inout, count, carrier, [c](char* a, char* b, int len) {
    MPI_Fint flen = MPI_Fint(len);
    MPI_Fint datatype = c->fortran_datatype;
    c->fortran_fn(a, b, &flen, &datatype);
  });
}

// A user's op: its function (C's or Fortran's), and the libcoll operators
// made for it so far.
struct UserOp {
  MPI_User_function* fn = nullptr;
  FortranUserFunction* fortran_fn = nullptr;
  bool commute = true;
  std::vector<std::pair<MPI_Datatype, std::shared_ptr<OpContext>>> by_type;
};
// A program that reduces with one op over ever new datatypes (made and
// freed) would grow the cache without end: the oldest entries go beyond
// this many (a call in flight keeps its own reference).
constexpr size_t kTypesPerOp = 16;

std::mutex g_mutex;  // g_ops (MPI_THREAD_MULTIPLE: any thread may create, free or reduce)
std::unordered_map<MPI_Op, UserOp> g_ops;

// An op MPI just made. Its handle may be one MPI reuses after a free the
// shim did not see (PMPI_Op_free): whatever was recorded under it goes.
void remember(MPI_Op op, UserOp u) {
  std::vector<std::pair<MPI_Datatype, std::shared_ptr<OpContext>>> stale;  // freed after the lock
  std::lock_guard<std::mutex> l(g_mutex);
  UserOp& slot = g_ops[op];
  stale.swap(slot.by_type);
  slot = std::move(u);
}

}  // namespace

void fortran_user_op_created(MPI_Op op, FortranUserFunction* fn, bool commute) {
  UserOp u;
  u.fortran_fn = fn;
  u.commute = commute;
  remember(op, std::move(u));
}

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
      ctx = std::make_shared<OpContext>(u.fn, u.fortran_fn, datatype);
      if (coll_op_create(u.fortran_fn ? fortran_trampoline : trampoline, u.commute ? 1 : 0,
                         ctx.get(), &ctx->op) != COLL_SUCCESS)
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
  shim::remember(*op, std::move(u));
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
