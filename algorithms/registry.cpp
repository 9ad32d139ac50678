// The collectives: one descriptor each (algorithms.hpp), and the automatic
// choice among their algorithms.
#include <coll/coll.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

#include "algorithms.hpp"
#include "error.hpp"
#include "selection.hpp"
#include "user_op.hpp"

namespace coll {
namespace {

constexpr Algorithm kAllreduce[] = {
    {"ring", ring_allreduce},
    {"tree", tree_allreduce},
    {"binomial", binomial_allreduce},
    {"recursive_doubling", recursive_doubling_allreduce, recursive_doubling_allreduce_now},
    {"rabenseifner", rabenseifner_allreduce},
    {"direct", direct_allreduce},
    {"hierarchical", hierarchical_allreduce},
};
constexpr Algorithm kBcast[] = {
    {"ring", ring_bcast, ring_bcast_now},
    {"binomial", binomial_bcast},
    {"tree", tree_bcast},
    {"scatter_allgather", scatter_allgather_bcast},
    {"linear", linear_bcast, linear_bcast_now},
    {"hierarchical", hierarchical_bcast},
};
constexpr Algorithm kBarrier[] = {
    {"tree", tree_barrier, tree_barrier_now},
    {"dissemination", dissemination_barrier, dissemination_barrier_now},
    {"hierarchical", hierarchical_barrier},
};
constexpr Algorithm kAllgather[] = {
    {"ring", ring_allgather},
    {"bruck", bruck_allgather},
    {"linear", linear_allgather, linear_allgather_now},
};
constexpr Algorithm kReduce[] = {
    {"binomial", binomial_reduce, binomial_reduce_now},
    {"reduce_scatter_gather", reduce_scatter_gather_reduce},
    {"hierarchical", hierarchical_reduce},
    {"linear", linear_reduce, linear_reduce_now},
};
constexpr Algorithm kAllgatherv[] = {
    {"ring", ring_allgatherv},
    {"bruck", bruck_allgatherv},
    {"linear", linear_allgatherv, linear_allgatherv_now},
};
constexpr Algorithm kReduceScatterBlock[] = {
    {"ring", ring_reduce_scatter_block},
    {"recursive_halving", recursive_halving_reduce_scatter_block},
    {"linear", linear_reduce_scatter_block, linear_reduce_scatter_block_now},
};
constexpr Algorithm kReduceScatter[] = {
    {"ring", ring_reduce_scatter},
    {"recursive_halving", recursive_halving_reduce_scatter},
    {"linear", linear_reduce_scatter, linear_reduce_scatter_now},
};
constexpr Algorithm kGather[] = {
    {"binomial", binomial_gather},
    {"linear", linear_gather, linear_gather_now},
};
// gatherv and scatterv: only the root knows the counts, so no rank can
// forward another's block (a tree would need the sizes first).
constexpr Algorithm kGatherv[] = {
    {"linear", linear_gatherv, linear_gatherv_now},
};
constexpr Algorithm kScatter[] = {
    {"binomial", binomial_scatter},
    {"linear", linear_scatter, linear_scatter_now},
};
constexpr Algorithm kScatterv[] = {
    {"linear", linear_scatterv, linear_scatterv_now},
};
constexpr Algorithm kAlltoall[] = {
    {"pairwise", pairwise_alltoall},
    {"bruck", bruck_alltoall},
    {"linear", linear_alltoall, linear_alltoall_now},
};
constexpr Algorithm kAlltoallv[] = {
    {"pairwise", pairwise_alltoallv},
    {"linear", linear_alltoallv, linear_alltoallv_now},
};
constexpr Algorithm kScan[] = {
    {"recursive_doubling", recursive_doubling_scan},
    {"linear", linear_scan},
    {"direct", direct_scan, direct_scan_now},
};
constexpr Algorithm kExscan[] = {
    {"recursive_doubling", recursive_doubling_exscan},
    {"linear", linear_exscan},
    {"direct", direct_exscan, direct_exscan_now},
};

// Not in the tables: never the table's or a knob's choice, only
// in_order_algorithm's (in_order_reduce.cpp says why they exist).
constexpr Algorithm kInOrderReduce = {"in_order", in_order_reduce};
constexpr Algorithm kInOrderReduceScatterBlock = {"in_order", in_order_reduce_scatter_block};
constexpr Algorithm kInOrderReduceScatter = {"in_order", in_order_reduce_scatter};

bool overlaps(const void* a, const void* b, size_t len) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  // Written so that nothing wraps around: x + len may exceed the address
  // space for a huge (rejected elsewhere) or hostile length.
  return x < y ? y - x < len : x - y < len;
}

// Whether [a, a + alen) and [b, b + blen) share a byte (empty ranges share
// none).
bool ranges_overlap(const void* a, size_t alen, const void* b, size_t blen) {
  if (alen == 0 || blen == 0) return false;
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y ? y - x < alen : x - y < blen;
}

void check_datatype(Args& a, const char* name) {
  if (!valid_datatype(a.datatype))
    fail(COLL_ERR_INVALID_ARG, "%s: unknown datatype %d", name, a.datatype);
  a.elem_size = datatype_size(a.datatype);
}

// Where user memory ends. No 64-bit Linux gives a process more than 2^56
// bytes of address space (x86-64 with 5-level paging; arm64 has at most 52
// bits, riscv64 sv57 56, ppc64 52), so a larger byte count, or a buffer
// whose end lies past it, is not memory: refused before the algorithm reads
// or writes past what was given (2^61 bytes passed PTRDIFF_MAX's test and
// read past the buffer). Elsewhere only a buffer whose end wraps is
// refused. And no object is larger than PTRDIFF_MAX.
#if defined(__x86_64__) || defined(__aarch64__) || defined(__riscv) || defined(__powerpc64__)
constexpr uintptr_t kAddressEnd = uintptr_t{1} << 56;
#else
constexpr uintptr_t kAddressEnd = UINTPTR_MAX;
#endif
constexpr size_t kMaxBytes = std::min<uintmax_t>(kAddressEnd, PTRDIFF_MAX);

// Whether count elements (x multiplier) are more bytes than the address
// space holds. A multiplication that reports overflow, not a division: two
// 64-bit divisions were a tenth of the instructions' time of a small call.
bool too_many_elements(const Args& a, size_t count, size_t multiplier = 1) {
  size_t bytes = 0;
  return __builtin_mul_overflow(count, a.elem_size * multiplier, &bytes) || bytes > kMaxBytes;
}

// The element size, and the byte count, checked against overflow.
void check_count(Args& a, const char* name, size_t multiplier = 1) {
  check_datatype(a, name);
  if (too_many_elements(a, a.count, multiplier)) {
    if (multiplier == 1)
      fail(COLL_ERR_INVALID_ARG, "%s: count %zu x %zu bytes exceeds the address space", name,
           a.count, a.elem_size);
    fail(COLL_ERR_INVALID_ARG, "%s: count %zu x %zu bytes x %zu ranks exceeds the address space",
         name, a.count, a.elem_size, multiplier);
  }
  a.bytes = a.count * a.elem_size;
  a.select_bytes = a.bytes;
}

// A count of its own (sendcount, recvcount), checked the same way.
void check_scalar_count(const Args& a, const char* name, const char* what, size_t count) {
  if (too_many_elements(a, count))
    fail(COLL_ERR_INVALID_ARG, "%s: %s %zu x %zu bytes exceeds the address space", name, what,
         count, a.elem_size);
}

void check_op(Args& a, const char* name) {
  if (is_user_op_handle(a.op)) [[unlikely]] {
    // The function and context are taken now: an operation in flight keeps
    // them when the op is freed (MPI lets a program free an op in use).
    UserOp u;
    if (!find_user_op(a.op, u))
      fail(COLL_ERR_INVALID_ARG, "%s: op %d is not a live user operator (freed already?)", name,
           a.op);
    a.reduce = Reducer{nullptr, u.fn, u.ctx, a.datatype, a.elem_size};
    a.commutative = u.commutative;
    return;
  }
  if (!valid_op(a.op)) fail(COLL_ERR_INVALID_ARG, "%s: unknown reduction op %d", name, a.op);
  a.reduce = Reducer{reduce_function(a.datatype, a.op)};
  if (!a.reduce)
    fail(COLL_ERR_INVALID_ARG, "%s: op %s is not defined on datatype %s (%s)", name,
         op_name(a.op), datatype_name(a.datatype), op_rule(a.datatype, a.op));
}

void check_root(const Args& a, int size, const char* name) {
  if (a.root < 0 || a.root >= size)
    fail(COLL_ERR_INVALID_ARG, "%s: root %d out of range [0, %d)", name, a.root, size);
}

// One buffer argument, after COLL_IN_PLACE was resolved where the
// collective takes it: one still COLL_IN_PLACE is in an argument that does
// not take it (refused at any count, so that every rank passing it is told
// alike); with bytes to move it must not be NULL, and it must end within the
// address space (a hostile pointer near the top would wrap).
void check_buffer(const void* buf, size_t bytes, const char* name, const char* what) {
  if (buf == COLL_IN_PLACE)
    fail(COLL_ERR_INVALID_ARG, "%s: COLL_IN_PLACE passed as %s, which does not take it", name,
         what);
  if (bytes == 0) return;
  if (!buf) fail(COLL_ERR_INVALID_ARG, "%s: NULL %s with %zu bytes", name, what, bytes);
  // (bytes > 0 here: a start past the end leaves room for none.)
  const uintptr_t start = std::min(reinterpret_cast<uintptr_t>(buf), kAddressEnd);
  if (bytes > kAddressEnd - start)
    fail(COLL_ERR_INVALID_ARG, "%s: %s %p + %zu bytes exceeds the address space", name, what, buf,
         bytes);
}

// A counts or displacements array: read before anything else, so
// COLL_IN_PLACE there (address 1) must not be.
void check_array(const size_t* array, const char* name, const char* what) {
  if (!array) fail(COLL_ERR_INVALID_ARG, "%s: NULL %s", name, what);
  if (static_cast<const void*>(array) == COLL_IN_PLACE)
    fail(COLL_ERR_INVALID_ARG, "%s: COLL_IN_PLACE passed as %s, which does not take it", name,
         what);
}

// The blocks of a v-collective's buffer: counts[i] elements at displs[i],
// i < size. lo .. hi: the bytes they span (lo = hi = 0 when all are empty);
// total: the sum of the counts.
struct Extent {
  size_t lo = 0, hi = 0;
  size_t total = 0;
  size_t bytes() const { return hi - lo; }
};

Extent check_blocks(const Args& a, int size, const char* name, const char* counts_name,
                    const size_t* counts, const char* displs_name, const size_t* displs) {
  check_array(counts, name, counts_name);
  if (displs_name) check_array(displs, name, displs_name);
  const size_t limit = kMaxBytes / a.elem_size;  // elements (one division a call)
  Extent e;
  bool any = false;
  for (int i = 0; i < size; ++i) {
    const size_t c = counts[i];
    if (c > limit || e.total + c > limit)
      fail(COLL_ERR_INVALID_ARG, "%s: %s[%d] = %zu (sum %zu) x %zu bytes exceeds the address space",
           name, counts_name, i, c, e.total, a.elem_size);
    e.total += c;
    if (!displs || c == 0) continue;
    const size_t d = displs[i];
    if (d > limit || c > limit - d)
      fail(COLL_ERR_INVALID_ARG,
           "%s: %s[%d] = %zu + %s[%d] = %zu x %zu bytes exceeds the address space", name,
           displs_name, i, d, counts_name, i, c, a.elem_size);
    const size_t lo = d * a.elem_size, hi = (d + c) * a.elem_size;
    e.lo = any ? std::min(e.lo, lo) : lo;
    e.hi = any ? std::max(e.hi, hi) : hi;
    any = true;
  }
  return e;
}

char* at(void* buf, size_t bytes) { return static_cast<char*>(buf) + bytes; }
const char* at(const void* buf, size_t bytes) { return static_cast<const char*>(buf) + bytes; }

// Aliasing is judged by rules that every rank evaluates alike on alike
// arguments, never by where this rank's own block lies (allgather(buf, buf)
// was accepted at rank 0 only, whose block starts at buf, and the others'
// refusal left it alone in the call):
//  - allreduce, reduce, scan, exscan: sendbuf == recvbuf means in place;
//    any other overlap is refused.
//  - the others: sendbuf == recvbuf (not NULL) is refused whatever this
//    rank's counts, and so is any byte that the data sent shares with the
//    data received; COLL_IN_PLACE is the way to work in place. The one
//    exception is a call that moves nothing at all (`moved`, the bytes of
//    the whole call, which every rank knows alike: kMovedVaries where the
//    ranks' counts differ, as in the v-forms with per-rank counts): any
//    buffers will do there, as in MPI (mpi4py passes one empty array's
//    address for both).
constexpr size_t kMovedVaries = SIZE_MAX;
void refuse_same_buffer(const void* sendbuf, const void* recvbuf, const char* name,
                        size_t moved) {
  if (sendbuf && sendbuf == recvbuf && moved != 0)
    fail(COLL_ERR_INVALID_ARG,
         "%s: sendbuf == recvbuf (pass COLL_IN_PLACE, where the collective takes it, to work in "
         "place)",
         name);
}

void check_allreduce(Args& a, int /*size*/, int /*rank*/) {
  const char* name = "allreduce";
  check_count(a, name);
  check_op(a, name);
  check_buffer(a.recvbuf, a.bytes, name, "recvbuf");
  if (a.sendbuf == COLL_IN_PLACE) {
    a.sendbuf = a.recvbuf;
    a.in_place = true;
  }
  check_buffer(a.sendbuf, a.bytes, name, "sendbuf");
  if (a.sendbuf != a.recvbuf && overlaps(a.sendbuf, a.recvbuf, a.bytes))
    fail(COLL_ERR_INVALID_ARG,
         "allreduce: sendbuf and recvbuf overlap (use COLL_IN_PLACE to reduce in place)");
}

void check_bcast(Args& a, int size, int /*rank*/) {
  check_count(a, "bcast");
  check_root(a, size, "bcast");
  check_buffer(a.recvbuf, a.bytes, "bcast", "buffer");
}

void check_barrier(Args& a, int /*size*/, int /*rank*/) {
  a.bytes = 0;
  a.select_bytes = 0;
}

void check_allgather(Args& a, int size, int rank) {
  const char* name = "allgather";
  check_count(a, name, size_t(size));
  const size_t all = a.bytes * size_t(size);
  check_buffer(a.recvbuf, all, name, "recvbuf");
  if (a.sendbuf == COLL_IN_PLACE) {
    a.sendbuf = at(a.recvbuf, size_t(rank) * a.bytes);
    a.in_place = true;
    return;
  }
  check_buffer(a.sendbuf, a.bytes, name, "sendbuf");
  refuse_same_buffer(a.sendbuf, a.recvbuf, name, a.bytes);
  if (ranges_overlap(a.sendbuf, a.bytes, a.recvbuf, all))
    fail(COLL_ERR_INVALID_ARG, "allgather: sendbuf overlaps recvbuf (use COLL_IN_PLACE)");
}

// reduce, scan, exscan: one vector in, one out (reduce: out at the root).
void check_vector_reduction(Args& a, const char* name, bool rooted, int size, int rank) {
  check_count(a, name);
  check_op(a, name);
  if (rooted) check_root(a, size, name);
  const bool gets_result = !rooted || rank == a.root;
  // recvbuf is significant at the root only, but COLL_IN_PLACE is never
  // a reduce's recvbuf: refused on every rank that passes it.
  check_buffer(a.recvbuf, gets_result ? a.bytes : 0, name, "recvbuf");
  if (!gets_result) a.recvbuf = nullptr;
  if (a.sendbuf == COLL_IN_PLACE) {
    if (!gets_result)
      fail(COLL_ERR_INVALID_ARG,
           "%s: COLL_IN_PLACE passed as sendbuf at rank %d, which is not the root (%d)", name, rank,
           a.root);
    a.sendbuf = a.recvbuf;
    a.in_place = true;
  }
  // As for allreduce, passing the same buffer twice means in place.
  if (gets_result && a.sendbuf == a.recvbuf) a.in_place = true;
  check_buffer(a.sendbuf, a.bytes, name, "sendbuf");
  if (gets_result && a.sendbuf != a.recvbuf && overlaps(a.sendbuf, a.recvbuf, a.bytes))
    fail(COLL_ERR_INVALID_ARG, "%s: sendbuf and recvbuf overlap (use COLL_IN_PLACE)", name);
}
void check_reduce(Args& a, int size, int rank) {
  check_vector_reduction(a, "reduce", true, size, rank);
}
void check_scan(Args& a, int size, int rank) {
  check_vector_reduction(a, "scan", false, size, rank);
}
void check_exscan(Args& a, int size, int rank) {
  check_vector_reduction(a, "exscan", false, size, rank);
}

void check_allgatherv(Args& a, int size, int rank) {
  const char* name = "allgatherv";
  check_datatype(a, name);
  const Extent e = check_blocks(a, size, name, "recvcounts", a.recvcounts, "displs", a.rdispls);
  check_buffer(a.recvbuf, e.hi, name, "recvbuf");
  const size_t own = a.recvcounts[rank];
  if (a.sendbuf == COLL_IN_PLACE) {
    a.sendbuf = own ? at(a.recvbuf, a.rdispls[rank] * a.elem_size) : a.recvbuf;
    a.sendcount = own;
    a.in_place = true;
  } else {
    check_scalar_count(a, name, "sendcount", a.sendcount);
    if (a.sendcount != own)
      fail(COLL_ERR_INVALID_ARG, "allgatherv: rank %d sends %zu elements but recvcounts[%d] = %zu",
           rank, a.sendcount, rank, own);
    check_buffer(a.sendbuf, own * a.elem_size, name, "sendbuf");
    refuse_same_buffer(a.sendbuf, a.recvbuf, name, e.total * a.elem_size);
    if (ranges_overlap(a.sendbuf, own * a.elem_size, at(a.recvbuf, e.lo), e.bytes()))
      fail(COLL_ERR_INVALID_ARG, "allgatherv: sendbuf overlaps recvbuf (use COLL_IN_PLACE)");
  }
  a.count = e.total;
  a.bytes = std::max<size_t>(e.hi, own * a.elem_size);
  a.select_bytes = e.total * a.elem_size / size_t(size);
}

void check_reduce_scatter_block(Args& a, int size, int /*rank*/) {
  const char* name = "reduce_scatter_block";
  check_count(a, name, size_t(size));
  check_op(a, name);
  const size_t input = a.bytes * size_t(size);
  if (a.sendbuf == COLL_IN_PLACE) {
    check_buffer(a.recvbuf, input, name, "recvbuf");
    a.sendbuf = a.recvbuf;
    a.in_place = true;
    return;
  }
  check_buffer(a.recvbuf, a.bytes, name, "recvbuf");
  check_buffer(a.sendbuf, input, name, "sendbuf");
  refuse_same_buffer(a.sendbuf, a.recvbuf, name, a.bytes);
  if (ranges_overlap(a.sendbuf, input, a.recvbuf, a.bytes))
    fail(COLL_ERR_INVALID_ARG, "%s: sendbuf and recvbuf overlap (use COLL_IN_PLACE)", name);
}

void check_reduce_scatter(Args& a, int size, int rank) {
  const char* name = "reduce_scatter";
  check_datatype(a, name);
  check_op(a, name);
  const Extent e = check_blocks(a, size, name, "recvcounts", a.recvcounts, nullptr, nullptr);
  const size_t input = e.total * a.elem_size, own = a.recvcounts[rank] * a.elem_size;
  if (a.sendbuf == COLL_IN_PLACE) {
    a.sendbuf = a.recvbuf;
    a.in_place = true;
  }
  check_buffer(a.recvbuf, a.in_place ? input : own, name, "recvbuf");
  check_buffer(a.sendbuf, input, name, "sendbuf");
  if (!a.in_place) {
    refuse_same_buffer(a.sendbuf, a.recvbuf, name, input);
    if (ranges_overlap(a.sendbuf, input, a.recvbuf, own))
      fail(COLL_ERR_INVALID_ARG, "%s: sendbuf and recvbuf overlap (use COLL_IN_PLACE)", name);
  }
  a.count = e.total;
  a.recvcount = a.recvcounts[rank];  // for buffers(), which is not told the rank
  a.bytes = input;
  a.select_bytes = input / size_t(size);
}

void check_gather(Args& a, int size, int rank) {
  const char* name = "gather";
  check_count(a, name, size_t(size));
  check_root(a, size, name);
  if (rank != a.root) {
    if (a.sendbuf == COLL_IN_PLACE)
      fail(COLL_ERR_INVALID_ARG,
           "gather: COLL_IN_PLACE passed as sendbuf at rank %d, which is not the root (%d)", rank,
           a.root);
    // recvbuf is significant at the root only, and MPI programs pass
    // anything there (often sendbuf again, beside MPI_IN_PLACE at the
    // root): it is not judged for aliasing here. gather(buf, buf) is
    // refused at the root, as any root-only argument is.
    check_buffer(a.recvbuf, 0, name, "recvbuf");
    a.recvbuf = nullptr;
    check_buffer(a.sendbuf, a.bytes, name, "sendbuf");
    return;
  }
  const size_t all = a.bytes * size_t(size);
  check_buffer(a.recvbuf, all, name, "recvbuf");
  if (a.sendbuf == COLL_IN_PLACE) {
    a.sendbuf = at(a.recvbuf, size_t(rank) * a.bytes);
    a.in_place = true;
    return;
  }
  check_buffer(a.sendbuf, a.bytes, name, "sendbuf");
  refuse_same_buffer(a.sendbuf, a.recvbuf, name, a.bytes);
  if (ranges_overlap(a.sendbuf, a.bytes, a.recvbuf, all))
    fail(COLL_ERR_INVALID_ARG, "gather: sendbuf overlaps recvbuf (use COLL_IN_PLACE)");
}

void check_gatherv(Args& a, int size, int rank) {
  const char* name = "gatherv";
  check_datatype(a, name);
  check_root(a, size, name);
  if (rank != a.root) {
    if (a.sendbuf == COLL_IN_PLACE)
      fail(COLL_ERR_INVALID_ARG,
           "gatherv: COLL_IN_PLACE passed as sendbuf at rank %d, which is not the root (%d)", rank,
           a.root);
    check_scalar_count(a, name, "sendcount", a.sendcount);
    check_buffer(a.sendbuf, a.sendcount * a.elem_size, name, "sendbuf");
    check_buffer(a.recvbuf, 0, name, "recvbuf");  // as in gather
    // Significant at the root only.
    a.recvbuf = nullptr;
    a.recvcounts = a.rdispls = nullptr;
    a.count = a.sendcount;
    a.bytes = a.sendcount * a.elem_size;
    return;
  }
  const Extent e = check_blocks(a, size, name, "recvcounts", a.recvcounts, "displs", a.rdispls);
  check_buffer(a.recvbuf, e.hi, name, "recvbuf");
  const size_t own = a.recvcounts[rank];
  if (a.sendbuf == COLL_IN_PLACE) {
    a.sendbuf = own ? at(a.recvbuf, a.rdispls[rank] * a.elem_size) : a.recvbuf;
    a.sendcount = own;
    a.in_place = true;
  } else {
    check_scalar_count(a, name, "sendcount", a.sendcount);
    if (a.sendcount != own)
      fail(COLL_ERR_INVALID_ARG, "gatherv: the root sends %zu elements but recvcounts[%d] = %zu",
           a.sendcount, rank, own);
    check_buffer(a.sendbuf, own * a.elem_size, name, "sendbuf");
    refuse_same_buffer(a.sendbuf, a.recvbuf, name, kMovedVaries);
    if (ranges_overlap(a.sendbuf, own * a.elem_size, at(a.recvbuf, e.lo), e.bytes()))
      fail(COLL_ERR_INVALID_ARG, "gatherv: sendbuf overlaps recvbuf (use COLL_IN_PLACE)");
  }
  a.count = e.total;
  a.bytes = std::max<size_t>(e.hi, own * a.elem_size);
}

void check_scatter(Args& a, int size, int rank) {
  const char* name = "scatter";
  check_count(a, name, size_t(size));
  check_root(a, size, name);
  if (a.sendbuf == COLL_IN_PLACE)
    fail(COLL_ERR_INVALID_ARG,
         "scatter: COLL_IN_PLACE passed as sendbuf (it is recvbuf's, at the root)");
  if (rank != a.root) {
    if (a.recvbuf == COLL_IN_PLACE)
      fail(COLL_ERR_INVALID_ARG,
           "scatter: COLL_IN_PLACE passed as recvbuf at rank %d, which is not the root (%d)", rank,
           a.root);
    a.sendbuf = nullptr;  // significant at the root only (not judged: as in gather)
    check_buffer(a.recvbuf, a.bytes, name, "recvbuf");
    return;
  }
  const size_t all = a.bytes * size_t(size);
  check_buffer(a.sendbuf, all, name, "sendbuf");
  if (a.recvbuf == COLL_IN_PLACE) {
    a.recvbuf = const_cast<char*>(at(a.sendbuf, size_t(rank) * a.bytes));
    a.in_place = true;
    return;
  }
  check_buffer(a.recvbuf, a.bytes, name, "recvbuf");
  refuse_same_buffer(a.sendbuf, a.recvbuf, name, a.bytes);
  if (ranges_overlap(a.recvbuf, a.bytes, a.sendbuf, all))
    fail(COLL_ERR_INVALID_ARG, "scatter: recvbuf overlaps sendbuf (use COLL_IN_PLACE)");
}

void check_scatterv(Args& a, int size, int rank) {
  const char* name = "scatterv";
  check_datatype(a, name);
  check_root(a, size, name);
  if (a.sendbuf == COLL_IN_PLACE)
    fail(COLL_ERR_INVALID_ARG,
         "scatterv: COLL_IN_PLACE passed as sendbuf (it is recvbuf's, at the root)");
  if (rank != a.root) {
    if (a.recvbuf == COLL_IN_PLACE)
      fail(COLL_ERR_INVALID_ARG,
           "scatterv: COLL_IN_PLACE passed as recvbuf at rank %d, which is not the root (%d)", rank,
           a.root);
    check_scalar_count(a, name, "recvcount", a.recvcount);  // sendbuf not judged: as in gather
    check_buffer(a.recvbuf, a.recvcount * a.elem_size, name, "recvbuf");
    // Significant at the root only.
    a.sendbuf = nullptr;
    a.sendcounts = a.sdispls = nullptr;
    a.count = a.recvcount;
    a.bytes = a.recvcount * a.elem_size;
    return;
  }
  const Extent e = check_blocks(a, size, name, "sendcounts", a.sendcounts, "displs", a.sdispls);
  check_buffer(a.sendbuf, e.hi, name, "sendbuf");
  const size_t own = a.sendcounts[rank];
  if (a.recvbuf == COLL_IN_PLACE) {
    a.recvbuf = const_cast<void*>(own ? at(a.sendbuf, a.sdispls[rank] * a.elem_size) : a.sendbuf);
    a.recvcount = own;
    a.in_place = true;
  } else {
    check_scalar_count(a, name, "recvcount", a.recvcount);
    if (a.recvcount != own)
      fail(COLL_ERR_INVALID_ARG,
           "scatterv: the root receives %zu elements but sendcounts[%d] = %zu", a.recvcount, rank,
           own);
    check_buffer(a.recvbuf, own * a.elem_size, name, "recvbuf");
    refuse_same_buffer(a.sendbuf, a.recvbuf, name, kMovedVaries);
    if (ranges_overlap(a.recvbuf, own * a.elem_size, at(a.sendbuf, e.lo), e.bytes()))
      fail(COLL_ERR_INVALID_ARG, "scatterv: recvbuf overlaps sendbuf (use COLL_IN_PLACE)");
  }
  a.count = e.total;
  a.bytes = std::max<size_t>(e.hi, own * a.elem_size);
}

void check_alltoall(Args& a, int size, int /*rank*/) {
  const char* name = "alltoall";
  check_count(a, name, size_t(size));
  const size_t all = a.bytes * size_t(size);
  check_buffer(a.recvbuf, all, name, "recvbuf");
  if (a.sendbuf == COLL_IN_PLACE) {
    a.sendbuf = a.recvbuf;
    a.in_place = true;
    return;
  }
  check_buffer(a.sendbuf, all, name, "sendbuf");
  refuse_same_buffer(a.sendbuf, a.recvbuf, name, a.bytes);
  if (ranges_overlap(a.sendbuf, all, a.recvbuf, all))
    fail(COLL_ERR_INVALID_ARG, "alltoall: sendbuf and recvbuf overlap (use COLL_IN_PLACE)");
}

void check_alltoallv(Args& a, int size, int rank) {
  const char* name = "alltoallv";
  check_datatype(a, name);
  const Extent re = check_blocks(a, size, name, "recvcounts", a.recvcounts, "rdispls", a.rdispls);
  check_buffer(a.recvbuf, re.hi, name, "recvbuf");
  Extent se = re;
  if (a.sendbuf == COLL_IN_PLACE) {
    // The data to send is where the received data goes.
    a.sendbuf = a.recvbuf;
    a.sendcounts = a.recvcounts;
    a.sdispls = a.rdispls;
    a.in_place = true;
  } else {
    se = check_blocks(a, size, name, "sendcounts", a.sendcounts, "sdispls", a.sdispls);
    check_buffer(a.sendbuf, se.hi, name, "sendbuf");
    if (a.sendcounts[rank] != a.recvcounts[rank])
      fail(COLL_ERR_INVALID_ARG,
           "alltoallv: rank %d sends itself %zu elements (sendcounts[%d]) but receives %zu "
           "(recvcounts[%d])",
           rank, a.sendcounts[rank], rank, a.recvcounts[rank], rank);
    refuse_same_buffer(a.sendbuf, a.recvbuf, name, kMovedVaries);
    if (ranges_overlap(at(a.sendbuf, se.lo), se.bytes(), at(a.recvbuf, re.lo), re.bytes()))
      fail(COLL_ERR_INVALID_ARG, "alltoallv: sendbuf and recvbuf overlap (use COLL_IN_PLACE)");
  }
  a.count = se.total + re.total;
  a.bytes = std::max(se.hi, re.hi);
}

bool no_data(const Args& a) { return a.count == 0; }
bool never_empty(const Args&) { return false; }

// One rank: its input is its result (allreduce, reduce, scan, gather,
// scatter, allgather, alltoall, reduce_scatter_block: `bytes` of it).
void local_copy(const Args& a) {
  if (a.sendbuf != a.recvbuf) std::memmove(a.recvbuf, a.sendbuf, a.bytes);
}
void local_nothing(const Args&) {}
// allgatherv, gatherv: the one block to its place.
void local_gatherv(const Args& a) {
  if (a.recvcounts[0] == 0) return;
  char* dst = at(a.recvbuf, a.rdispls[0] * a.elem_size);
  if (a.sendbuf != dst) std::memmove(dst, a.sendbuf, a.recvcounts[0] * a.elem_size);
}
void local_scatterv(const Args& a) {
  if (a.sendcounts[0] == 0) return;
  const char* src = at(a.sendbuf, a.sdispls[0] * a.elem_size);
  if (a.recvbuf != src) std::memmove(a.recvbuf, src, a.sendcounts[0] * a.elem_size);
}
void local_reduce_scatter(const Args& a) {
  if (a.sendbuf != a.recvbuf) std::memcpy(a.recvbuf, a.sendbuf, a.recvcounts[0] * a.elem_size);
}
void local_alltoallv(const Args& a) {
  if (a.in_place || a.recvcounts[0] == 0) return;
  std::memcpy(at(a.recvbuf, a.rdispls[0] * a.elem_size), at(a.sendbuf, a.sdispls[0] * a.elem_size),
              a.recvcounts[0] * a.elem_size);
}

using Buffers = std::vector<std::pair<const void*, size_t>>;
Buffers buffers_allreduce(const Args& a, int) {
  if (a.sendbuf == a.recvbuf) return {{a.recvbuf, a.bytes}};
  return {{a.sendbuf, a.bytes}, {a.recvbuf, a.bytes}};
}
Buffers buffers_bcast(const Args& a, int) { return {{a.recvbuf, a.bytes}}; }
Buffers buffers_none(const Args&, int) { return {}; }
Buffers buffers_allgather(const Args& a, int size) {
  return {{a.sendbuf, a.bytes}, {a.recvbuf, a.bytes * size_t(size)}};
}
// reduce, scan, exscan: recvbuf is nullptr where it is not significant.
Buffers buffers_vector(const Args& a, int) {
  Buffers b{{a.sendbuf, a.bytes}};
  if (a.recvbuf && a.recvbuf != a.sendbuf) b.push_back({a.recvbuf, a.bytes});
  return b;
}
// The span of v-blocks (nothing where counts is nullptr: not significant).
std::pair<const void*, size_t> span_of(const void* buf, const Args& a, const size_t* counts,
                                       const size_t* displs, int size) {
  if (!buf || !counts) return {nullptr, 0};
  size_t lo = SIZE_MAX, hi = 0;
  for (int i = 0; i < size; ++i) {
    if (counts[i] == 0) continue;
    lo = std::min(lo, displs ? displs[i] : 0);
    hi = std::max(hi, (displs ? displs[i] : 0) + counts[i]);
  }
  if (hi == 0) return {nullptr, 0};
  return {at(buf, lo * a.elem_size), (hi - lo) * a.elem_size};
}
Buffers buffers_allgatherv(const Args& a, int size) {
  return {{a.sendbuf, a.sendcount * a.elem_size},
          span_of(a.recvbuf, a, a.recvcounts, a.rdispls, size)};
}
Buffers buffers_gather(const Args& a, int size) {
  Buffers b{{a.sendbuf, a.bytes}};
  if (a.recvbuf) b.push_back({a.recvbuf, a.bytes * size_t(size)});
  return b;
}
Buffers buffers_gatherv(const Args& a, int size) {
  return {{a.sendbuf, a.sendcount * a.elem_size},
          span_of(a.recvbuf, a, a.recvcounts, a.rdispls, size)};
}
Buffers buffers_scatter(const Args& a, int size) {
  Buffers b{{a.recvbuf, a.bytes}};
  if (a.sendbuf) b.push_back({a.sendbuf, a.bytes * size_t(size)});
  return b;
}
Buffers buffers_scatterv(const Args& a, int size) {
  return {{a.recvbuf, a.recvcount * a.elem_size},
          span_of(a.sendbuf, a, a.sendcounts, a.sdispls, size)};
}
Buffers buffers_reduce_scatter_block(const Args& a, int size) {
  const size_t input = a.bytes * size_t(size);
  if (a.in_place) return {{a.recvbuf, input}};
  return {{a.sendbuf, input}, {a.recvbuf, a.bytes}};
}
Buffers buffers_reduce_scatter(const Args& a, int) {
  // In place, recvbuf holds the whole input.
  if (a.in_place) return {{a.recvbuf, a.bytes}};
  return {{a.sendbuf, a.bytes}, {a.recvbuf, a.recvcount * a.elem_size}};
}
Buffers buffers_alltoall(const Args& a, int size) {
  const size_t all = a.bytes * size_t(size);
  if (a.in_place) return {{a.recvbuf, all}};
  return {{a.sendbuf, all}, {a.recvbuf, all}};
}
Buffers buffers_alltoallv(const Args& a, int size) {
  if (a.in_place) return {span_of(a.recvbuf, a, a.recvcounts, a.rdispls, size)};
  return {span_of(a.sendbuf, a, a.sendcounts, a.sdispls, size),
          span_of(a.recvbuf, a, a.recvcounts, a.rdispls, size)};
}

template <size_t N>
constexpr size_t count_of(const Algorithm (&)[N]) {
  return N;
}

// Row i is Coll i (collective_list.hpp; unit_collective_rows checks).
const CollectiveInfo kCollectives[kCollCount] = {
    {Coll::kAllreduce, "allreduce", "COLL_ALLREDUCE_ALGO", check_allreduce, no_data,
     local_copy, buffers_allreduce, kAllreduce, count_of(kAllreduce)},
    {Coll::kBcast, "bcast", "COLL_BCAST_ALGO", check_bcast, no_data, local_nothing, buffers_bcast,
     kBcast, count_of(kBcast), &kBcast[0] /* ring */},
    {Coll::kBarrier, "barrier", "COLL_BARRIER_ALGO", check_barrier, never_empty, local_nothing,
     buffers_none, kBarrier, count_of(kBarrier)},
    {Coll::kAllgather, "allgather", "COLL_ALLGATHER_ALGO", check_allgather, no_data,
     local_copy, buffers_allgather, kAllgather, count_of(kAllgather)},
    {Coll::kReduce, "reduce", "COLL_REDUCE_ALGO", check_reduce, no_data, local_copy,
     buffers_vector, kReduce, count_of(kReduce)},
    // v-collectives: `count` is what this rank sends and receives in all
    // (the check sets it), so a rank with nothing to move returns at once.
    // That is safe: their algorithms send no empty messages, so a peer
    // expects nothing from a rank whose blocks are all empty.
    {Coll::kAllgatherv, "allgatherv", "COLL_ALLGATHERV_ALGO", check_allgatherv, no_data,
     local_gatherv, buffers_allgatherv, kAllgatherv, count_of(kAllgatherv)},
    {Coll::kReduceScatterBlock, "reduce_scatter_block", "COLL_REDUCE_SCATTER_BLOCK_ALGO",
     check_reduce_scatter_block, no_data, local_copy, buffers_reduce_scatter_block,
     kReduceScatterBlock, count_of(kReduceScatterBlock)},
    {Coll::kReduceScatter, "reduce_scatter", "COLL_REDUCE_SCATTER_ALGO", check_reduce_scatter,
     no_data, local_reduce_scatter, buffers_reduce_scatter, kReduceScatter,
     count_of(kReduceScatter)},
    {Coll::kGather, "gather", "COLL_GATHER_ALGO", check_gather, no_data, local_copy,
     buffers_gather, kGather, count_of(kGather)},
    {Coll::kGatherv, "gatherv", "COLL_GATHERV_ALGO", check_gatherv, no_data, local_gatherv,
     buffers_gatherv, kGatherv, count_of(kGatherv)},
    {Coll::kScatter, "scatter", "COLL_SCATTER_ALGO", check_scatter, no_data, local_copy,
     buffers_scatter, kScatter, count_of(kScatter)},
    {Coll::kScatterv, "scatterv", "COLL_SCATTERV_ALGO", check_scatterv, no_data, local_scatterv,
     buffers_scatterv, kScatterv, count_of(kScatterv)},
    {Coll::kAlltoall, "alltoall", "COLL_ALLTOALL_ALGO", check_alltoall, no_data, local_copy,
     buffers_alltoall, kAlltoall, count_of(kAlltoall)},
    {Coll::kAlltoallv, "alltoallv", "COLL_ALLTOALLV_ALGO", check_alltoallv, no_data,
     local_alltoallv, buffers_alltoallv, kAlltoallv, count_of(kAlltoallv)},
    {Coll::kScan, "scan", "COLL_SCAN_ALGO", check_scan, no_data, local_copy, buffers_vector,
     kScan, count_of(kScan)},
    {Coll::kExscan, "exscan", "COLL_EXSCAN_ALGO", check_exscan, no_data, local_nothing,
     buffers_vector, kExscan, count_of(kExscan)},
};

}  // namespace

const CollectiveInfo& collective_info(Coll c) { return kCollectives[int(c)]; }

const CollectiveInfo* find_collective(const std::string& name) {
  for (const CollectiveInfo& c : kCollectives)
    if (name == c.name) return &c;
  return nullptr;
}

std::string collective_names() {
  std::string valid;
  for (const CollectiveInfo& c : kCollectives) {
    valid += valid.empty() ? "" : ", ";
    valid += c.name;
  }
  return valid;
}

const Algorithm* lookup_algorithm(Coll c, const std::string& name) {
  const CollectiveInfo& info = collective_info(c);
  for (size_t i = 0; i < info.num_algorithms; ++i)
    if (name == info.algorithms[i].name) return &info.algorithms[i];
  return nullptr;
}

// Each keeps the rank order of a non-commutative operator (the Reducer's
// `a` is the lower ranks' operand):
//   allreduce recursive_doubling: steps m = 1, 2, 4, ... join two runs of
//     consecutive exchange ranks, the lower first; a folded rank r - 1
//     folds into r, its operand first (recursive_doubling_allreduce.cpp).
//   scan, exscan recursive_doubling: a rank folds a lower group's partial
//     in before its own (recursive_doubling_scan.cpp).
//   reduce, reduce_scatter(_block) in_order: that allreduce, whole.
// Not ring (its blocks wrap from rank n - 1 to 0), not tree or binomial
// allreduce and binomial reduce (subtrees of relative ranks), not linear
// reduce and reduce-scatter (relative rank order: the root's or the
// owner's operand first), not Rabenseifner, recursive halving or
// reduce_scatter_gather (their first step joins ranks p/2 apart), not the
// hierarchical ones (hosts' ranks need not be consecutive). The linear
// (chain) and direct scan and exscan, and the direct allreduce, keep the
// rank order too (a left fold) but associate the operands otherwise than
// recursive doubling, so COLL_REPRODUCIBLE=order, which promises one
// grouping per rank count, keeps recursive doubling for all three.
const Algorithm* in_order_algorithm(Coll c) {
  switch (c) {
    case Coll::kAllreduce:
    case Coll::kScan:
    case Coll::kExscan:
      return lookup_algorithm(c, "recursive_doubling");
    case Coll::kReduce:
      return &kInOrderReduce;
    case Coll::kReduceScatterBlock:
      return &kInOrderReduceScatterBlock;
    case Coll::kReduceScatter:
      return &kInOrderReduceScatter;
    default:
      return nullptr;
  }
}

std::string algorithm_names(Coll c) {
  const CollectiveInfo& info = collective_info(c);
  std::string valid;
  for (size_t i = 0; i < info.num_algorithms; ++i) {
    valid += valid.empty() ? "" : ", ";
    valid += info.algorithms[i].name;
  }
  return valid;
}

const Algorithm& find_algorithm(Coll c, const std::string& name) {
  if (const Algorithm* a = lookup_algorithm(c, name)) return *a;
  fail(COLL_ERR_INVALID_ARG, "%s=%s: unknown algorithm (valid: %s, auto)",
       collective_info(c).knob, name.c_str(), algorithm_names(c).c_str());
}

// The last choice of this thread is remembered with the sizes it holds for:
// programs repeat calls of a few sizes, and a table lookup (tens of ns)
// would show on a small collective on shm (about 100 ns).
namespace {
struct LastChoice {
  int nranks = 0;
  Choice choice{nullptr, 1, 0};

  bool holds(int n, size_t bytes) const {
    return n == nranks && bytes >= choice.min_bytes && bytes <= choice.max_bytes;
  }
};
}  // namespace

const Algorithm& choose_algorithm(Coll c, int nranks, size_t bytes) {
  thread_local LastChoice last[kCollCount];
  LastChoice& l = last[int(c)];
  if (!l.holds(nranks, bytes)) l = {nranks, active_selection().choice(c, nranks, bytes)};
  return *l.choice.algorithm;
}

const Algorithm& zero_copy_choice(const Algorithm& chosen, Coll c) {
  const Algorithm* zc = collective_info(c).zero_copy;
  return zc ? *zc : chosen;
}

void load_selection(bool oversubscribed) {
  set_selection_oversubscribed(oversubscribed);
  active_selection();
}

}  // namespace coll
