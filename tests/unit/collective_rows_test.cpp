// The per-collective rows kept by hand against the one list
// (algorithms/collective_list.hpp, issue 34): the registry's descriptors,
// the cost model's table, the default selection and the benchmark's
// Collective must each have the list's collectives, row i for Coll i where
// they are positional. A row added, dropped or moved in one of them fails
// here, naming it. (The shim's rows are checked at compile time:
// libcoll_mpi/collectives.cpp.)
#include <gtest/gtest.h>

#include <cctype>
#include <set>
#include <string>

#include "../../bench/collective.hpp"
#include "algorithms.hpp"
#include "cost_model.hpp"
#include "selection.hpp"

namespace coll {
namespace {

std::string knob_of(const std::string& name) {
  std::string knob = "COLL_";
  for (char c : name) knob += char(std::toupper(static_cast<unsigned char>(c)));
  return knob + "_ALGO";
}

TEST(CollectiveRows, ListNamesEachCollectiveOnce) {
  std::set<std::string> names(std::begin(kCollNames), std::end(kCollNames));
  EXPECT_EQ(names.size(), size_t(kCollCount));
}

TEST(CollectiveRows, RegistryRowIsItsCollective) {
  for (int i = 0; i < kCollCount; ++i) {
    const CollectiveInfo& info = collective_info(Coll(i));
    EXPECT_EQ(int(info.id), i) << kCollNames[i];
    EXPECT_STREQ(info.name, kCollNames[i]) << "row " << i;
    EXPECT_EQ(info.knob, knob_of(kCollNames[i]));
    EXPECT_EQ(find_collective(kCollNames[i]), &info);
    EXPECT_GT(info.num_algorithms, size_t(0)) << kCollNames[i];
  }
}

TEST(CollectiveRows, ModelKnowsTheRegistrysAlgorithms) {
  model::Params p;
  p.alpha_intra = 1e-6;
  p.beta_intra = 1e-10;
  p.gamma = 1e-10;
  for (int i = 0; i < kCollCount; ++i) {
    const Coll c = Coll(i);
    const auto estimates = model::estimates(c, 4, 4096, p);
    EXPECT_FALSE(estimates.empty()) << kCollNames[i];
    for (const model::Estimate& e : estimates) {
      if (e.algorithm == "hierarchical") continue;
      EXPECT_NE(lookup_algorithm(c, e.algorithm), nullptr)
          << kCollNames[i] << ": the model's " << e.algorithm << " is not in its descriptor";
    }
  }
}

TEST(CollectiveRows, DefaultSelectionPicksTheCollectivesOwnAlgorithm) {
  const Selection selection;
  for (int i = 0; i < kCollCount; ++i) {
    const Coll c = Coll(i);
    for (int n : {2, 3, 4, 8, 64})
      for (size_t bytes : {size_t(0), size_t(4), size_t(65536), size_t(4) << 20}) {
        const Algorithm& a = selection.algorithm(c, n, bytes);
        EXPECT_EQ(lookup_algorithm(c, a.name), &a)
            << kCollNames[i] << " at " << n << " ranks, " << bytes << " B: " << a.name;
      }
  }
}

TEST(CollectiveRows, BenchmarkHasEveryCollective) {
  const auto rows = bench::all_collectives();
  EXPECT_EQ(rows.size(), size_t(kCollCount));
  for (const auto& row : rows)
    EXPECT_NE(find_collective(row.name), nullptr) << "the benchmark's " << row.name;
  for (const char* name : kCollNames)
    EXPECT_TRUE(bench::parse_collective(name).has_value()) << name << " is not in the benchmark";
}

}  // namespace
}  // namespace coll
