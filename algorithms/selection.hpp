// Automatic algorithm selection: a table keyed by collective, rank count
// and message size.
//
// Text format (the compiled-in defaults, default_tuning.cpp, are written
// in it; COLL_TUNING_FILE names a file in it; algorithms/tune.sh writes one
// from a benchmark sweep). One rule per line, four fields separated by
// blanks; '#' starts a comment; blank lines are ignored:
//
//   # collective  ranks  min_bytes  algorithm
//   allreduce     2      0          recursive_doubling
//   allreduce     2      64K        ring
//   allreduce     3-8    0          binomial
//   bcast         *      0          binomial
//
//   collective  a name of the registry (algorithms.hpp): allreduce, bcast,
//               barrier, allgather, allgatherv, reduce, reduce_scatter_block,
//               reduce_scatter, gather, gatherv, scatter, scatterv, alltoall,
//               alltoallv, scan, exscan
//   ranks       N, A-B (inclusive), A+ (A or more), or * (any); from 1
//   min_bytes   a byte count, optionally with a K, M or G suffix (x 1024)
//   algorithm   a name valid for the collective (its COLL_<NAME>_ALGO
//               knob lists them); "auto" is not one
//
// B is Args::select_bytes (algorithms.hpp): the message, or the per-rank
// block, that every rank of the call computes alike.
// A call of B bytes on N ranks runs the algorithm of the rule, among those
// of its collective whose ranks contain N and whose min_bytes <= B, with
// the largest min_bytes; of two such rules with the same min_bytes the later
// line wins. A rule of the tuning file, when one applies, wins over every
// compiled-in default; the defaults apply to calls the file does not cover.
#pragma once

#include <array>
#include <climits>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms.hpp"
#include "cost_model.hpp"

namespace coll {

struct SelectionRule {
  Coll collective;
  int min_ranks;
  int max_ranks;  // inclusive; INT_MAX for "A+" and "*"
  size_t min_bytes;
  // The algorithm, resolved at parse time: one of `collective`'s.
  const Algorithm* algorithm;
  int line;
};

class SelectionTable {
 public:
  SelectionTable() = default;

  // Throws Error(COLL_ERR_INVALID_ARG) "<origin>: line N: <what is wrong>".
  static SelectionTable parse(const std::string& text, const std::string& origin);
  // Reads and parses a file; origin names it in messages as
  // "COLL_TUNING_FILE=<path>".
  static SelectionTable load(const std::string& path);

  // The rule that applies (see above), or nullptr.
  const SelectionRule* find(Coll c, int nranks, size_t bytes) const;
  const std::vector<SelectionRule>& rules() const { return rules_; }

 private:
  std::vector<SelectionRule> rules_;
};

// The compiled-in defaults, in the text format above (default_tuning.cpp).
extern const char* const kDefaultTuning;
// Rules that come before the defaults in a job whose ranks outnumber the
// CPUs of a host (HostMap::any_host_oversubscribed: the same at every
// rank, so all choose alike), where every dependent step of a schedule is
// a rank waiting to be scheduled (default_tuning.cpp).
extern const char* const kOversubscribedTuning;
// The largest rank count the defaults were measured at. Past it a call
// that no rule of the tuning file covers takes the cost model's choice
// (cost_model.hpp, with this machine's fitted parameters) rather than the
// defaults' rules for the largest rank count stretched to any.
extern const int kDefaultTuningMaxRanks;

// A choice and the sizes it holds for: every call of min_bytes ..
// max_bytes bytes (inclusive) on the same rank count gets the same
// algorithm, so a caller may remember it.
struct Choice {
  const Algorithm* algorithm;
  size_t min_bytes;
  size_t max_bytes;
};

// The defaults, overridden by a tuning table; past kDefaultTuningMaxRanks
// the model's choices instead of the defaults.
class Selection {
 public:
  // oversubscribed: kOversubscribedTuning's rules come before the
  // defaults' (the tuning file's before both).
  explicit Selection(SelectionTable overrides = {},
                     const model::Params& model = model::this_machine(),
                     bool oversubscribed = false);

  const Algorithm& algorithm(Coll c, int nranks, size_t bytes) const {
    return *choice(c, nranks, bytes).algorithm;
  }
  Choice choice(Coll c, int nranks, size_t bytes) const;

 private:
  // The rule that applies, and the sizes around `bytes` for which no rule
  // of either table starts or stops applying.
  struct Found {
    const SelectionRule* rule;
    size_t min_bytes;
    size_t max_bytes;
  };
  Found find(Coll c, int nranks, size_t bytes) const;

  // The model's choices at one rank count: per collective, the sizes at
  // which its best algorithm changes, ascending from 0. Evaluated once per
  // rank count (the first choice a communicator of that size makes) and
  // kept; a communicator keeps its last Choice, so this is seen only when
  // a call leaves the size range of the previous one.
  struct ModelRule {
    size_t min_bytes;
    const Algorithm* algorithm;
  };
  using ModelTable = std::array<std::vector<ModelRule>, kCollCount>;
  struct ModelCache {
    std::mutex mutex;  // communicators of several threads choose at once
    std::map<int, std::unique_ptr<const ModelTable>> tables;
  };
  const ModelTable& model_table(int nranks) const;

  SelectionTable defaults_;
  SelectionTable oversubscribed_;  // empty unless the job is oversubscribed
  SelectionTable overrides_;
  model::Params model_;
  std::unique_ptr<ModelCache> model_cache_ = std::make_unique<ModelCache>();
};

// The selection in use: the defaults, overridden by the file that
// COLL_TUNING_FILE names when it is set, and by kOversubscribedTuning in an
// oversubscribed job (set_selection_oversubscribed, before the first call).
// Built at the first call; a bad file throws Error(COLL_ERR_INVALID_ARG),
// and the next call tries again.
const Selection& active_selection();
void set_selection_oversubscribed(bool oversubscribed);

}  // namespace coll
