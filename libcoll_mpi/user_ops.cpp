// User-defined operators: MPI_Op_create / MPI_Op_free, and the libcoll
// operators that serve reductions with them.
//
// The shim remembers the function and commutativity of every op made by
// MPI_Op_create (the C entry point) or by Fortran's MPI_OP_CREATE (mpif.h,
// `use mpi` and `use mpi_f08`: fortran.cpp has Open MPI make the op, so
// that MPI knows its function for Fortran's, then records it here). A
// reduction with such an op is served by a libcoll user operator
// (coll_op_create) whose function, a trampoline below, calls the user's with
// (in, inout, &len, &datatype): datatype is the handle the program passed to
// the reduction, not one of the shim's (a user function may test
// `*datatype == MPI_INT`, or in Fortran `DATATYPE == MPI_INTEGER`). A
// Fortran function gets Fortran arguments: LEN as an INTEGER, DATATYPE as
// the INTEGER handle (MPI_Type_c2f), both by reference - which is also how
// Open MPI calls an mpi_f08 function (its TYPE(MPI_Datatype) holds that one
// INTEGER). A non-commutative op stays one: libcoll then applies it in rank
// order.
//
// Whole elements. libcoll calls an operator's function on whole elements of
// the libcoll datatype it was given, in chunks of any count. So the shim
// hands libcoll one element of its own, a carrier, per element of the
// user's datatype: an unsigned integer of 1, 2, 4 or 8 bytes, or a pair type
// of 16 or 32 (whose contents a user operator never reads). Two ways:
//
//  - In place: a datatype whose elements lie one after another without
//    gaps (a named type, a contiguous type, a struct without padding, ...)
//    and whose size is a carrier's, or a named pair type (its padding is
//    libcoll's too), goes with the user's buffers as they are. Its libcoll
//    operator is made once per (MPI_Op, MPI_Datatype) pair and cached with
//    the op.
//  - Packed: any other datatype of at most 32 bytes of data an element (a
//    vector with a stride, a struct with padding, a resized type, 12 bytes
//    of ints, ...) travels packed (collectives.cpp's staging), each element
//    in the smallest carrier that holds it, padded (TypeInfo::pad). MPI
//    calls a user function on elements laid out as the datatype says, so
//    the trampoline unpacks both operands into scratch buffers in that
//    layout, calls the function, and packs inout back. Such an operator is
//    made for one call (the call's own scratch, and a dup of the datatype
//    that the program may free before a non-blocking call completes) and
//    freed when the call is.
//
// Elements of more than 32 bytes have no carrier, and elements that overlap
// (an extent below the true extent) no layout to unpack into: those go to
// MPI ("user op on a datatype libcoll cannot carry"). The datatype, not only
// its type signature, decides the way: every rank must pass the same
// datatype, which MPI asks of a reduction with a user op anyway.
//
// Ops the shim did not see made go to MPI ("user op not made through the
// shim"): an op made by a library's own PMPI_Op_create, say.
//
// Freeing. MPI lets a program free an op while a non-blocking reduction with
// it is pending. libcoll takes an operator's function and context when an
// operation starts, so its handle may go at MPI_Op_free; the context (which
// the trampoline reads) is reference counted: the cache holds it, and so does
// every served call that uses it until the call completes (Plan::user_op).
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shim.hpp"

namespace shim {
namespace {

// A packed call's layout and scratch (see the header): the trampoline
// unpacks `piece` elements of each operand at a time.
struct Unpacking {
  MPI_Datatype type = MPI_DATATYPE_NULL;  // a dup of the program's datatype
  MPI_Count size = 0, pad = 0, extent = 0;
  size_t piece = 0;
  // The buffers the function gets, laid out as the datatype says (their
  // data from true_lb on lies in the scratch): in's elements, and inout's.
  char* in = nullptr;
  char* inout = nullptr;
  char* packed = nullptr;   // in's packed bytes (in itself is a peer's: read only)
  char* scratch = nullptr;  // the one allocation of the three
};

// What a trampoline reads; freed (with its libcoll operator) when neither
// the cache nor a call in flight holds it.
struct OpContext {
  MPI_User_function* fn = nullptr;            // made in C, or
  FortranUserFunction* fortran_fn = nullptr;  // made in Fortran
  MPI_Datatype datatype = MPI_DATATYPE_NULL;  // the program's handle
  MPI_Fint fortran_datatype = 0;              // the same, as Fortran's INTEGER
  coll_op_t op = COLL_OP_NULL;
  Unpacking unpacking;  // packed calls only
  OpContext(const OpContext&) = delete;
  OpContext& operator=(const OpContext&) = delete;
  OpContext(MPI_User_function* f, FortranUserFunction* ff, MPI_Datatype d)
      : fn(f), fortran_fn(ff), datatype(d), fortran_datatype(ff ? PMPI_Type_c2f(d) : 0) {}
  ~OpContext() {
    if (op != COLL_OP_NULL) coll_op_free(&op);
    std::free(unpacking.scratch);
    // A context the cache held to the end of the process goes after MPI.
    int finalized = 0;
    PMPI_Finalized(&finalized);
    if (unpacking.type != MPI_DATATYPE_NULL && !finalized) PMPI_Type_free(&unpacking.type);
  }
  // The user's function on len elements (the arguments are copies: the
  // function may write through its pointers).
  void call(char* in, char* inout, int len) const {
    if (fortran_fn) {
      MPI_Fint flen = MPI_Fint(len);
      MPI_Fint fdatatype = fortran_datatype;
      fortran_fn(in, inout, &flen, &fdatatype);
    } else {
      MPI_Datatype d = datatype;
      fn(in, inout, &len, &d);
    }
  }
};

// libcoll calls a trampoline from the thread that drives the operation, one
// thread at a time for an operation (so a packed call's scratch is never
// shared). A trampoline cannot throw (the user's function is C or Fortran,
// and nothing here allocates).

// In place. count may exceed INT_MAX (a reduce_scatter_block's whole
// input): the user's function takes an int, so it is called in pieces of
// whole elements.
void in_place_trampoline(const void* in, void* inout, size_t count, coll_datatype_t carrier,
                         void* ctx) noexcept {
  const auto* c = static_cast<const OpContext*>(ctx);
  const size_t size = coll_datatype_size(carrier);  // one element of the user's datatype
  auto* a = static_cast<char*>(const_cast<void*>(in));
  auto* b = static_cast<char*>(inout);
  while (count > 0) {
    const int len = int(std::min<size_t>(count, INT_MAX));
    c->call(a, b, len);
    a += size_t(len) * size;
    b += size_t(len) * size;
    count -= size_t(len);
  }
}

// Packed. The MPI calls here are local (MPI_Pack / MPI_Unpack on
// MPI_COMM_SELF, which Open MPI runs on any thread, libcoll's progress
// thread included) and fail only on a bad datatype, which the planning read
// already: their codes are not looked at.
void unpacking_trampoline(const void* in, void* inout, size_t count, coll_datatype_t,
                          void* ctx) noexcept {
  const auto* c = static_cast<const OpContext*>(ctx);
  const Unpacking& u = c->unpacking;
  const MPI_Count slot = u.size + u.pad;
  const auto* a = static_cast<const char*>(in);
  auto* b = static_cast<char*>(inout);
  for (size_t done = 0; done < count;) {
    const size_t n = std::min(u.piece, count - done);
    const MPI_Count k = MPI_Count(n);
    compact(a + done * size_t(slot), k, u.size, u.pad, u.packed);
    unpack(u.packed, k, u.type, u.size, u.extent, 0, u.in);
    // inout's slots are compacted in place, then rewritten by the pack.
    unpack(b + done * size_t(slot), k, u.type, u.size, u.extent, u.pad, u.inout);
    c->call(u.in, u.inout, int(n));
    pack(u.inout, k, u.type, u.size, u.extent, u.pad, b + done * size_t(slot));
    done += n;
  }
}

// A packed call's scratch: operands of up to this many bytes each are
// unpacked at once (at least one element's), small enough to be malloc's
// and not a fresh mapping per call.
constexpr MPI_Count kScratchBytes = 16 << 10;

// The function may read its buffers as arrays of the program's structs:
// each starts aligned for any type, as the program's own would. Its data
// (true_lb bytes in) then starts `lead` bytes into its region of the scratch.
constexpr MPI_Count kAlign = alignof(std::max_align_t);

bool set_up_unpacking(Unpacking& u, MPI_Datatype datatype, const TypeInfo& t, MPI_Count pad) {
  u.size = t.size;
  u.pad = pad;
  u.extent = t.extent;
  u.piece = size_t(std::clamp<MPI_Count>(kScratchBytes / t.extent, 1, INT_MAX / t.size));
  const MPI_Count lead = (t.true_lb % kAlign + kAlign) % kAlign;
  const MPI_Count span = MPI_Count(u.piece - 1) * t.extent + t.true_extent;
  const MPI_Count region = (lead + span + kAlign - 1) / kAlign * kAlign;
  // Zeroed: the gaps the function sees hold no stale data of earlier calls.
  u.scratch = static_cast<char*>(std::calloc(1, size_t(2 * region) + u.piece * size_t(t.size)));
  if (!u.scratch) return false;
  const auto buffer = [&](MPI_Count at) {
    return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(u.scratch) +
                                   uintptr_t(at + lead - t.true_lb));
  };
  u.in = buffer(0);
  u.inout = buffer(region);
  u.packed = u.scratch + 2 * region;
  return PMPI_Type_dup(datatype, &u.type) == MPI_SUCCESS;
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

// The smallest carrier of size bytes, if any.
bool smallest_carrier(MPI_Count size, coll_datatype_t* carrier) {
  for (coll_datatype_t d : {COLL_UINT8, COLL_UINT16, COLL_UINT32, COLL_UINT64, COLL_DOUBLE_INT,
                            COLL_LONG_DOUBLE_INT}) {
    if (MPI_Count(coll_datatype_size(d)) >= size) {
      *carrier = d;
      return true;
    }
  }
  return false;
}

// The call's view of t (one carrier an element) and its way (the header);
// false where libcoll cannot carry t.
bool user_view(const TypeInfo& t, TypeInfo* view, bool* packed) {
  *view = t;
  *packed = false;
  if (t.elements == TypeInfo::kEmpty) return true;  // no data: nothing is ever reduced
  view->elements = TypeInfo::kOne;
  view->per = 1;
  if (t.category == Category::kPair) return true;  // a named pair type, laid out as libcoll's (types.cpp)
  if (!smallest_carrier(t.size, &view->ctype)) return false;
  view->pad = MPI_Count(coll_datatype_size(view->ctype)) - t.size;
  if (view->pad == 0 && t.true_lb == 0 && t.true_extent == t.size && t.extent == t.size)
    return true;
  *packed = true;
  view->category = Category::kOther;  // packed bytes, whatever their type
  return t.extent > 0 && t.extent >= t.true_extent;
}

}  // namespace

void fortran_user_op_created(MPI_Op op, FortranUserFunction* fn, bool commute) {
  UserOp u;
  u.fortran_fn = fn;
  u.commute = commute;
  remember(op, std::move(u));
}

UserOpLookup user_op(MPI_Op op, MPI_Datatype datatype, const TypeInfo* t, TypeInfo* view,
                     coll_op_t* out, std::shared_ptr<void>* keep) {
  std::shared_ptr<OpContext> ctx;
  std::shared_ptr<OpContext> evicted;  // released after the lock: it may free a libcoll op
  bool packed = false, commute = true;
  {
    std::lock_guard<std::mutex> l(g_mutex);
    auto it = g_ops.find(op);
    if (it == g_ops.end()) return UserOpLookup::kUnknown;
    if (!t) return UserOpLookup::kBadType;
    if (!user_view(*t, view, &packed)) return UserOpLookup::kType;
    UserOp& u = it->second;
    commute = u.commute;
    if (packed) {
      ctx = std::make_shared<OpContext>(u.fn, u.fortran_fn, datatype);  // this call's (the header)
    } else {
      for (auto& entry : u.by_type)
        if (entry.first == datatype) ctx = entry.second;
      if (!ctx) {
        ctx = std::make_shared<OpContext>(u.fn, u.fortran_fn, datatype);
        if (coll_op_create(in_place_trampoline, u.commute ? 1 : 0, ctx.get(), &ctx->op) !=
            COLL_SUCCESS)
          return UserOpLookup::kNoResources;
        if (u.by_type.size() >= kTypesPerOp) {
          evicted = std::move(u.by_type.front().second);
          u.by_type.erase(u.by_type.begin());
        }
        u.by_type.emplace_back(datatype, ctx);
      }
    }
  }
  if (packed && (!set_up_unpacking(ctx->unpacking, datatype, *t, view->pad) ||
                 coll_op_create(unpacking_trampoline, commute ? 1 : 0, ctx.get(), &ctx->op) !=
                     COLL_SUCCESS))
    return UserOpLookup::kNoResources;
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
