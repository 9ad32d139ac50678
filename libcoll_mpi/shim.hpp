// libcoll_mpi: the internal interface between the parts of the PMPI shim.
//
//   state.cpp        configuration (COLL_MPI_*), MPI_Init/MPI_Finalize, the
//                    agreement at init, statistics, MPI progress and the
//                    progress hook, error reporting
//   comms.cpp        an MPI communicator -> its libcoll communicator
//                    (attribute caching, creation at intercepted creators,
//                    lazy creation for communicators congruent to world)
//   types.cpp        datatypes and operators: which calls libcoll can serve
//   user_ops.cpp     MPI_Op_create / MPI_Op_free (and the record of ops made
//                    by Fortran's MPI_OP_CREATE), and the libcoll operators
//                    that serve reductions with user-defined ops
//   requests.cpp     generalized requests, driving libcoll from the MPI
//                    wait/test family
//   collectives.cpp  the dispatch table and the MPI collective entry points
//   fortran.cpp      the mpif.h / use mpi / use mpi_f08 entry points
//
// The one rule everything here keeps: whether a call is served by libcoll or
// passed to PMPI_ depends only on arguments that MPI requires to match on
// every rank of the communicator, on per-communicator state that changes at
// the same call on every rank, and on configuration that is checked to be
// the same everywhere at MPI_Init. Every rank takes the same path.
#pragma once

#include <coll/coll.h>
#include <mpi.h>

#include "coll_mpi_ft.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shim {

// ---- the dispatch table (collectives.cpp) ----------------------------------

// One enumerator per MPI function the shim intercepts: a blocking form, its
// I-form and its persistent form (Open MPI's MPIX_X_init) side by side.
// Adding a collective: three enumerators here, a COLL_MPI_ROWS line in kFns
// (collectives.cpp), its MPI_ entry points there, and its Fortran entry
// points in fortran.cpp.
enum class Fn : int {
  kAllreduce, kIallreduce, kAllreduceInit, kBcast, kIbcast, kBcastInit,
  kBarrier, kIbarrier, kBarrierInit, kReduce, kIreduce, kReduceInit,
  kAllgather, kIallgather, kAllgatherInit, kAllgatherv, kIallgatherv, kAllgathervInit,
  kReduceScatterBlock, kIreduceScatterBlock, kReduceScatterBlockInit,
  kReduceScatter, kIreduceScatter, kReduceScatterInit,
  kGather, kIgather, kGatherInit, kGatherv, kIgatherv, kGathervInit,
  kScatter, kIscatter, kScatterInit, kScatterv, kIscatterv, kScattervInit,
  kAlltoall, kIalltoall, kAlltoallInit, kAlltoallv, kIalltoallv, kAlltoallvInit,
  kScan, kIscan, kScanInit, kExscan, kIexscan, kExscanInit,
  kAlltoallw, kIalltoallw, kAlltoallwInit,  // intercepted and counted, always passed to MPI
  kCount
};
constexpr int kFnCount = int(Fn::kCount);
static_assert(kFnCount <= 64, "Config::selected has a bit per Fn");

// What the arguments of a collective are, for the decision to serve it.
enum class Kind {
  kReduction,  // typed elements and an operator (allreduce, reduce, scan, ...)
  kBytes,      // one buffer moved unchanged: any datatype, as bytes (bcast)
  kMove,       // send and receive buffers moved unchanged (gather, alltoall, ...)
  kNone,       // no data (barrier)
};

// Why a call went to PMPI_ (the statistics count each).
enum class Reason : int {
  kDisabled,     // COLL_MPI_DISABLE=1
  kUnavailable,  // libcoll did not come up on every rank
  kNotSelected,  // not in COLL_MPI_COLLECTIVES
  kInterComm,    // an inter-communicator
  kComm,         // a communicator without a libcoll counterpart
  kCommPending,  // congruent to world, first used by a non-blocking call
  kUserOp,       // a user-defined operator the shim did not see made
  kUserOpType,   // a user-defined operator on elements libcoll cannot carry (user_ops.cpp)
  kOp,           // a predefined operator libcoll lacks (MPI_LAND, MPI_MAXLOC, ...)
  kDatatype,     // an element type libcoll lacks, or several element types
  kOpDatatype,   // the operator is not defined on the datatype (MPI_BAND on float)
  kArgs,         // arguments MPI rejects (count < 0, root out of range): MPI reports it
  kPerPeerTypes, // MPI_Alltoallw: a datatype per peer, which libcoll's calls do not take
  kCount
};
constexpr int kReasonCount = int(Reason::kCount);
const char* reason_name(Reason r);

// The arguments of one MPI collective call. Reductions and bcast use
// count and datatype; the collectives that move a send and a receive buffer
// (gather, alltoall, ...) use count / datatype as the receive side and
// sendcount / sendtype as the send side; the v-forms add their arrays
// (reduce_scatter: recvcounts).
struct Call {
  Fn fn;
  const void* sendbuf = nullptr;
  void* recvbuf = nullptr;  // bcast: the buffer
  int count = 0;
  MPI_Datatype datatype = MPI_DATATYPE_NULL;
  MPI_Op op = MPI_OP_NULL;
  int root = 0;
  MPI_Comm comm = MPI_COMM_NULL;
  int sendcount = 0;
  MPI_Datatype sendtype = MPI_DATATYPE_NULL;
  const int* sendcounts = nullptr;
  const int* sdispls = nullptr;
  const int* recvcounts = nullptr;
  const int* rdispls = nullptr;
};

// A non-contiguous datatype travels through a contiguous copy: packed before
// the libcoll call, unpacked after it, block by block (a v-form's blocks lie
// at their displacements in the user's buffer, packed one after the other).
struct Staging {
  char* tmp = nullptr;     // where libcoll leaves the result, packed
  char* in_tmp = nullptr;  // a packed copy of an input that is no result (freed with it)
  struct Block {
    size_t offset;  // in tmp, bytes
    void* user;     // where its elements go
    MPI_Count count;
  };
  std::vector<Block> blocks;  // what is unpacked (empty: nothing)
  MPI_Datatype datatype = MPI_DATATYPE_NULL;  // of the blocks; our own reference when owned
  MPI_Count size = 0, extent = 0, pad = 0;    // of datatype, and its slots' padding (TypeInfo)
  bool owned = false;                         // datatype is a dup of the user's
  // A persistent request's inputs are packed at every start, not when it
  // is planned (the user fills the buffer between starts): with defer set,
  // the planner records each packing in inputs instead of doing it.
  struct Input {
    char* packed;  // in tmp or in_tmp
    const void* user;
    MPI_Count count;
    MPI_Datatype datatype;  // our own reference once own_types() ran
    MPI_Count size, extent, pad;
  };
  bool defer = false;
  std::vector<Input> inputs;
  std::vector<MPI_Datatype> input_types;  // the dups inputs name (freed with them)
  void release();
  // MPI_SUCCESS or an MPI error code. With pad, tmp's slots are compacted
  // in place (a persistent request packs them again at its next start).
  int unpack();
  int repack();           // packs inputs again: MPI_SUCCESS or an MPI error code
  // The user may free a datatype before the request completes (or, for a
  // persistent request, between its starts): the staging keeps dups.
  void own_types();
};

// The libcoll arguments of a served call. The arrays are libcoll's count and
// displacement arrays (in libcoll elements); a non-blocking call keeps them
// (and the staging) with its request until it completes.
struct Plan {
  coll_comm_t lc = COLL_COMM_NULL;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;      // the one count of the call (the v-forms: what this rank sends or receives)
  coll_datatype_t type = COLL_UINT8;
  coll_op_t op = COLL_SUM;
  int root = 0;
  std::vector<size_t> scounts, sdispls, rcounts, rdispls;
  Staging stage;
  std::shared_ptr<void> user_op;  // a user op's context, held until the call completes
};

struct FnInfo {
  const char* mpi_name;  // "MPI_Allreduce"
  const char* knob;      // its name in COLL_MPI_COLLECTIVES ("allreduce": both forms)
  Kind kind;
  bool nonblocking;  // the I-forms and the persistent forms
  bool persistent;   // MPIX_X_init
  // The libcoll call: coll_X (blocking, done when it returns: the request
  // stays COLL_REQUEST_NULL), or the one that makes the request: coll_iX,
  // or coll_X_init.
  int (*start)(const Plan&, coll_request_t*);
};
const FnInfo& fn_info(Fn fn);

// Serves the call if it can: returns true and sets *rc (the MPI return code)
// when it did; false when the caller must call PMPI_.
bool serve(Call& call, MPI_Request* request, int* rc);

// ---- configuration and process state (state.cpp) ---------------------------

struct Config {
  bool disabled = false;          // COLL_MPI_DISABLE=1
  bool stats = false;             // COLL_MPI_STATS=1
  uint64_t selected = ~0ull;      // bit per Fn (COLL_MPI_COLLECTIVES)
  bool progress_hook = true;      // COLL_MPI_PROGRESS_HOOK=0 turns it off
  std::string selected_text;      // for the statistics header
};
extern Config g_config;
// libcoll is up on every rank and the configuration agreed: calls may be served.
extern std::atomic<bool> g_active;
// libcoll handles may be used (between init and coll_finalize).
extern std::atomic<bool> g_coll_live;
extern int g_thread_level;  // as MPI_Init_thread provided
extern int g_world_rank, g_world_size;

void start(int* argc, char*** argv, int provided);  // after PMPI_Init*
int finish();                                        // MPI_Finalize

// Statistics.
void count_served(Fn fn);
void count_passed(Fn fn, Reason why);
void count_error(Fn fn);     // served, and failed in libcoll or for want of memory
void count_rejected(Fn fn);  // served, and an argument of this rank rejected (plan_call)
enum class CommEvent : int { kDerived, kLazy, kShared, kRefused, kFailed, kCount };
void count_comm(CommEvent e);

// Lets MPI progress once (opal_progress where Open MPI has it, its yield
// when idle off: the caller paces the wait): called by the shim's waits, so
// that a peer blocked in MPI on this rank is not stuck.
void mpi_progress();
// Spin-then-yield pacing for the shim's polling loops.
class Pacer {
 public:
  void pause();
 private:
  uint64_t polls_ = 0;
  double idle_since_ = -1;
  bool napping_ = false;
};

// Reports a libcoll failure through the communicator's MPI error handler:
// MPI_ERRORS_ARE_FATAL prints the libcoll message and aborts, a user handler
// is called, MPI_ERRORS_RETURN returns. The MPI error class is returned.
int error_class(int coll_status);
// Adds ULFM's error classes (coll_mpi_ft.h) to MPI, after PMPI_Init.
void register_ft_classes();
// MPIX_ERR_PROC_FAILED .. MPIX_ERR_REVOKED: ULFM's name and text, or nullptr.
const char* ft_class_text(int cls);
enum class Handler { kFatal, kReturn, kUser };
Handler handler_of(MPI_Comm comm);
int raise_error(MPI_Comm comm, Handler h, const char* fn, int coll_status, const std::string& message);
// The same for an argument this rank's shim rejects before calling libcoll
// (a negative count, a null datatype, ...): cls is the MPI error class.
int raise_class(MPI_Comm comm, Handler h, const char* fn, int cls, const std::string& message);
// Both remember, for this thread, the class they returned and libcoll's
// message: MPI_Error_string of that class appends the message (error_text)
// until the thread's next intercepted collective (forget_error).
void forget_error();
void error_text(int code, char* text, int* len);

// ---- communicators (comms.cpp) ----------------------------------------------

struct ShimComm {
  coll_comm_t lc = COLL_COMM_NULL;
  int rank = 0, size = 0;
  bool owned = false;   // made for this MPI communicator: freed with it
  bool fixed = false;   // one of the shim's own (world, self): never deleted
  bool broken = false;  // a libcoll creation on it failed (agreed): served no more
  bool leak = false;    // not every rank holds it: never coll_comm_free'd
  size_t cost = 0;      // window bytes reserved in the budget
  // The failures MPIX_Comm_failure_ack acknowledged last (recovery.cpp),
  // as ranks of this communicator.
  std::vector<int> acked;
};
void comms_init();      // keyval, the window budget
bool comms_start();     // world and self (collective over world; false: not on every rank)
void comms_finalize();
// The libcoll side of comm, or nullptr (then *why says why). may_create: the
// call is blocking, so a communicator congruent to world may be set up now.
ShimComm* lookup(MPI_Comm comm, bool may_create, Reason* why);
// After a PMPI_ creator that is collective over parent (split, create, cart,
// graph, ...): gives *newcomm its libcoll communicator. rc: what PMPI_ returned.
void derive(MPI_Comm parent, int rc, MPI_Comm* newcomm);
int comm_dup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Info info, bool with_info);
// After PMPI_Comm_create_group, on the members only (a non-member got
// MPI_COMM_NULL and does nothing): gives *newcomm its libcoll communicator
// by coll_comm_create_group over the parent's, agreed over *newcomm.
void derive_group(MPI_Comm parent, int tag, int rc, MPI_Comm* newcomm);
// Gives comm (made by PMPI_ on every member of lc, in lc's order) the
// libcoll communicator lc, which it then owns (MPIX_Comm_shrink).
void adopt(MPI_Comm comm, coll_comm_t lc);
// Every rank of comm takes part: the minimum of v.
int agree(int v, MPI_Comm comm);

// ---- datatypes and operators (types.cpp) ------------------------------------

// kLogical: C and Fortran booleans (logical operators only); kPair: MPI's
// value-index pair types (MAXLOC / MINLOC only).
enum class Category { kSigned, kUnsigned, kFloat, kComplex, kByte, kLogical, kPair, kOther };
struct TypeInfo {
  enum Elements { kEmpty, kOne, kMixed } elements = kMixed;
  Category category = Category::kOther;  // kOne: the element type's
  coll_datatype_t ctype = COLL_UINT8;    // kOne, supported: libcoll's type
  size_t per = 0;                        // libcoll elements per datatype element
  MPI_Count size = 0;                    // bytes of data per datatype element
  MPI_Count extent = 0, true_lb = 0, true_extent = 0;
  // Bytes after each element in libcoll's buffers: 0 but in a user op's
  // view (user_op), whose packed elements lie in larger carrier elements.
  MPI_Count pad = 0;
  // count elements at buf are one block of count * size bytes at buf + true_lb.
  bool dense(MPI_Count count) const {
    return pad == 0 && size == true_extent && (count <= 1 || extent == size);
  }
};
void types_init();
// nullptr: not a datatype we can read (MPI_DATATYPE_NULL, ...).
const TypeInfo* type_info(MPI_Datatype datatype);
// The libcoll operator; false with *why for one libcoll lacks.
bool map_op(MPI_Op op, coll_op_t* out, Reason* why);
bool op_allowed(Category c, coll_op_t op);
// Copies between count elements of datatype at buf and their packed bytes
// at packed, each element's in a slot of size + pad bytes (pad > 0: a user
// op's carrier, the slot's last pad bytes zeroed). unpack with pad > 0
// compacts packed in place first: its slots are gone after.
int pack(const void* buf, MPI_Count count, MPI_Datatype datatype, MPI_Count size,
         MPI_Count extent, MPI_Count pad, char* packed);
int unpack(char* packed, MPI_Count count, MPI_Datatype datatype, MPI_Count size,
           MPI_Count extent, MPI_Count pad, void* buf);
// Between count packed elements of size bytes and slots of size + pad
// bytes; either may be in place (packed == slots).
void spread(const char* packed, MPI_Count count, MPI_Count size, MPI_Count pad, char* slots);
void compact(const char* slots, MPI_Count count, MPI_Count size, MPI_Count pad, char* packed);

// ---- user-defined operators (user_ops.cpp) ----------------------------------

// A user function as Fortran's MPI_OP_CREATE takes it: SUBROUTINE F(INVEC,
// INOUTVEC, LEN, DATATYPE), every argument by reference, LEN an INTEGER and
// DATATYPE the INTEGER handle (Open MPI's ompi_op_fortran_handler_fn_t).
using FortranUserFunction = void(void* invec, void* inoutvec, MPI_Fint* len, MPI_Fint* datatype);
// Records op, which Open MPI's Fortran MPI_OP_CREATE made with fn
// (fortran.cpp), so that reductions with it are served as those with an op
// of MPI_Op_create; the function is called the Fortran way. MPI_Op_free
// (the C entry point, which Fortran's MPI_OP_FREE calls) forgets it.
void fortran_user_op_created(MPI_Op op, FortranUserFunction* fn, bool commute);
enum class UserOpLookup { kFound, kUnknown, kBadType, kType, kNoResources };
// The libcoll operator that applies op (made by MPI_Op_create or Fortran's
// MPI_OP_CREATE through the shim) to datatype (t: its TypeInfo, nullptr
// when it has none), in *keep the reference that keeps it usable while the
// call uses it, and in *view the call's view of the datatype: one libcoll
// element (ctype) an element, in place or packed with pad bytes after each.
// kUnknown: op is not such an op; kBadType: t is nullptr; kType: libcoll
// cannot carry t's elements (over 32 bytes, or overlapping); kNoResources:
// libcoll's table of user operators is full, or no memory for the call's
// scratch (*view is set).
UserOpLookup user_op(MPI_Op op, MPI_Datatype datatype, const TypeInfo* t, TypeInfo* view,
                     coll_op_t* out, std::shared_ptr<void>* keep);

// ---- requests (requests.cpp) ------------------------------------------------

// Waits for a libcoll request, letting MPI progress meanwhile.
int wait_coll(coll_request_t* request);
// A served non-blocking call: the generalized request for the started
// libcoll request (which takes plan's staging).
int make_request(Fn fn, MPI_Comm comm, coll_comm_t lc, coll_request_t lreq, Plan& plan,
                 MPI_Request* request);
// Advances every outstanding libcoll request; completes the generalized
// request of each that finished. try_only: give up if another thread drives.
int drive(bool try_only);
// A served persistent call (MPIX_X_init): *request stands for the inactive
// libcoll persistent request lreq (which takes plan's staging and arrays).
int make_persistent(Fn fn, MPI_Comm comm, coll_comm_t lc, coll_request_t lreq, Plan& plan,
                    MPI_Request* request);
// MPI_Start / MPI_Request_free of one of those: true and *rc when *request
// is the shim's, false when it is MPI's own.
bool start_persistent(MPI_Request* request, int* rc);
bool free_persistent(MPI_Request* request, int* rc);
bool persistent_live();        // any persistent request of the shim exists
void persistent_finalize();    // after drain_requests: the ones never freed
bool requests_outstanding();
// Whether a served operation on libcoll communicator lc has not completed
// here yet (those that finished are completed first).
bool requests_pending_on(coll_comm_t lc);
void drain_requests();         // before coll_finalize
void forget_comm(MPI_Comm comm);  // its requests no longer name it (MPI_Comm_free)
void requests_init();

}  // namespace shim
