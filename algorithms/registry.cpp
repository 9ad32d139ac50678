// The algorithms by name, and the automatic choice among them.
#include <iterator>
#include <string>

#include "algorithms.hpp"
#include "error.hpp"
#include "selection.hpp"

namespace coll {
namespace {

constexpr AllreduceAlgorithm kAllreduce[] = {
    {"ring", ring_allreduce},
    {"tree", tree_allreduce},
    {"binomial", binomial_allreduce},
    {"recursive_doubling", recursive_doubling_allreduce},
    {"rabenseifner", rabenseifner_allreduce},
};
constexpr BcastAlgorithm kBcast[] = {
    {"ring", ring_bcast},
    {"binomial", binomial_bcast},
    {"tree", tree_bcast},
    {"scatter_allgather", scatter_allgather_bcast},
    {"linear", linear_bcast},
};

template <class Table>
auto lookup(const Table& table, const std::string& name) -> decltype(&table[0]) {
  for (const auto& a : table)
    if (name == a.name) return &a;
  return nullptr;
}

template <class Table>
std::string names(const Table& table) {
  std::string valid;
  for (const auto& a : table) {
    valid += valid.empty() ? "" : ", ";
    valid += a.name;
  }
  return valid;
}

template <class Table>
const auto& find(const Table& table, const std::string& name, const char* knob) {
  if (const auto* a = lookup(table, name)) return *a;
  fail(COLL_ERR_INVALID_ARG, "%s=%s: unknown algorithm (valid: %s, auto)", knob, name.c_str(),
       names(table).c_str());
}

}  // namespace

const AllreduceAlgorithm* lookup_allreduce(const std::string& name) {
  return lookup(kAllreduce, name);
}
const BcastAlgorithm* lookup_bcast(const std::string& name) { return lookup(kBcast, name); }
std::string allreduce_names() { return names(kAllreduce); }
std::string bcast_names() { return names(kBcast); }

const AllreduceAlgorithm& find_allreduce(const std::string& name) {
  return find(kAllreduce, name, "COLL_ALLREDUCE_ALGO");
}
const BcastAlgorithm& find_bcast(const std::string& name) {
  return find(kBcast, name, "COLL_BCAST_ALGO");
}

// The last choice of this thread is remembered with the sizes it holds for:
// programs repeat calls of a few sizes, and a table lookup (tens of ns)
// would show on a small collective on shm (about 100 ns).
template <class Algorithm>
struct LastChoice {
  int nranks = 0;
  Choice<Algorithm> choice{nullptr, 1, 0};

  bool holds(int n, size_t bytes) const {
    return n == nranks && bytes >= choice.min_bytes && bytes <= choice.max_bytes;
  }
};

const AllreduceAlgorithm& choose_allreduce(int nranks, size_t bytes) {
  thread_local LastChoice<AllreduceAlgorithm> last;
  if (!last.holds(nranks, bytes))
    last = {nranks, active_selection().allreduce_choice(nranks, bytes)};
  return *last.choice.algorithm;
}
const BcastAlgorithm& choose_bcast(int nranks, size_t bytes) {
  thread_local LastChoice<BcastAlgorithm> last;
  if (!last.holds(nranks, bytes)) last = {nranks, active_selection().bcast_choice(nranks, bytes)};
  return *last.choice.algorithm;
}
void load_selection() { active_selection(); }

}  // namespace coll
