#include "selection.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <sstream>

#include "env.hpp"
#include "error.hpp"
#include "small_file.hpp"

namespace coll {
namespace {

[[noreturn]] void bad_line(const std::string& origin, int line, const std::string& what) {
  fail(COLL_ERR_INVALID_ARG, "%s: line %d: %s", origin.c_str(), line, what.c_str());
}

bool parse_int(const std::string& s, long long& value) {
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, value);
  return ec == std::errc() && p == end;
}

// N, A-B, A+ or *.
bool parse_ranks(const std::string& s, int& lo, int& hi) {
  long long a = 0, b = 0;
  if (s == "*") {
    lo = 1, hi = INT_MAX;
    return true;
  }
  if (!s.empty() && s.back() == '+') {
    if (!parse_int(s.substr(0, s.size() - 1), a) || a < 1 || a > INT_MAX) return false;
    lo = int(a), hi = INT_MAX;
    return true;
  }
  const size_t dash = s.find('-');
  if (dash == std::string::npos) {
    if (!parse_int(s, a) || a < 1 || a > INT_MAX) return false;
    lo = hi = int(a);
    return true;
  }
  if (!parse_int(s.substr(0, dash), a) || !parse_int(s.substr(dash + 1), b) || a < 1 || b < a ||
      b > INT_MAX)
    return false;
  lo = int(a), hi = int(b);
  return true;
}

// Digits, then at most one of K, M, G (powers of 1024).
bool parse_bytes(const std::string& s, size_t& bytes) {
  if (s.empty()) return false;
  std::string digits = s;
  unsigned shift = 0;
  switch (s.back()) {
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    default:
      break;
  }
  if (shift) digits.pop_back();
  if (digits.empty() || digits[0] == '-' || digits[0] == '+') return false;
  unsigned long long n = 0;
  const char* end = digits.data() + digits.size();
  auto [p, ec] = std::from_chars(digits.data(), end, n);
  if (ec != std::errc() || p != end || ((n << shift) >> shift) != n) return false;
  bytes = size_t(n << shift);
  return true;
}

}  // namespace

SelectionTable SelectionTable::parse(const std::string& text, const std::string& origin) {
  SelectionTable table;
  std::istringstream lines(text);
  std::string raw;
  for (int line = 1; std::getline(lines, raw); ++line) {
    std::istringstream fields(raw.substr(0, raw.find('#')));
    std::vector<std::string> f;
    for (std::string word; fields >> word;) f.push_back(word);
    if (f.empty()) continue;
    if (f.size() != 4)
      bad_line(origin, line,
               strfmt("%zu fields where 4 were expected: collective ranks min_bytes algorithm",
                      f.size()));
    SelectionRule rule{};
    rule.line = line;
    const CollectiveInfo* coll = find_collective(f[0]);
    if (!coll)
      bad_line(origin, line,
               "unknown collective '" + f[0] + "' (valid: " + collective_names() + ")");
    rule.collective = coll->id;
    if (!parse_ranks(f[1], rule.min_ranks, rule.max_ranks))
      bad_line(origin, line,
               "bad ranks '" + f[1] + "' (expected N, A-B with A <= B, A+ or *; ranks from 1)");
    if (!parse_bytes(f[2], rule.min_bytes))
      bad_line(origin, line,
               "bad min_bytes '" + f[2] + "' (expected a byte count, optionally with K, M or G)");
    rule.algorithm = lookup_algorithm(coll->id, f[3]);
    if (!rule.algorithm)
      bad_line(origin, line,
               strfmt("unknown %s algorithm '%s' (valid: %s)", coll->name, f[3].c_str(),
                      algorithm_names(coll->id).c_str()));
    table.rules_.push_back(rule);
  }
  return table;
}

SelectionTable SelectionTable::load(const std::string& path) {
  const std::string origin = "COLL_TUNING_FILE=" + path;
  std::string text;
  const std::string why = read_small_file(path, kMaxConfigFileBytes, &text);
  if (!why.empty()) fail(COLL_ERR_INVALID_ARG, "%s: %s", origin.c_str(), why.c_str());
  return parse(text, origin);
}

const SelectionRule* SelectionTable::find(Coll c, int nranks, size_t bytes) const {
  const SelectionRule* best = nullptr;
  for (const SelectionRule& rule : rules_) {
    if (rule.collective != c || nranks < rule.min_ranks || nranks > rule.max_ranks ||
        rule.min_bytes > bytes)
      continue;
    if (!best || rule.min_bytes >= best->min_bytes) best = &rule;
  }
  return best;
}

Selection::Selection(SelectionTable overrides, const model::Params& model, bool oversubscribed)
    : defaults_(SelectionTable::parse(kDefaultTuning, "built-in tuning table")),
      oversubscribed_(oversubscribed ? SelectionTable::parse(kOversubscribedTuning,
                                                             "built-in oversubscribed table")
                                     : SelectionTable()),
      overrides_(std::move(overrides)),
      model_(model) {}

namespace {

// Narrows [lo, hi] around `bytes` to the sizes for which no rule of
// `table` for (c, nranks) starts or stops applying.
void narrow(const SelectionTable& table, Coll c, int nranks, size_t bytes, size_t& lo, size_t& hi) {
  for (const SelectionRule& rule : table.rules()) {
    if (rule.collective != c || nranks < rule.min_ranks || nranks > rule.max_ranks) continue;
    if (rule.min_bytes <= bytes)
      lo = std::max(lo, rule.min_bytes);
    else
      hi = std::min(hi, rule.min_bytes - 1);
  }
}

}  // namespace

Selection::Found Selection::find(Coll c, int nranks, size_t bytes) const {
  Found found{overrides_.find(c, nranks, bytes), 0, SIZE_MAX};
  if (!found.rule) found.rule = oversubscribed_.find(c, nranks, bytes);
  if (!found.rule) found.rule = defaults_.find(c, nranks, bytes);
  if (!found.rule)
    fail(COLL_ERR_INTERNAL, "no %s rule for %d ranks and %zu bytes in the built-in table",
         collective_info(c).name, nranks, bytes);
  for (const SelectionTable* table : {&overrides_, &oversubscribed_, &defaults_})
    narrow(*table, c, nranks, bytes, found.min_bytes, found.max_bytes);
  return found;
}

const Selection::ModelTable& Selection::model_table(int nranks) const {
  std::lock_guard<std::mutex> lock(model_cache_->mutex);
  std::unique_ptr<const ModelTable>& slot = model_cache_->tables[nranks];
  if (slot) return *slot;
  auto table = std::make_unique<ModelTable>();
  for (int i = 0; i < kCollCount; ++i) {
    const Coll c = Coll(i);
    if (!model::chooses(c)) continue;
    std::vector<ModelRule>& rules = (*table)[size_t(i)];
    // Four sizes per octave, 1 B to 64 GiB; the choice at a size holds up
    // to the next (what the model predicts in between is interpolation
    // anyway). Size 0 takes the choice at 1 byte.
    for (int octave = 0; octave <= 36; ++octave) {
      for (size_t quarter = 4; quarter < 8; ++quarter) {
        const size_t bytes = (size_t{1} << octave) * quarter / 4;
        if (!rules.empty() && bytes <= rules.back().min_bytes) continue;
        const Algorithm* a = lookup_algorithm(
            c,
            model::best(c, nranks, bytes, model_, rules.empty() ? "" : rules.back().algorithm->name)
                .algorithm);
        if (!a)
          fail(COLL_ERR_INTERNAL, "the cost model names no %s algorithm of the registry",
               collective_info(c).name);
        if (rules.empty())
          rules.push_back({0, a});
        else if (a != rules.back().algorithm)
          rules.push_back({bytes, a});
      }
    }
  }
  slot = std::move(table);
  return *slot;
}

Choice Selection::choice(Coll c, int nranks, size_t bytes) const {
  if (nranks > kDefaultTuningMaxRanks && model::chooses(c) && !overrides_.find(c, nranks, bytes)) {
    const std::vector<ModelRule>& rules = model_table(nranks)[size_t(c)];
    size_t i = 0;
    while (i + 1 < rules.size() && rules[i + 1].min_bytes <= bytes) ++i;
    Choice choice{rules[i].algorithm, rules[i].min_bytes,
                  i + 1 < rules.size() ? rules[i + 1].min_bytes - 1 : SIZE_MAX};
    // A rule of the tuning file that starts within the range ends it.
    narrow(overrides_, c, nranks, bytes, choice.min_bytes, choice.max_bytes);
    return choice;
  }
  const Found f = find(c, nranks, bytes);
  return {f.rule->algorithm, f.min_bytes, f.max_bytes};
}

namespace {
std::atomic<bool> g_oversubscribed{false};
}  // namespace

void set_selection_oversubscribed(bool oversubscribed) { g_oversubscribed.store(oversubscribed); }

const Selection& active_selection() {
  // A throwing initializer leaves the static uninitialized: the next call
  // reads the file again.
  static const Selection selection = [] {
    const std::string path = env_string("COLL_TUNING_FILE");
    return Selection(path.empty() ? SelectionTable() : SelectionTable::load(path),
                     model::this_machine(), g_oversubscribed.load());
  }();
  return selection;
}

}  // namespace coll
