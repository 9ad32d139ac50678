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

const AllreduceAlgorithm& choose_allreduce(int nranks, size_t bytes) {
  return active_selection().allreduce(nranks, bytes);
}
const BcastAlgorithm& choose_bcast(int nranks, size_t bytes) {
  return active_selection().bcast(nranks, bytes);
}
void load_selection() { active_selection(); }

}  // namespace coll
