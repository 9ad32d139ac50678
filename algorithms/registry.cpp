#include <iterator>
#include <string>

#include "algorithms.hpp"
#include "error.hpp"

namespace coll {
namespace {

constexpr AllreduceAlgorithm kAllreduce[] = {
    {"ring", ring_allreduce},
};
constexpr BcastAlgorithm kBcast[] = {
    {"ring", ring_bcast},
};

template <class Table>
const auto& find(const Table& table, const std::string& name, const char* knob) {
  std::string valid;
  for (const auto& a : table) {
    if (name == a.name) return a;
    valid += valid.empty() ? "" : ", ";
    valid += a.name;
  }
  fail(COLL_ERR_INVALID_ARG, "%s=%s: unknown algorithm (valid: %s, auto)", knob,
       name.c_str(), valid.c_str());
}

}  // namespace

const AllreduceAlgorithm& find_allreduce(const std::string& name) {
  return find(kAllreduce, name, "COLL_ALLREDUCE_ALGO");
}
const BcastAlgorithm& find_bcast(const std::string& name) {
  return find(kBcast, name, "COLL_BCAST_ALGO");
}

const AllreduceAlgorithm& choose_allreduce(int, size_t) { return kAllreduce[0]; }
const BcastAlgorithm& choose_bcast(int, size_t) { return kBcast[0]; }

}  // namespace coll
