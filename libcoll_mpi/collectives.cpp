// The dispatch table and the MPI entry points.
//
// Every intercepted collective builds a Call from its arguments and asks
// serve(); when that declines, the entry point calls the PMPI_ function with
// the same arguments. The decision (decide()) reads, in this order, only
// what is the same on every rank of the communicator: the shim's state and
// configuration, the collective's kind and the operator, the type signature
// of the data (types.cpp: element type, byte count), the communicator's
// state (comms.cpp), the root. Adding a collective (MPI_Reduce, ...) is an
// Fn enumerator (shim.hpp), a row in kFns with its libcoll start function, a
// five-line entry point below, and its Fortran entry point (fortran.cpp).
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "coll_mpi.h"
#include "shim.hpp"

namespace shim {
namespace {

int start_allreduce(const Plan& p, coll_request_t* r) {
  return coll_iallreduce(p.send, p.recv, p.count, p.type, p.op, p.lc, r);
}
int start_bcast(const Plan& p, coll_request_t* r) {
  return coll_ibcast(p.recv, p.count, p.type, p.root, p.lc, r);
}
int start_barrier(const Plan& p, coll_request_t* r) { return coll_ibarrier(p.lc, r); }

struct Row {
  FnInfo info;
  bool rooted;          // root is an argument (checked against the size)
  bool result_at_root;  // the result buffer exists only at the root (MPI_Reduce)
};

// In the order of Fn. MPI_Reduce, when libcoll has it, is
//   {{"MPI_Reduce", "reduce", Kind::kReduction, false, start_reduce}, true, true},
// collectives with per-rank counts (gather, alltoall, ...) need a Kind of
// their own in decide().
const Row kFns[kFnCount] = {
    {{"MPI_Allreduce", "allreduce", Kind::kReduction, false, start_allreduce}, false, false},
    {{"MPI_Iallreduce", "allreduce", Kind::kReduction, true, start_allreduce}, false, false},
    {{"MPI_Bcast", "bcast", Kind::kBytes, false, start_bcast}, true, false},
    {{"MPI_Ibcast", "bcast", Kind::kBytes, true, start_bcast}, true, false},
    {{"MPI_Barrier", "barrier", Kind::kNone, false, start_barrier}, false, false},
    {{"MPI_Ibarrier", "barrier", Kind::kNone, true, start_barrier}, false, false},
};

char* at(const void* buf, MPI_Count offset) {
  return reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(buf) + uintptr_t(offset));
}

// Prepares the plan's buffers for count elements of datatype (info) whose
// input is at in (nullptr: none on this rank) and whose result goes to out
// (nullptr: none). dense: in place; otherwise a packed copy.
int stage(Plan& p, const TypeInfo& t, int count, MPI_Datatype datatype, const void* in,
          void* out, size_t bytes) {
  p.stage.tmp = static_cast<char*>(std::malloc(bytes ? bytes : 1));
  if (!p.stage.tmp) return MPI_ERR_NO_MEM;
  p.stage.count = count;
  p.stage.datatype = datatype;
  p.stage.size = t.size;
  p.stage.extent = t.extent;
  p.stage.user = out;
  return in ? pack(in, count, datatype, t.size, t.extent, p.stage.tmp) : MPI_SUCCESS;
}

// Whether libcoll serves c; if so the plan. *prep: an MPI error of the
// preparation on this rank (reported after the call, which every rank makes).
bool decide(const Call& c, const Row& row, Plan& p, Reason* why, int* prep) {
  *prep = MPI_SUCCESS;
  if (!g_active.load(std::memory_order_acquire)) {
    *why = g_config.disabled ? Reason::kDisabled : Reason::kUnavailable;
    return false;
  }
  if (!((g_config.selected >> int(c.fn)) & 1u)) {
    *why = Reason::kNotSelected;
    return false;
  }
  const TypeInfo* t = nullptr;
  size_t total = 0;  // reduction: libcoll elements; bytes: bytes
  coll_op_t op = COLL_SUM;
  switch (row.info.kind) {
    case Kind::kReduction: {
      if (c.count < 0) {
        *why = Reason::kArgs;
        return false;
      }
      if (!map_op(c.op, &op, why)) return false;
      t = type_info(c.datatype);
      if (!t) {
        *why = Reason::kArgs;
        return false;
      }
      if (t->elements == TypeInfo::kMixed ||
          (t->elements == TypeInfo::kOne && t->category == Category::kOther)) {
        *why = Reason::kDatatype;
        return false;
      }
      if (t->elements == TypeInfo::kOne && !op_allowed(t->category, op)) {
        *why = Reason::kOpDatatype;
        return false;
      }
      if (t->elements == TypeInfo::kOne && __builtin_mul_overflow(size_t(c.count), t->per, &total)) {
        *why = Reason::kArgs;
        return false;
      }
      break;
    }
    case Kind::kBytes:
      if (c.count < 0) {
        *why = Reason::kArgs;
        return false;
      }
      t = type_info(c.datatype);
      if (!t || t->size < 0) {
        *why = Reason::kArgs;
        return false;
      }
      if (__builtin_mul_overflow(size_t(c.count), size_t(t->size), &total)) {
        *why = Reason::kArgs;
        return false;
      }
      break;
    case Kind::kNone:
      break;
  }
  ShimComm* sc = lookup(c.comm, !row.info.nonblocking, why);
  if (!sc) return false;
  if (row.rooted && (c.root < 0 || c.root >= sc->size)) {
    *why = Reason::kArgs;  // MPI reports MPI_ERR_ROOT
    return false;
  }

  p.lc = sc->lc;
  p.root = c.root;
  switch (row.info.kind) {
    case Kind::kReduction: {
      p.type = t->elements == TypeInfo::kOne ? t->ctype : COLL_UINT8;
      p.op = op;
      p.count = total;
      const bool in_place = c.sendbuf == MPI_IN_PLACE;
      // Where the result goes on this rank (nowhere off the root of a reduce).
      void* result = row.result_at_root && sc->rank != c.root ? nullptr : c.recvbuf;
      if (total == 0) {
        p.send = in_place ? COLL_IN_PLACE : c.sendbuf;
        p.recv = result;
      } else if (t->dense(c.count)) {
        p.send = in_place ? COLL_IN_PLACE : at(c.sendbuf, t->true_lb);
        p.recv = result ? at(result, t->true_lb) : nullptr;
      } else {
        *prep = stage(p, *t, c.count, c.datatype, in_place ? c.recvbuf : c.sendbuf, result,
                      size_t(c.count) * size_t(t->size));
        p.send = COLL_IN_PLACE;
        p.recv = p.stage.tmp;
      }
      break;
    }
    case Kind::kBytes:
      p.type = COLL_UINT8;
      p.count = total;
      if (total == 0) {
        p.recv = c.recvbuf;
      } else if (t->dense(c.count)) {
        p.recv = at(c.recvbuf, t->true_lb);
      } else {
        const bool root = sc->rank == c.root;
        *prep = stage(p, *t, c.count, c.datatype, root ? c.recvbuf : nullptr,
                      root ? nullptr : c.recvbuf, total);
        p.recv = p.stage.tmp;
      }
      break;
    case Kind::kNone:
      break;
  }
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
    // The user may free the datatype before the request completes.
    if (p.stage.user && PMPI_Type_dup(p.stage.datatype, &p.stage.datatype) == MPI_SUCCESS)
      p.stage.owned = true;
    rc = make_request(c.fn, c.comm, p.lc, lreq, p, request);
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

bool serve(Call& c, MPI_Request* request, int* rc) {
  const Row& row = kFns[int(c.fn)];
  Plan p;
  Reason why = Reason::kComm;
  int prep = MPI_SUCCESS;
  if (!decide(c, row, p, &why, &prep)) {
    count_passed(c.fn, why);
    return false;
  }
  count_served(c.fn);
  *rc = run(c, row, p, request, prep);
  return true;
}

void Staging::release() {
  std::free(tmp);
  tmp = nullptr;
  if (owned && datatype != MPI_DATATYPE_NULL) PMPI_Type_free(&datatype);
  owned = false;
  datatype = MPI_DATATYPE_NULL;
  user = nullptr;
}

int Staging::unpack() {
  if (!tmp || !user) return MPI_SUCCESS;
  return shim::unpack(tmp, count, datatype, size, extent, user);
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
