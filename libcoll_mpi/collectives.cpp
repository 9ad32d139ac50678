// The dispatch table and the MPI entry points.
//
// Every intercepted collective builds a Call from its arguments and asks
// serve(); when that declines, the entry point calls the PMPI_ function with
// the same arguments. The decision (decide()) reads, in this order, only
// what is the same on every rank of the communicator: the shim's state and
// configuration, the collective's kind and the operator, the type signature
// of the data (types.cpp: element type, byte count), the communicator's
// state (comms.cpp), the root. Adding a collective (one libcoll has:
// algorithms/collective_list.hpp, checked below) is an Fn enumerator
// (shim.hpp), a row in kFns with its libcoll start function, its shape's
// case in plan_call(), a short entry point below, and its Fortran entry
// point (fortran.cpp).
//
// Arguments that MPI lets differ between ranks (a gather's send count and
// datatype, the root's receive arguments, the v-forms' arrays other than
// reduce_scatter's) cannot decide between libcoll and MPI: a rank whose own
// such argument is invalid (a negative count, MPI_DATATYPE_NULL, a send
// size that is not its receive size) fails its call with the MPI error class
// through the communicator's error handler, as libcoll's own calls fail a
// rank that sees a bad argument. The others are served as usual, and time
// out or see the mismatch in libcoll.
//
// Data moved unchanged goes to libcoll as bytes (COLL_UINT8): counts and
// displacements are count x MPI_Type_size of the datatype, which is what
// MPI's rule of matching type signatures keeps equal between sender and
// receiver. A buffer whose datatype is not contiguous is packed into a
// staging copy (each block of a v-form at its packed offset) and the result
// unpacked from it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "coll_mpi.h"
#include "shim.hpp"
#include "../algorithms/collective_list.hpp"  // the list only: a macro, no code of the layers below

// Open MPI's extensions: the persistent collectives (MPIX_X_init) are its
// pcollreq extension in 4.x.
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

namespace shim {
namespace {

const size_t* data_or_null(const std::vector<size_t>& v) { return v.empty() ? nullptr : v.data(); }

// Each collective's libcoll calls: its blocking form (run_X: libcoll's own
// blocking path - the synchronous forms of small calls, its wait policy,
// MPI's progress through the wait hook, see state.cpp), its I-form (start_X)
// and its persistent form (init_X), with the same arguments from the plan.
#define COLL_MPI_STARTS(name, ...)                                   \
  int run_##name(const Plan& p, coll_request_t* r) {                 \
    *r = COLL_REQUEST_NULL;                                           \
    return coll_##name(__VA_ARGS__);                                  \
  }                                                                   \
  int start_##name(const Plan& p, coll_request_t* r) {               \
    return coll_i##name(__VA_ARGS__, r);                              \
  }                                                                   \
  int init_##name(const Plan& p, coll_request_t* r) {                \
    return coll_##name##_init(__VA_ARGS__, r);                        \
  }
COLL_MPI_STARTS(allreduce, p.send, p.recv, p.count, p.type, p.op, p.lc)
COLL_MPI_STARTS(bcast, p.recv, p.count, p.type, p.root, p.lc)
COLL_MPI_STARTS(barrier, p.lc)
COLL_MPI_STARTS(reduce, p.send, p.recv, p.count, p.type, p.op, p.root, p.lc)
COLL_MPI_STARTS(scan, p.send, p.recv, p.count, p.type, p.op, p.lc)
COLL_MPI_STARTS(exscan, p.send, p.recv, p.count, p.type, p.op, p.lc)
COLL_MPI_STARTS(reduce_scatter_block, p.send, p.recv, p.count, p.type, p.op, p.lc)
COLL_MPI_STARTS(reduce_scatter, p.send, p.recv, p.rcounts.data(), p.type, p.op, p.lc)
COLL_MPI_STARTS(allgather, p.send, p.recv, p.count, p.type, p.lc)
COLL_MPI_STARTS(allgatherv, p.send, p.count, p.recv, p.rcounts.data(), p.rdispls.data(), p.type,
                p.lc)
COLL_MPI_STARTS(gather, p.send, p.recv, p.count, p.type, p.root, p.lc)
COLL_MPI_STARTS(gatherv, p.send, p.count, p.recv, data_or_null(p.rcounts),
                data_or_null(p.rdispls), p.type, p.root, p.lc)
COLL_MPI_STARTS(scatter, p.send, p.recv, p.count, p.type, p.root, p.lc)
COLL_MPI_STARTS(scatterv, p.send, data_or_null(p.scounts), data_or_null(p.sdispls), p.recv,
                p.count, p.type, p.root, p.lc)
COLL_MPI_STARTS(alltoall, p.send, p.recv, p.count, p.type, p.lc)
// In place the send arrays are ignored: the receive ones stand in.
COLL_MPI_STARTS(alltoallv, p.send, p.scounts.empty() ? p.rcounts.data() : p.scounts.data(),
                p.scounts.empty() ? p.rdispls.data() : p.sdispls.data(), p.recv,
                p.rcounts.data(), p.rdispls.data(), p.type, p.lc)
#undef COLL_MPI_STARTS
// Never served (a datatype per peer).
int run_alltoallw(const Plan&, coll_request_t*) { return COLL_ERR_INTERNAL; }
int start_alltoallw(const Plan&, coll_request_t*) { return COLL_ERR_INTERNAL; }
int init_alltoallw(const Plan&, coll_request_t*) { return COLL_ERR_INTERNAL; }

// The argument structures (one per pair of blocking and I-form).
enum class Shape {
  kAllreduce, kBcast, kBarrier, kReduce, kScan, kExscan, kReduceScatterBlock, kReduceScatter,
  kAllgather, kAllgatherv, kGather, kGatherv, kScatter, kScatterv, kAlltoall, kAlltoallv,
  kAlltoallw,
};

struct Row {
  FnInfo info;
  Shape shape;
  bool rooted;  // root is an argument (checked against the size)
};

#define COLL_MPI_ROWS(Name, IName, knob, kind, name, shape, rooted)                \
  {{"MPI_" #Name, knob, Kind::kind, false, false, run_##name}, Shape::shape, rooted},   \
  {{"MPI_" #IName, knob, Kind::kind, true, false, start_##name}, Shape::shape, rooted}, \
  {{"MPIX_" #Name "_init", knob, Kind::kind, true, true, init_##name}, Shape::shape, rooted}

// In the order of Fn.
constexpr Row kFns[kFnCount] = {
    COLL_MPI_ROWS(Allreduce, Iallreduce, "allreduce", kReduction, allreduce, kAllreduce, false),
    COLL_MPI_ROWS(Bcast, Ibcast, "bcast", kBytes, bcast, kBcast, true),
    COLL_MPI_ROWS(Barrier, Ibarrier, "barrier", kNone, barrier, kBarrier, false),
    COLL_MPI_ROWS(Reduce, Ireduce, "reduce", kReduction, reduce, kReduce, true),
    COLL_MPI_ROWS(Allgather, Iallgather, "allgather", kMove, allgather, kAllgather, false),
    COLL_MPI_ROWS(Allgatherv, Iallgatherv, "allgatherv", kMove, allgatherv, kAllgatherv, false),
    COLL_MPI_ROWS(Reduce_scatter_block, Ireduce_scatter_block, "reduce_scatter_block", kReduction,
                  reduce_scatter_block, kReduceScatterBlock, false),
    COLL_MPI_ROWS(Reduce_scatter, Ireduce_scatter, "reduce_scatter", kReduction, reduce_scatter,
                  kReduceScatter, false),
    COLL_MPI_ROWS(Gather, Igather, "gather", kMove, gather, kGather, true),
    COLL_MPI_ROWS(Gatherv, Igatherv, "gatherv", kMove, gatherv, kGatherv, true),
    COLL_MPI_ROWS(Scatter, Iscatter, "scatter", kMove, scatter, kScatter, true),
    COLL_MPI_ROWS(Scatterv, Iscatterv, "scatterv", kMove, scatterv, kScatterv, true),
    COLL_MPI_ROWS(Alltoall, Ialltoall, "alltoall", kMove, alltoall, kAlltoall, false),
    COLL_MPI_ROWS(Alltoallv, Ialltoallv, "alltoallv", kMove, alltoallv, kAlltoallv, false),
    COLL_MPI_ROWS(Scan, Iscan, "scan", kReduction, scan, kScan, false),
    COLL_MPI_ROWS(Exscan, Iexscan, "exscan", kReduction, exscan, kExscan, false),
    COLL_MPI_ROWS(Alltoallw, Ialltoallw, "alltoallw", kMove, alltoallw, kAlltoallw, false),
};
#undef COLL_MPI_ROWS

// The rows against libcoll's list of collectives (collective_list.hpp):
// each of its collectives served in its three forms, in rows of its name,
// and one more triple, alltoallw's, which libcoll does not implement (its
// calls are counted and passed to MPI).
#define COLL_MPI_NAME(Id, name) #name,
constexpr const char* kLibcollCollectives[] = {COLL_COLLECTIVES(COLL_MPI_NAME)};
#undef COLL_MPI_NAME
constexpr bool same_name(const char* a, const char* b) {
  while (*a != 0 && *a == *b) ++a, ++b;
  return *a == *b;
}
constexpr int rows_named(const char* name) {
  int rows = 0;
  for (const Row& row : kFns) rows += same_name(row.info.knob, name) ? 1 : 0;
  return rows;
}
constexpr bool rows_match_collectives() {
  for (const char* name : kLibcollCollectives)
    if (rows_named(name) != 3) return false;
  return rows_named("alltoallw") == 3 &&
         kFnCount == 3 * (int(sizeof kLibcollCollectives / sizeof kLibcollCollectives[0]) + 1);
}
static_assert(rows_match_collectives(),
              "kFns: three rows (MPI_X, MPI_IX, MPIX_X_init) for each collective of "
              "algorithms/collective_list.hpp, and alltoallw's");

char* at(const void* buf, MPI_Count offset) {
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(buf) + uintptr_t(offset));
}

// An argument this rank rejects (its MPI error class and why).
struct Rejection {
  int cls = MPI_SUCCESS;
  std::string why;
  bool set(int c, std::string w) {
    cls = c;
    why = std::move(w);
    return false;
  }
};

// The planning of one call on this rank. Each buffer argument becomes a
// pointer libcoll can read or write contiguously: the user's memory itself
// where the datatype is contiguous, else a staging copy.
class Planner {
 public:
  Planner(Plan& p, Rejection& r, int* prep) : p_(p), r_(r), prep_(prep) {}

  // count elements of datatype t at buf (n blocks of a non-v form lie one
  // after another: one buffer). input: its contents are read (packed into a
  // copy if staged); output: the result is unpacked back. Sets *out.
  bool single(const TypeInfo& t, MPI_Datatype type, const void* buf, MPI_Count count, bool input,
              bool output, const void** out) {
    size_t bytes = 0;
    if (!bytes_of(t, count, &bytes)) return false;
    if (bytes == 0 || t.dense(count)) {
      *out = bytes == 0 ? buf : at(buf, t.true_lb);
      return true;
    }
    char* tmp = alloc(bytes, output);
    if (!tmp) return false;
    if (input) pack_input(buf, count, type, t, tmp);
    if (output) add_block(type, t, 0, const_cast<void*>(buf), count);
    *out = tmp;
    return true;
  }

  // A v-form's buffer: block i holds counts[i] elements of t from element
  // displs[i] of buf. Fills libcoll's arrays (bytes) and sets *out.
  bool vector(const TypeInfo& t, MPI_Datatype type, const void* buf, int n, const int* counts,
              const int* displs, bool input, bool output, std::vector<size_t>& bcounts,
              std::vector<size_t>& bdispls, const void** out, const char* what) {
    if (!counts || !displs)
      return r_.set(MPI_ERR_ARG, std::string(what) + ": a null count or displacement array");
    bcounts.resize(size_t(n));
    bdispls.resize(size_t(n));
    const size_t size = size_t(t.size);
    // Contiguous: every block where its displacement says, in the user's memory.
    bool dense = t.size == 0 || (t.size == t.true_extent && t.extent == t.size);
    size_t total = 0;
    for (int i = 0; i < n; ++i) {
      if (counts[i] < 0)
        return r_.set(MPI_ERR_COUNT, std::string(what) + ": count " + std::to_string(counts[i]) +
                                         " for rank " + std::to_string(i));
      if (__builtin_mul_overflow(size_t(counts[i]), size, &bcounts[size_t(i)]) ||
          __builtin_add_overflow(total, bcounts[size_t(i)], &total))
        return r_.set(MPI_ERR_COUNT, std::string(what) + ": the counts overflow");
      if (displs[i] < 0) dense = false;
    }
    for (int i = 0; dense && i < n; ++i)
      dense = !__builtin_mul_overflow(size_t(displs[i]), size, &bdispls[size_t(i)]);
    if (dense) {
      *out = total == 0 ? buf : at(buf, t.true_lb);
      return true;
    }
    char* tmp = alloc(total, output);
    if (!tmp) return false;
    size_t offset = 0;
    for (int i = 0; i < n; ++i) {
      bdispls[size_t(i)] = offset;
      void* block = at(buf, MPI_Count(displs[i]) * t.extent);
      if (input && counts[i] > 0) pack_input(block, counts[i], type, t, tmp + offset);
      if (output && counts[i] > 0) add_block(type, t, offset, block, counts[i]);
      offset += bcounts[size_t(i)];
    }
    *out = tmp;
    return true;
  }

  // A reduction's staging copy: total elements of the input at in, packed;
  // libcoll reduces them in place there, and this rank's result (its first
  // result_count elements) is unpacked to result (nullptr: none).
  bool reduction_copy(const TypeInfo& t, MPI_Datatype type, const void* in, MPI_Count total,
                      void* result, MPI_Count result_count, void** out) {
    size_t bytes = 0;
    if (!bytes_of(t, total, &bytes)) return false;
    char* tmp = alloc(bytes, true);
    if (!tmp) return false;
    pack_input(in, total, type, t, tmp);
    if (result && result_count > 0) add_block(type, t, 0, result, result_count);
    *out = tmp;
    return true;
  }

  // The datatype of an argument this rank uses.
  const TypeInfo* type(MPI_Datatype d, const char* what) {
    const TypeInfo* t = type_info(d);
    if (!t || t->size < 0) r_.set(MPI_ERR_TYPE, std::string(what) + ": not a valid datatype");
    return t;
  }
  bool count(int c, const char* what) {
    if (c >= 0) return true;
    return r_.set(MPI_ERR_COUNT, std::string(what) + " " + std::to_string(c) + " is negative");
  }
  // Bytes of count elements of t in libcoll's buffers (a user op's padding
  // included), without overflow.
  bool bytes_of(const TypeInfo& t, MPI_Count count, size_t* bytes) {
    if (count < 0 || __builtin_mul_overflow(size_t(count), size_t(t.size + t.pad), bytes))
      return r_.set(MPI_ERR_COUNT, "count " + std::to_string(count) + " overflows");
    return true;
  }
  // A send of send bytes where the receive side expects recv bytes.
  bool same_size(size_t send, size_t recv) {
    if (send == recv) return true;
    return r_.set(send > recv ? MPI_ERR_TRUNCATE : MPI_ERR_COUNT,
                  "this rank sends " + std::to_string(send) + " bytes a block where it receives " +
                      std::to_string(recv) + " (the type signatures differ)");
  }

 private:
  // The staging copy: the result's (one per call) or an input's.
  char* alloc(size_t bytes, bool output) {
    char* tmp = static_cast<char*>(std::malloc(bytes ? bytes : 1));
    if (!tmp) {
      r_.set(MPI_ERR_NO_MEM, "no memory for a staging copy of " + std::to_string(bytes) + " bytes");
      return nullptr;
    }
    if (output) {
      p_.stage.tmp = tmp;
    } else {
      std::free(p_.stage.in_tmp);  // at most one input-only copy a call
      p_.stage.in_tmp = tmp;
    }
    return tmp;
  }
  void add_block(MPI_Datatype type, const TypeInfo& t, size_t offset, void* user, MPI_Count n) {
    p_.stage.datatype = type;
    p_.stage.size = t.size;
    p_.stage.extent = t.extent;
    p_.stage.pad = t.pad;
    p_.stage.blocks.push_back({offset, user, n});
  }
  // Packs an input into its staging copy now, or (a persistent request)
  // records it for every start.
  void pack_input(const void* user, MPI_Count n, MPI_Datatype type, const TypeInfo& t,
                  char* packed) {
    if (p_.stage.defer) {
      p_.stage.inputs.push_back({packed, user, n, type, t.size, t.extent, t.pad});
      return;
    }
    const int rc = pack(user, n, type, t.size, t.extent, t.pad, packed);
    if (rc != MPI_SUCCESS && *prep_ == MPI_SUCCESS) *prep_ = rc;
  }

  Plan& p_;
  Rejection& r_;
  int* prep_;
};

// The consistent part of a reduction's decision: the operator and the
// element type (the same on every rank by MPI's rules). A predefined op
// reads the type signature's element type; a user op (user_ops.cpp) the
// datatype's layout, whose elements libcoll carries whole: *user is then
// this call's view of the datatype (one libcoll element per element, in
// place or packed), *t points to it, and p holds the libcoll operator
// (op_full: known, but no operator could be made on this rank).
bool reduction_type(const Call& c, const TypeInfo** t, TypeInfo* user, Plan& p, bool* op_full,
                    Reason* why) {
  *t = type_info(c.datatype);
  if (!map_op(c.op, &p.op, why)) {
    if (*why != Reason::kUserOp) return false;
    switch (user_op(c.op, c.datatype, *t, user, &p.op, &p.user_op)) {
      case UserOpLookup::kUnknown:
        return false;
      case UserOpLookup::kBadType:
        *why = Reason::kArgs;
        return false;
      case UserOpLookup::kType:
        *why = Reason::kUserOpType;
        return false;
      case UserOpLookup::kNoResources:
        *op_full = true;
        break;
      case UserOpLookup::kFound:
        break;
    }
    *t = user;
    return true;
  }
  const coll_op_t op = p.op;
  if (!*t) {
    *why = Reason::kArgs;
    return false;
  }
  const TypeInfo& ti = **t;
  if (ti.elements == TypeInfo::kMixed ||
      (ti.elements == TypeInfo::kOne && ti.category == Category::kOther)) {
    *why = Reason::kDatatype;
    return false;
  }
  if (ti.elements == TypeInfo::kOne && !op_allowed(ti.category, op)) {
    *why = Reason::kOpDatatype;
    return false;
  }
  return true;
}

// libcoll elements of count datatype elements (reductions).
bool elements(const TypeInfo& t, MPI_Count count, size_t* out) {
  if (count < 0) return false;
  if (t.elements != TypeInfo::kOne) {
    *out = 0;
    return true;
  }
  return !__builtin_mul_overflow(size_t(count), t.per, out);
}

// A reduction on this rank. total: datatype elements of the input;
// result_count: those of this rank's result, at the start of the result
// buffer (nothing when result is nullptr). The input is sendbuf, or the
// result buffer in place. in_place_ok: libcoll takes COLL_IN_PLACE at this
// rank (not at a reduce's non-root).
bool plan_reduction(const Call& c, const TypeInfo& t, Planner& pl, Plan& p, MPI_Count total,
                    void* result, MPI_Count result_count, bool in_place_ok) {
  const bool in_place = c.sendbuf == MPI_IN_PLACE;
  if (t.category == Category::kPair) {
    // A named pair type: the user's elements are libcoll's pairs (the
    // padded C struct, which MPI_Type_size does not count), one per extent.
    p.send = in_place ? COLL_IN_PLACE : c.sendbuf;
    p.recv = result;
    return true;
  }
  size_t bytes = 0;
  if (!pl.bytes_of(t, total, &bytes)) return false;
  if (bytes == 0) {
    p.send = in_place ? COLL_IN_PLACE : c.sendbuf;
    p.recv = result;
  } else if (t.dense(total)) {
    p.send = in_place ? COLL_IN_PLACE : at(c.sendbuf, t.true_lb);
    p.recv = result ? at(result, t.true_lb) : nullptr;
  } else {
    void* tmp = nullptr;
    if (!pl.reduction_copy(t, c.datatype, in_place ? c.recvbuf : c.sendbuf, total, result,
                           result_count, &tmp))
      return false;
    p.send = in_place_ok ? COLL_IN_PLACE : tmp;
    p.recv = in_place_ok ? tmp : nullptr;
  }
  return true;
}

// The per-rank part of a served call: libcoll's arguments in p, or false
// with the rejection of an argument of this rank.
bool plan_call(const Call& c, const Row& row, const ShimComm& sc, const TypeInfo* rt, Plan& p,
               Rejection& rej, int* prep) {
  Planner pl(p, rej, prep);
  const int n = sc.size, me = sc.rank;
  const bool root = me == c.root;
  const bool in_place = c.sendbuf == MPI_IN_PLACE;
  switch (row.shape) {
    case Shape::kBarrier:
    case Shape::kAlltoallw:
      return true;
    case Shape::kAllreduce:
    case Shape::kScan:
      return plan_reduction(c, *rt, pl, p, c.count, c.recvbuf, c.count, true);
    case Shape::kExscan:
      // Rank 0's result is undefined (libcoll leaves it): nothing unpacked there.
      return plan_reduction(c, *rt, pl, p, c.count, c.recvbuf, me == 0 ? 0 : c.count, true);
    case Shape::kReduce:
      if (in_place && !root)
        return rej.set(MPI_ERR_BUFFER, "MPI_IN_PLACE as sendbuf off the root");
      return plan_reduction(c, *rt, pl, p, c.count, root ? c.recvbuf : nullptr, c.count, root);
    case Shape::kReduceScatterBlock: {
      MPI_Count total = 0;
      if (__builtin_mul_overflow(MPI_Count(c.count), MPI_Count(n), &total))
        return rej.set(MPI_ERR_COUNT, "recvcount x size overflows");
      return plan_reduction(c, *rt, pl, p, total, c.recvbuf, c.count, true);
    }
    case Shape::kReduceScatter: {
      // recvcounts is the same on every rank; decide() checked it and made
      // libcoll's counts (p.rcounts).
      MPI_Count total = 0;
      for (int i = 0; i < n; ++i) total += c.recvcounts[i];
      return plan_reduction(c, *rt, pl, p, total, c.recvbuf, c.recvcounts[me], true);
    }
    case Shape::kBcast: {
      size_t bytes = 0;
      if (!pl.bytes_of(*rt, c.count, &bytes)) return false;
      p.count = bytes;
      const void* buf = nullptr;
      // The root's data is read, the others' written.
      if (!pl.single(*rt, c.datatype, c.recvbuf, c.count, root, !root, &buf)) return false;
      p.recv = const_cast<void*>(buf);
      return true;
    }
    case Shape::kAllgather:
    case Shape::kAlltoall: {
      // Every rank sends and receives: n blocks of count elements each side.
      const bool all = row.shape == Shape::kAlltoall;
      if (!pl.count(c.count, "recvcount")) return false;
      const TypeInfo* r = pl.type(c.datatype, "recvtype");
      if (!r) return false;
      size_t block = 0;
      if (!pl.bytes_of(*r, c.count, &block)) return false;
      p.count = block;
      const void* recv = nullptr;
      // In place the receive buffer holds the input too (allgather: this
      // rank's block; alltoall: everything).
      if (!pl.single(*r, c.datatype, c.recvbuf, MPI_Count(c.count) * n, in_place, true, &recv))
        return false;
      p.recv = const_cast<void*>(recv);
      if (in_place) {
        p.send = COLL_IN_PLACE;
        return true;
      }
      if (!pl.count(c.sendcount, "sendcount")) return false;
      const TypeInfo* s = pl.type(c.sendtype, "sendtype");
      if (!s) return false;
      size_t sblock = 0;
      if (!pl.bytes_of(*s, c.sendcount, &sblock) || !pl.same_size(sblock, block)) return false;
      return pl.single(*s, c.sendtype, c.sendbuf, MPI_Count(c.sendcount) * (all ? n : 1), true,
                       false, &p.send);
    }
    case Shape::kAllgatherv: {
      const TypeInfo* r = pl.type(c.datatype, "recvtype");
      if (!r) return false;
      const void* recv = nullptr;
      if (!pl.vector(*r, c.datatype, c.recvbuf, n, c.recvcounts, c.rdispls, in_place, true,
                     p.rcounts, p.rdispls, &recv, "recvcounts"))
        return false;
      p.recv = const_cast<void*>(recv);
      p.count = p.rcounts[size_t(me)];
      if (in_place) {
        p.send = COLL_IN_PLACE;
        return true;
      }
      if (!pl.count(c.sendcount, "sendcount")) return false;
      const TypeInfo* s = pl.type(c.sendtype, "sendtype");
      if (!s) return false;
      size_t sbytes = 0;
      if (!pl.bytes_of(*s, c.sendcount, &sbytes) || !pl.same_size(sbytes, p.count)) return false;
      return pl.single(*s, c.sendtype, c.sendbuf, c.sendcount, true, false, &p.send);
    }
    case Shape::kGather:
    case Shape::kGatherv: {
      const bool v = row.shape == Shape::kGatherv;
      size_t mine = 0;  // the bytes of this rank's block
      bool have_mine = false;
      if (root) {
        const TypeInfo* r = pl.type(c.datatype, "recvtype");
        if (!r) return false;
        const void* recv = nullptr;
        if (v) {
          if (!pl.vector(*r, c.datatype, c.recvbuf, n, c.recvcounts, c.rdispls, in_place, true,
                         p.rcounts, p.rdispls, &recv, "recvcounts"))
            return false;
          mine = p.rcounts[size_t(me)];
        } else {
          if (!pl.count(c.count, "recvcount") || !pl.bytes_of(*r, c.count, &mine)) return false;
          if (!pl.single(*r, c.datatype, c.recvbuf, MPI_Count(c.count) * n, in_place, true, &recv))
            return false;
        }
        p.recv = const_cast<void*>(recv);
        have_mine = true;
      }
      if (in_place) {
        if (!root) return rej.set(MPI_ERR_BUFFER, "MPI_IN_PLACE as sendbuf off the root");
        p.send = COLL_IN_PLACE;
        p.count = mine;
        return true;
      }
      if (!pl.count(c.sendcount, "sendcount")) return false;
      const TypeInfo* s = pl.type(c.sendtype, "sendtype");
      if (!s) return false;
      size_t sbytes = 0;
      if (!pl.bytes_of(*s, c.sendcount, &sbytes)) return false;
      if (have_mine && !pl.same_size(sbytes, mine)) return false;
      p.count = sbytes;
      return pl.single(*s, c.sendtype, c.sendbuf, c.sendcount, true, false, &p.send);
    }
    case Shape::kScatter:
    case Shape::kScatterv: {
      const bool v = row.shape == Shape::kScatterv;
      const bool recv_in_place = c.recvbuf == MPI_IN_PLACE;
      size_t mine = 0;
      bool have_mine = false;
      if (recv_in_place && !root)
        return rej.set(MPI_ERR_BUFFER, "MPI_IN_PLACE as recvbuf off the root");
      if (root) {
        const TypeInfo* s = pl.type(c.sendtype, "sendtype");
        if (!s) return false;
        if (v) {
          if (!pl.vector(*s, c.sendtype, c.sendbuf, n, c.sendcounts, c.sdispls, true, false,
                         p.scounts, p.sdispls, &p.send, "sendcounts"))
            return false;
          mine = p.scounts[size_t(me)];
        } else {
          if (!pl.count(c.sendcount, "sendcount") || !pl.bytes_of(*s, c.sendcount, &mine))
            return false;
          if (!pl.single(*s, c.sendtype, c.sendbuf, MPI_Count(c.sendcount) * n, true, false,
                         &p.send))
            return false;
        }
        have_mine = true;
      }
      if (recv_in_place) {
        p.recv = COLL_IN_PLACE;
        p.count = mine;
        return true;
      }
      if (!pl.count(c.count, "recvcount")) return false;
      const TypeInfo* r = pl.type(c.datatype, "recvtype");
      if (!r) return false;
      size_t rbytes = 0;
      if (!pl.bytes_of(*r, c.count, &rbytes)) return false;
      if (have_mine && !pl.same_size(mine, rbytes)) return false;
      p.count = rbytes;
      const void* recv = nullptr;
      if (!pl.single(*r, c.datatype, c.recvbuf, c.count, false, true, &recv)) return false;
      p.recv = const_cast<void*>(recv);
      return true;
    }
    case Shape::kAlltoallv: {
      const TypeInfo* r = pl.type(c.datatype, "recvtype");
      if (!r) return false;
      const void* recv = nullptr;
      if (!pl.vector(*r, c.datatype, c.recvbuf, n, c.recvcounts, c.rdispls, in_place, true,
                     p.rcounts, p.rdispls, &recv, "recvcounts"))
        return false;
      p.recv = const_cast<void*>(recv);
      if (in_place) {
        p.send = COLL_IN_PLACE;
        return true;
      }
      const TypeInfo* s = pl.type(c.sendtype, "sendtype");
      if (!s) return false;
      return pl.vector(*s, c.sendtype, c.sendbuf, n, c.sendcounts, c.sdispls, true, false,
                       p.scounts, p.sdispls, &p.send, "sendcounts");
    }
  }
  return true;
}

// Whether libcoll serves c; if so the plan (or this rank's rejection of one
// of its arguments). *prep: an MPI error of the preparation on this rank
// (reported after the call, which every rank makes).
bool decide(const Call& c, const Row& row, Plan& p, Reason* why, Rejection& rej, int* prep) {
  *prep = MPI_SUCCESS;
  if (!g_active.load(std::memory_order_acquire)) {
    *why = g_config.disabled ? Reason::kDisabled : Reason::kUnavailable;
    return false;
  }
  if (!((g_config.selected >> int(c.fn)) & 1u)) {
    *why = Reason::kNotSelected;
    return false;
  }
  if (row.shape == Shape::kAlltoallw) {
    *why = Reason::kPerPeerTypes;
    return false;
  }
  // What every rank passes alike: a reduction's operator, datatype and
  // count (reduce_scatter: its counts), bcast's byte count.
  const TypeInfo* t = nullptr;
  TypeInfo user;  // a user op's view of the datatype
  bool op_full = false;
  switch (row.info.kind) {
    case Kind::kReduction: {
      if (!reduction_type(c, &t, &user, p, &op_full, why)) return false;
      p.type = t->elements == TypeInfo::kOne ? t->ctype : COLL_UINT8;
      size_t total = 0;
      if (row.shape == Shape::kReduceScatter) {
        if (!c.recvcounts) {
          *why = Reason::kArgs;
          return false;
        }
      } else if (!elements(*t, c.count, &total)) {
        *why = Reason::kArgs;
        return false;
      }
      p.count = total;
      break;
    }
    case Kind::kBytes: {
      t = type_info(c.datatype);
      size_t total = 0;
      if (c.count < 0 || !t || t->size < 0 ||
          __builtin_mul_overflow(size_t(c.count), size_t(t->size), &total)) {
        *why = Reason::kArgs;
        return false;
      }
      break;
    }
    case Kind::kMove:
    case Kind::kNone:
      break;
  }
  ShimComm* sc = lookup(c.comm, !row.info.nonblocking, why);
  if (!sc) return false;
  if (row.rooted && (c.root < 0 || c.root >= sc->size)) {
    *why = Reason::kArgs;  // MPI reports MPI_ERR_ROOT
    return false;
  }
  if (row.shape == Shape::kReduceScatter) {
    // libcoll's counts; a negative one (the same on every rank) goes to MPI.
    p.rcounts.resize(size_t(sc->size));
    for (int i = 0; i < sc->size; ++i) {
      if (!elements(*t, c.recvcounts[i], &p.rcounts[size_t(i)])) {
        *why = Reason::kArgs;
        return false;
      }
    }
  }
  p.lc = sc->lc;
  p.root = c.root;
  if (!plan_call(c, row, *sc, t, p, rej, prep) && rej.cls == MPI_SUCCESS)
    rej.set(MPI_ERR_INTERN, "the call could not be planned");
  if (op_full && rej.cls == MPI_SUCCESS)
    rej.set(MPI_ERR_NO_MEM,
            "no libcoll user operator: libcoll's table of them is full (coll_op_create), or no "
            "memory for a packed call's scratch");
  return true;
}

int run(const Call& c, const Row& row, Plan& p, MPI_Request* request, int prep) {
  const char* name = row.info.mpi_name;
  coll_request_t lreq = COLL_REQUEST_NULL;
  int status = row.info.start(p, &lreq);
  if (status != COLL_SUCCESS) {
    p.stage.release();
    count_error(c.fn);
    if (request) *request = MPI_REQUEST_NULL;
    return raise_error(c.comm, handler_of(c.comm), name, status, coll_comm_last_error(p.lc));
  }
  int rc = MPI_SUCCESS;
  if (request) {
    p.stage.own_types();
    rc = row.info.persistent ? make_persistent(c.fn, c.comm, p.lc, lreq, p, request)
                             : make_request(c.fn, c.comm, p.lc, lreq, p, request);
  } else {
    status = wait_coll(&lreq);
    if (status == COLL_SUCCESS) rc = p.stage.unpack();
    p.stage.release();
    if (status != COLL_SUCCESS) {
      count_error(c.fn);
      return raise_error(c.comm, handler_of(c.comm), name, status, coll_comm_last_error(p.lc));
    }
  }
  if (rc == MPI_SUCCESS) rc = prep;
  if (rc != MPI_SUCCESS) {
    // An MPI failure of this rank's packing: MPI's own error path.
    PMPI_Comm_call_errhandler(c.comm, rc);
  }
  return rc;
}

}  // namespace

const FnInfo& fn_info(Fn fn) { return kFns[int(fn)].info; }

// The calls whose plan has count or displacement arrays: the v-forms
// (displacements) and reduce_scatter (libcoll's counts, made in decide).
constexpr bool has_counts(Shape s) {
  return s == Shape::kAllgatherv || s == Shape::kGatherv || s == Shape::kScatterv ||
         s == Shape::kAlltoallv || s == Shape::kReduceScatter;
}

// The count and displacement arrays of a blocking v-form's plan, kept from
// one call to the next on this thread: each call allocated and freed up to
// four (a quarter of a served MPI_Alltoallv at np 1, 0.18 us). Swapped into
// the plan for the call, emptied (the plan tells by their emptiness which
// arrays it set), and back after it; a call made while another is planned
// (from a user op) finds empty ones and allocates its own.
class ReusedCounts {
 public:
  ReusedCounts(Plan& p, bool reuse) : p_(reuse ? &p : nullptr) {
    swap();
    if (!p_) return;
    p_->scounts.clear();
    p_->sdispls.clear();
    p_->rcounts.clear();
    p_->rdispls.clear();
  }
  ~ReusedCounts() { swap(); }
  ReusedCounts(const ReusedCounts&) = delete;
  ReusedCounts& operator=(const ReusedCounts&) = delete;

 private:
  void swap() {
    if (!p_) return;
    thread_local std::vector<size_t> kept[4];
    p_->scounts.swap(kept[0]);
    p_->sdispls.swap(kept[1]);
    p_->rcounts.swap(kept[2]);
    p_->rdispls.swap(kept[3]);
  }
  Plan* p_;
};

bool serve(Call& c, MPI_Request* request, int* rc) {
  forget_error();
  const Row& row = kFns[int(c.fn)];
  Plan p;
  // A request keeps its plan's arrays: only blocking calls reuse them, and
  // only the calls that have such arrays: the thread_local costs a call
  // of __tls_get_addr (the shim is preloaded), about 25 ns a call at np 2
  // (perf of OSU's loop, MPI_Barrier + a 4 B MPI_Gather).
  ReusedCounts reused(p, !row.info.nonblocking && has_counts(row.shape));
  p.stage.defer = row.info.persistent;  // packed at every start instead
  Reason why = Reason::kComm;
  Rejection rej;
  int prep = MPI_SUCCESS;
  if (!decide(c, row, p, &why, rej, &prep)) {
    count_passed(c.fn, why);
    return false;
  }
  // An I-form or persistent form without a request pointer: a per-rank
  // argument, so it cannot send this rank to MPI while the others, which
  // decided alike, serve the call (the fallback rule): rejected here.
  if (row.info.nonblocking && !request && rej.cls == MPI_SUCCESS)
    rej.set(MPI_ERR_REQUEST, "the request argument is NULL");
  count_served(c.fn);
  if (rej.cls != MPI_SUCCESS) {
    p.stage.release();
    // Resources (a staging copy, libcoll's user op table) fail; arguments are rejected.
    if (rej.cls == MPI_ERR_NO_MEM || rej.cls == MPI_ERR_INTERN)
      count_error(c.fn);
    else
      count_rejected(c.fn);
    if (request) *request = MPI_REQUEST_NULL;
    *rc = raise_class(c.comm, handler_of(c.comm), row.info.mpi_name, rej.cls, rej.why);
    return true;
  }
  *rc = run(c, row, p, request, prep);
  return true;
}

void Staging::release() {
  std::free(tmp);
  tmp = nullptr;
  std::free(in_tmp);
  in_tmp = nullptr;
  if (owned && datatype != MPI_DATATYPE_NULL) PMPI_Type_free(&datatype);
  owned = false;
  datatype = MPI_DATATYPE_NULL;
  blocks.clear();
  for (MPI_Datatype& t : input_types) PMPI_Type_free(&t);
  input_types.clear();
  inputs.clear();
}

void Staging::own_types() {
  if (!blocks.empty() && !owned && PMPI_Type_dup(datatype, &datatype) == MPI_SUCCESS)
    owned = true;
  // One dup a datatype (a v-form's blocks share theirs); where the dup
  // fails the user's handle stays.
  MPI_Datatype user = MPI_DATATYPE_NULL, mine = MPI_DATATYPE_NULL;
  for (Input& in : inputs) {
    if (in.datatype != user) {
      user = in.datatype;
      mine = user;
      if (PMPI_Type_dup(user, &mine) == MPI_SUCCESS)
        input_types.push_back(mine);
      else
        mine = user;
    }
    in.datatype = mine;
  }
}

int Staging::repack() {
  for (const Input& in : inputs) {
    const int rc =
        shim::pack(in.user, in.count, in.datatype, in.size, in.extent, in.pad, in.packed);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int Staging::unpack() {
  if (!tmp) return MPI_SUCCESS;
  for (const Block& b : blocks) {
    const int rc = shim::unpack(tmp + b.offset, b.count, datatype, size, extent, pad, b.user);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

}  // namespace shim

// ---- entry points -------------------------------------------------------------

using shim::Call;
using shim::Fn;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) {
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    shim::start(argc, argv, provided);
  }
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  int level = MPI_THREAD_SINGLE;
  const int rc = PMPI_Init_thread(argc, argv, required, &level);
  if (provided) *provided = level;
  if (rc == MPI_SUCCESS) shim::start(argc, argv, level);
  return rc;
}

int MPI_Finalize(void) { return shim::finish(); }

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  Call c{Fn::kAllreduce, sendbuf, recvbuf, count, datatype, op, 0, comm};
  int rc;
  if (shim::serve(c, nullptr, &rc)) return rc;
  return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  Call c{Fn::kIallreduce, sendbuf, recvbuf, count, datatype, op, 0, comm};
  int rc;
  if (shim::serve(c, request, &rc)) return rc;
  return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  Call c{Fn::kBcast, nullptr, buffer, count, datatype, MPI_OP_NULL, root, comm};
  int rc;
  if (shim::serve(c, nullptr, &rc)) return rc;
  return PMPI_Bcast(buffer, count, datatype, root, comm);
}

int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
               MPI_Request* request) {
  Call c{Fn::kIbcast, nullptr, buffer, count, datatype, MPI_OP_NULL, root, comm};
  int rc;
  if (shim::serve(c, request, &rc)) return rc;
  return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
}

int MPI_Barrier(MPI_Comm comm) {
  Call c{Fn::kBarrier, nullptr, nullptr, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, 0, comm};
  int rc;
  if (shim::serve(c, nullptr, &rc)) return rc;
  return PMPI_Barrier(comm);
}

int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  Call c{Fn::kIbarrier, nullptr, nullptr, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, 0, comm};
  int rc;
  if (shim::serve(c, request, &rc)) return rc;
  return PMPI_Ibarrier(comm, request);
}

#define COLL_MPI_SERVE(...)                   \
  Call c{__VA_ARGS__};                        \
  int rc;                                     \
  if (shim::serve(c, request, &rc)) return rc

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               int root, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kReduce, sendbuf, recvbuf, count, datatype, op, root, comm);
  return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
}

int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIreduce, sendbuf, recvbuf, count, datatype, op, root, comm);
  return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
             MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kScan, sendbuf, recvbuf, count, datatype, op, 0, comm);
  return PMPI_Scan(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIscan, sendbuf, recvbuf, count, datatype, op, 0, comm);
  return PMPI_Iscan(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
               MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kExscan, sendbuf, recvbuf, count, datatype, op, 0, comm);
  return PMPI_Exscan(sendbuf, recvbuf, count, datatype, op, comm);
}

int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIexscan, sendbuf, recvbuf, count, datatype, op, 0, comm);
  return PMPI_Iexscan(sendbuf, recvbuf, count, datatype, op, comm, request);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, 0, comm);
  return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
}

int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                              MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIreduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, 0, comm);
  return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                       MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kReduceScatter, sendbuf, recvbuf, 0, datatype, op, 0, comm, 0,
                 MPI_DATATYPE_NULL, nullptr, nullptr, recvcounts);
  return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
}

int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIreduceScatter, sendbuf, recvbuf, 0, datatype, op, 0, comm, 0,
                 MPI_DATATYPE_NULL, nullptr, nullptr, recvcounts);
  return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kAllgather, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype);
  return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIallgather, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype);
  return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                         request);
}

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                   MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kAllgatherv, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, 0, comm, sendcount,
                 sendtype, nullptr, nullptr, recvcounts, displs);
  return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                         comm);
}

int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                    MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIallgatherv, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype, nullptr, nullptr, recvcounts, displs);
  return PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                          comm, request);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kGather, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root, comm,
                 sendcount, sendtype);
  return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIgather, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root, comm,
                 sendcount, sendtype);
  return PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                      request);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kGatherv, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, root, comm, sendcount,
                 sendtype, nullptr, nullptr, recvcounts, displs);
  return PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                      comm);
}

int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                 MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIgatherv, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, root, comm,
                 sendcount, sendtype, nullptr, nullptr, recvcounts, displs);
  return PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root,
                       comm, request);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kScatter, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root, comm,
                 sendcount, sendtype);
  return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
}

int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIscatter, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root, comm,
                 sendcount, sendtype);
  return PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                       request);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                 MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                 int root, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kScatterv, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root, comm, 0,
                 sendtype, sendcounts, displs);
  return PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                       comm);
}

int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[],
                  MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                  int root, MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIscatterv, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root, comm,
                 0, sendtype, sendcounts, displs);
  return PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root,
                        comm, request);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kAlltoall, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype);
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIalltoall, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype);
  return PMPI_Ialltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                  const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kAlltoallv, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, 0, comm, 0, sendtype,
                 sendcounts, sdispls, recvcounts, rdispls);
  return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                        recvtype, comm);
}

int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                   const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                   MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIalltoallv, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, 0, comm, 0,
                 sendtype, sendcounts, sdispls, recvcounts, rdispls);
  return PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                         recvtype, comm, request);
}

// A datatype per peer: libcoll's calls take one. Counted, passed to MPI.
int MPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                  const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                  const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm) {
  MPI_Request* request = nullptr;
  COLL_MPI_SERVE(Fn::kAlltoallw, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, 0, comm);
  return PMPI_Alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                        recvtypes, comm);
}

int MPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[],
                   const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                   const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                   MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kIalltoallw, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, 0, comm);
  return PMPI_Ialltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                         recvtypes, comm, request);
}

#ifdef OMPI_HAVE_MPI_EXT_PCOLLREQ
// The persistent collectives. A served one is a libcoll persistent request
// (coll_X_init) behind an MPI request of the shim's (requests.cpp): started
// with MPI_Start / MPI_Startall, completed by any wait or test, freed with
// MPI_Request_free. One passed to MPI is Open MPI's own request from
// PMPIX_X_init, which the shim's MPI_Start and waits hand to MPI untouched.
// The MPI_Info argument is ignored: it carries hints only, and none that
// libcoll takes (a call passed to MPI gets it unchanged).
int MPIX_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                        MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kAllreduceInit, sendbuf, recvbuf, count, datatype, op, 0, comm);
  return PMPIX_Allreduce_init(sendbuf, recvbuf, count, datatype, op, comm, info, request);
}

int MPIX_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                    MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kBcastInit, nullptr, buffer, count, datatype, MPI_OP_NULL, root, comm);
  return PMPIX_Bcast_init(buffer, count, datatype, root, comm, info, request);
}

int MPIX_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kBarrierInit, nullptr, nullptr, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, 0, comm);
  return PMPIX_Barrier_init(comm, info, request);
}

int MPIX_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                     MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kReduceInit, sendbuf, recvbuf, count, datatype, op, root, comm);
  return PMPIX_Reduce_init(sendbuf, recvbuf, count, datatype, op, root, comm, info, request);
}

int MPIX_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                   MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kScanInit, sendbuf, recvbuf, count, datatype, op, 0, comm);
  return PMPIX_Scan_init(sendbuf, recvbuf, count, datatype, op, comm, info, request);
}

int MPIX_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype,
                     MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kExscanInit, sendbuf, recvbuf, count, datatype, op, 0, comm);
  return PMPIX_Exscan_init(sendbuf, recvbuf, count, datatype, op, comm, info, request);
}

int MPIX_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount,
                                   MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                   MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kReduceScatterBlockInit, sendbuf, recvbuf, recvcount, datatype, op, 0, comm);
  return PMPIX_Reduce_scatter_block_init(sendbuf, recvbuf, recvcount, datatype, op, comm, info,
                                         request);
}

int MPIX_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[],
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info,
                             MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kReduceScatterInit, sendbuf, recvbuf, 0, datatype, op, 0, comm, 0,
                 MPI_DATATYPE_NULL, nullptr, nullptr, recvcounts);
  return PMPIX_Reduce_scatter_init(sendbuf, recvbuf, recvcounts, datatype, op, comm, info,
                                   request);
}

int MPIX_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                        int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                        MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kAllgatherInit, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype);
  return PMPIX_Allgather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                              info, request);
}

int MPIX_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                         void* recvbuf, const int recvcounts[], const int displs[],
                         MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                         MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kAllgathervInit, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype, nullptr, nullptr, recvcounts, displs);
  return PMPIX_Allgatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                               recvtype, comm, info, request);
}

int MPIX_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                     MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kGatherInit, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root, comm,
                 sendcount, sendtype);
  return PMPIX_Gather_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                           info, request);
}

int MPIX_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                      const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                      MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kGathervInit, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, root, comm,
                 sendcount, sendtype, nullptr, nullptr, recvcounts, displs);
  return PMPIX_Gatherv_init(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                            root, comm, info, request);
}

int MPIX_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                      int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                      MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kScatterInit, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root,
                 comm, sendcount, sendtype);
  return PMPIX_Scatter_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root,
                            comm, info, request);
}

int MPIX_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[],
                       MPI_Datatype sendtype, void* recvbuf, int recvcount, MPI_Datatype recvtype,
                       int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kScattervInit, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, root,
                 comm, 0, sendtype, sendcounts, displs);
  return PMPIX_Scatterv_init(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                             root, comm, info, request);
}

int MPIX_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kAlltoallInit, sendbuf, recvbuf, recvcount, recvtype, MPI_OP_NULL, 0, comm,
                 sendcount, sendtype);
  return PMPIX_Alltoall_init(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                             info, request);
}

int MPIX_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                        const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info,
                        MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kAlltoallvInit, sendbuf, recvbuf, 0, recvtype, MPI_OP_NULL, 0, comm, 0,
                 sendtype, sendcounts, sdispls, recvcounts, rdispls);
  return PMPIX_Alltoallv_init(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                              rdispls, recvtype, comm, info, request);
}

// A datatype per peer, as MPI_Alltoallw: counted, passed to MPI.
int MPIX_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[],
                        const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm,
                        MPI_Info info, MPI_Request* request) {
  COLL_MPI_SERVE(Fn::kAlltoallwInit, sendbuf, recvbuf, 0, MPI_DATATYPE_NULL, MPI_OP_NULL, 0, comm);
  return PMPIX_Alltoallw_init(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                              rdispls, recvtypes, comm, info, request);
}
#endif  // OMPI_HAVE_MPI_EXT_PCOLLREQ

#undef COLL_MPI_SERVE

// Communicator creators that are collective over their parent.
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  return shim::comm_dup(comm, newcomm, MPI_INFO_NULL, false);
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  return shim::comm_dup(comm, newcomm, info, true);
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split(comm, color, key, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_create(comm, group, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

// Collective over the new communicator only: its members call it.
int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_create_group(comm, group, tag, newcomm);
  shim::derive_group(comm, tag, rc, newcomm);
  return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm* newcomm) {
  const int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  const int rc = PMPI_Cart_sub(comm, remain_dims, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

int MPI_Graph_create(MPI_Comm comm, int nnodes, const int index[], const int edges[], int reorder,
                     MPI_Comm* newcomm) {
  const int rc = PMPI_Graph_create(comm, nnodes, index, edges, reorder, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int indegree, const int sources[],
                                   const int sourceweights[], int outdegree,
                                   const int destinations[], const int destweights[],
                                   MPI_Info info, int reorder, MPI_Comm* newcomm) {
  const int rc = PMPI_Dist_graph_create_adjacent(comm, indegree, sources, sourceweights, outdegree,
                                                 destinations, destweights, info, reorder, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

int MPI_Dist_graph_create(MPI_Comm comm, int n, const int sources[], const int degrees[],
                          const int destinations[], const int weights[], MPI_Info info,
                          int reorder, MPI_Comm* newcomm) {
  const int rc =
      PMPI_Dist_graph_create(comm, n, sources, degrees, destinations, weights, info, reorder, newcomm);
  shim::derive(comm, rc, newcomm);
  return rc;
}

int coll_mpi_comm_served(MPI_Comm comm) {
  if (!shim::g_active.load()) return 0;
  shim::Reason why;
  return shim::lookup(comm, false, &why) != nullptr;
}

}  // extern "C"
