// The collectives: one descriptor each (algorithms.hpp), and the automatic
// choice among their algorithms.
#include <coll/coll.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

#include "algorithms.hpp"
#include "error.hpp"
#include "selection.hpp"

namespace coll {
namespace {

constexpr Algorithm kAllreduce[] = {
    {"ring", ring_allreduce},
    {"tree", tree_allreduce},
    {"binomial", binomial_allreduce},
    {"recursive_doubling", recursive_doubling_allreduce},
    {"rabenseifner", rabenseifner_allreduce},
};
constexpr Algorithm kBcast[] = {
    {"ring", ring_bcast},
    {"binomial", binomial_bcast},
    {"tree", tree_bcast},
    {"scatter_allgather", scatter_allgather_bcast},
    {"linear", linear_bcast},
};
constexpr Algorithm kBarrier[] = {
    {"tree", tree_barrier},
    {"dissemination", dissemination_barrier},
};
constexpr Algorithm kAllgather[] = {
    {"ring", ring_allgather},
};

bool overlaps(const void* a, const void* b, size_t len) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  // Written so that nothing wraps around: x + len may exceed the address
  // space for a huge (rejected elsewhere) or hostile length.
  return x < y ? y - x < len : x - y < len;
}

// The element size, and the byte count, checked against overflow.
void check_count(Args& a, const char* name, size_t multiplier = 1) {
  if (!valid_datatype(a.datatype))
    fail(COLL_ERR_INVALID_ARG, "%s: unknown datatype %d", name, a.datatype);
  a.elem_size = datatype_size(a.datatype);
  // No buffer is larger than half the address space (PTRDIFF_MAX).
  const size_t limit = size_t(PTRDIFF_MAX) / a.elem_size / multiplier;
  if (a.count > limit)
    fail(COLL_ERR_INVALID_ARG, "%s: count %zu of %s (x %zu) overflows the address space", name,
         a.count, datatype_name(a.datatype), multiplier);
  a.bytes = a.count * a.elem_size;
}

void check_allreduce(Args& a, int /*size*/, int /*rank*/) {
  check_count(a, "allreduce");
  if (!valid_op(a.op)) fail(COLL_ERR_INVALID_ARG, "allreduce: unknown reduction op %d", a.op);
  a.reduce = reduce_function(a.datatype, a.op);
  if (!a.reduce)
    fail(COLL_ERR_INVALID_ARG, "allreduce: op %s is not defined on datatype %s (integer types only)",
         op_name(a.op), datatype_name(a.datatype));
  if (a.sendbuf == COLL_IN_PLACE) a.sendbuf = a.recvbuf;
  if (a.count > 0 && (!a.recvbuf || !a.sendbuf))
    fail(COLL_ERR_INVALID_ARG, "allreduce: NULL %s with count %zu",
         a.recvbuf ? "sendbuf" : "recvbuf", a.count);
  if (a.sendbuf != a.recvbuf && overlaps(a.sendbuf, a.recvbuf, a.bytes))
    fail(COLL_ERR_INVALID_ARG,
         "allreduce: sendbuf and recvbuf overlap (use COLL_IN_PLACE to reduce in place)");
}

void check_bcast(Args& a, int size, int /*rank*/) {
  check_count(a, "bcast");
  if (a.root < 0 || a.root >= size)
    fail(COLL_ERR_INVALID_ARG, "bcast: root %d out of range [0, %d)", a.root, size);
  if (a.count > 0 && !a.recvbuf)
    fail(COLL_ERR_INVALID_ARG, "bcast: NULL buffer with count %zu", a.count);
}

void check_barrier(Args& a, int /*size*/, int /*rank*/) { a.bytes = 0; }

void check_allgather(Args& a, int size, int rank) {
  check_count(a, "allgather", size_t(size));
  if (a.count > 0 && !a.recvbuf)
    fail(COLL_ERR_INVALID_ARG, "allgather: NULL recvbuf with count %zu", a.count);
  char* own = static_cast<char*>(a.recvbuf) + size_t(rank) * a.bytes;
  if (a.sendbuf == COLL_IN_PLACE) a.sendbuf = own;
  if (a.count > 0 && !a.sendbuf)
    fail(COLL_ERR_INVALID_ARG, "allgather: NULL sendbuf with count %zu", a.count);
  if (a.sendbuf != own && overlaps(a.sendbuf, a.recvbuf, a.bytes * size_t(size)))
    fail(COLL_ERR_INVALID_ARG, "allgather: sendbuf overlaps recvbuf (use COLL_IN_PLACE)");
}

bool no_data(const Args& a) { return a.count == 0; }
bool never_empty(const Args&) { return false; }

void local_allreduce(const Args& a) {
  if (a.sendbuf != a.recvbuf) std::memcpy(a.recvbuf, a.sendbuf, a.bytes);
}
void local_nothing(const Args&) {}
void local_allgather(const Args& a) {
  if (a.sendbuf != a.recvbuf) std::memmove(a.recvbuf, a.sendbuf, a.bytes);
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

template <size_t N>
constexpr size_t count_of(const Algorithm (&)[N]) {
  return N;
}

const CollectiveInfo kCollectives[kCollCount] = {
    {Coll::kAllreduce, "allreduce", "COLL_ALLREDUCE_ALGO", check_allreduce, no_data,
     local_allreduce, buffers_allreduce, kAllreduce, count_of(kAllreduce)},
    {Coll::kBcast, "bcast", "COLL_BCAST_ALGO", check_bcast, no_data, local_nothing, buffers_bcast,
     kBcast, count_of(kBcast)},
    {Coll::kBarrier, "barrier", "COLL_BARRIER_ALGO", check_barrier, never_empty, local_nothing,
     buffers_none, kBarrier, count_of(kBarrier)},
    {Coll::kAllgather, "allgather", "COLL_ALLGATHER_ALGO", check_allgather, no_data,
     local_allgather, buffers_allgather, kAllgather, count_of(kAllgather)},
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

void load_selection() { active_selection(); }

}  // namespace coll
