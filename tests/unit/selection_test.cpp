// The selection table: its text format, which rule applies at the
// boundaries, the tuning file over the compiled-in defaults, errors that
// name the file and line, and the algorithm registry's names.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>

#include "algorithms.hpp"
#include "error.hpp"
#include "selection.hpp"

namespace coll {
namespace {

std::string algo(const SelectionTable& t, Coll c, int n, size_t bytes) {
  const SelectionRule* rule = t.find(c, n, bytes);
  if (!rule) return "none";
  return rule->algorithm->name;
}

// The message of the Error that parsing text throws ("" when none is).
std::string parse_error(const std::string& text) {
  try {
    SelectionTable::parse(text, "test.tuning");
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
    return e.what();
  }
  return "";
}

class TempFile {
 public:
  explicit TempFile(const std::string& text) {
    char name[] = "/tmp/coll_selection_test_XXXXXX";
    const int fd = mkstemp(name);
    EXPECT_GE(fd, 0);
    close(fd);
    path_ = name;
    std::ofstream(path_) << text;
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Selection, RuleWithTheLargestMinBytesAtOrBelowTheSizeApplies) {
  const SelectionTable t = SelectionTable::parse(
      "allreduce 4 0 recursive_doubling\n"
      "allreduce 4 2048 tree\n"
      "allreduce 4 256K ring\n",
      "test");
  EXPECT_EQ(algo(t, Coll::kAllreduce, 4, 0), "recursive_doubling");
  EXPECT_EQ(algo(t, Coll::kAllreduce, 4, 2047), "recursive_doubling");
  EXPECT_EQ(algo(t, Coll::kAllreduce, 4, 2048), "tree");
  EXPECT_EQ(algo(t, Coll::kAllreduce, 4, 256 * 1024 - 1), "tree");
  EXPECT_EQ(algo(t, Coll::kAllreduce, 4, 256 * 1024), "ring");
  EXPECT_EQ(algo(t, Coll::kAllreduce, 4, SIZE_MAX), "ring");
  // Other rank counts and the other collective have no rule here.
  EXPECT_EQ(algo(t, Coll::kAllreduce, 3, 100), "none");
  EXPECT_EQ(algo(t, Coll::kBcast, 4, 100), "none");
}

TEST(Selection, RankRangesAndOrderDoNotMatterButTiesGoToTheLaterLine) {
  const SelectionTable t = SelectionTable::parse(
      "  # a comment, then a blank line\n"
      "\n"
      "bcast 9+   0 binomial   # nine ranks or more\n"
      "bcast 2-4  0 tree\n"
      "bcast *    1M scatter_allgather\n"
      "bcast 3    0 ring\n"
      "bcast 5-8  0 binomial\n"
      "bcast 5-8  0 tree\n",
      "test");
  EXPECT_EQ(algo(t, Coll::kBcast, 1, 0), "none");
  EXPECT_EQ(algo(t, Coll::kBcast, 2, 0), "tree");
  EXPECT_EQ(algo(t, Coll::kBcast, 3, 0), "ring");  // same min_bytes: later line
  EXPECT_EQ(algo(t, Coll::kBcast, 4, 0), "tree");
  EXPECT_EQ(algo(t, Coll::kBcast, 6, 0), "tree");  // same min_bytes: later line
  EXPECT_EQ(algo(t, Coll::kBcast, 9, 0), "binomial");
  EXPECT_EQ(algo(t, Coll::kBcast, INT_MAX, 0), "binomial");
  EXPECT_EQ(algo(t, Coll::kBcast, 1, 1 << 20), "scatter_allgather");
  EXPECT_EQ(algo(t, Coll::kBcast, 3, (1 << 20) - 1), "ring");
  EXPECT_EQ(algo(t, Coll::kBcast, 3, 1 << 20), "scatter_allgather");
  EXPECT_EQ(t.rules().size(), 6u);
  EXPECT_EQ(t.rules()[0].line, 3);
}

TEST(Selection, ByteSuffixesArePowersOf1024) {
  const SelectionTable t = SelectionTable::parse(
      "allreduce 1 1k ring\nallreduce 2 3M ring\nallreduce 3 2G ring\nallreduce 4 77 ring\n",
      "test");
  ASSERT_EQ(t.rules().size(), 4u);
  EXPECT_EQ(t.rules()[0].min_bytes, 1024u);
  EXPECT_EQ(t.rules()[1].min_bytes, 3u << 20);
  EXPECT_EQ(t.rules()[2].min_bytes, size_t(2) << 30);
  EXPECT_EQ(t.rules()[3].min_bytes, 77u);
}

TEST(Selection, BadLinesAreErrorsNamingOriginLineAndProblem) {
  EXPECT_EQ(parse_error(""), "");
  EXPECT_EQ(parse_error("# only a comment\n"), "");
  std::string e = parse_error("allreduce * 0 ring\nneighbor_alltoall * 0 ring\n");
  EXPECT_NE(e.find("test.tuning: line 2: unknown collective 'neighbor_alltoall'"),
            std::string::npos)
      << e;
  e = parse_error("allreduce * 0\n");
  EXPECT_NE(e.find("line 1: 3 fields where 4 were expected"), std::string::npos) << e;
  e = parse_error("allreduce * 0 ring extra\n");
  EXPECT_NE(e.find("5 fields"), std::string::npos) << e;
  for (const char* ranks : {"0", "-1", "3-2", "x", "2-", "0+", "+", "1-x", "99999999999"}) {
    e = parse_error(std::string("bcast ") + ranks + " 0 ring\n");
    EXPECT_NE(e.find(std::string("bad ranks '") + ranks + "'"), std::string::npos) << e;
  }
  for (const char* bytes :
       {"-1", "12X", "K", "1KB", "0x10", "99999999999999999999", "17179869184G", "+5"}) {
    e = parse_error(std::string("bcast * ") + bytes + " ring\n");
    EXPECT_NE(e.find(std::string("bad min_bytes '") + bytes + "'"), std::string::npos) << e;
  }
  e = parse_error("allreduce * 0 auto\n");
  EXPECT_NE(e.find("unknown allreduce algorithm 'auto' (valid: ring, tree, binomial, "
                   "recursive_doubling, rabenseifner, direct, hierarchical)"),
            std::string::npos)
      << e;
  // A bcast-only name is no allreduce algorithm, and the other way round.
  e = parse_error("allreduce * 0 scatter_allgather\n");
  EXPECT_NE(e.find("unknown allreduce algorithm"), std::string::npos) << e;
  e = parse_error("bcast * 0 recursive_doubling\n");
  EXPECT_NE(e.find("unknown bcast algorithm 'recursive_doubling' (valid: ring, binomial, tree, "
                   "scatter_allgather, linear, hierarchical)"),
            std::string::npos)
      << e;
}

TEST(Selection, DefaultsCoverEveryCallAndNameRealAlgorithms) {
  const Selection s;  // parses the compiled-in table; throws if it is bad
  for (int n = 1; n <= 64; ++n) {
    for (size_t bytes = 0; bytes <= (size_t(1) << 32); bytes = bytes ? bytes * 2 : 1) {
      EXPECT_NO_THROW(s.algorithm(Coll::kAllreduce, n, bytes)) << n << " " << bytes;
      EXPECT_NO_THROW(s.algorithm(Coll::kBcast, n, bytes)) << n << " " << bytes;
      EXPECT_EQ(&s.algorithm(Coll::kAllreduce, n, bytes), lookup_algorithm(Coll::kAllreduce, s.algorithm(Coll::kAllreduce, n, bytes).name));
    }
  }
}

TEST(Selection, TuningRulesWinWhereTheyApplyAndDefaultsElsewhere) {
  const Selection defaults;
  const Selection tuned(SelectionTable::parse("allreduce 4 1K tree\nbcast 3-5 0 ring\n", "t"));
  const std::string d_small = defaults.algorithm(Coll::kAllreduce, 4, 100).name;
  EXPECT_EQ(std::string(tuned.algorithm(Coll::kAllreduce, 4, 100).name), d_small);  // below 1K: defaults
  EXPECT_EQ(std::string(tuned.algorithm(Coll::kAllreduce, 4, 1024).name), "tree");
  EXPECT_EQ(std::string(tuned.algorithm(Coll::kAllreduce, 4, size_t(1) << 30).name), "tree");
  EXPECT_EQ(std::string(tuned.algorithm(Coll::kAllreduce, 8, 1 << 20).name), defaults.algorithm(Coll::kAllreduce, 8, 1 << 20).name);
  for (size_t bytes : {size_t(0), size_t(5000), size_t(1) << 26})
    EXPECT_EQ(std::string(tuned.algorithm(Coll::kBcast, 4, bytes).name), "ring");
  EXPECT_EQ(std::string(tuned.algorithm(Coll::kBcast, 2, 5000).name), defaults.algorithm(Coll::kBcast, 2, 5000).name);
}

// An oversubscribed job takes kOversubscribedTuning's rules before the
// defaults (the bcast at 3-4 ranks: linear at every size), a tuning file's
// before both; elsewhere the defaults.
TEST(Selection, OversubscribedRulesComeBeforeTheDefaults) {
  const Selection plain;
  const Selection over({}, model::this_machine(), true);
  for (size_t bytes : {size_t(0), size_t(64) << 10, size_t(1) << 20, size_t(1) << 26}) {
    EXPECT_EQ(std::string(over.algorithm(Coll::kBcast, 4, bytes).name), "linear") << bytes;
    EXPECT_EQ(std::string(over.algorithm(Coll::kBcast, 3, bytes).name), "linear") << bytes;
    EXPECT_EQ(&over.algorithm(Coll::kBcast, 2, bytes), &plain.algorithm(Coll::kBcast, 2, bytes));
    EXPECT_EQ(&over.algorithm(Coll::kBcast, 5, bytes), &plain.algorithm(Coll::kBcast, 5, bytes));
    EXPECT_EQ(&over.algorithm(Coll::kAllreduce, 4, bytes),
              &plain.algorithm(Coll::kAllreduce, 4, bytes));
  }
  EXPECT_EQ(std::string(plain.algorithm(Coll::kBcast, 4, 1 << 20).name), "ring");
  const Selection tuned(SelectionTable::parse("bcast 4 0 ring\n", "t"), model::this_machine(), true);
  EXPECT_EQ(std::string(tuned.algorithm(Coll::kBcast, 4, 1 << 20).name), "ring");
  EXPECT_EQ(std::string(tuned.algorithm(Coll::kBcast, 3, 1 << 20).name), "linear");
  // choice() (what a communicator caches) takes the same rule as algorithm().
  const Choice c = over.choice(Coll::kBcast, 4, 100);
  EXPECT_EQ(std::string(c.algorithm->name), "linear");
}

// A choice names the sizes it holds for: every size in the range gets the
// same algorithm, and the range ends where some rule starts to apply.
TEST(Selection, ChoicesHoldOverTheirWholeRange) {
  const Selection tuned(
      SelectionTable::parse("allreduce 4 1000 tree\nallreduce 3-5 5000 binomial\n", "t"));
  for (int n : {2, 3, 4, 8}) {
    for (size_t bytes : {size_t(0), size_t(1), size_t(999), size_t(1000), size_t(4999),
                         size_t(5000), size_t(70000), size_t(1) << 22, SIZE_MAX}) {
      const Choice c = tuned.choice(Coll::kAllreduce, n, bytes);
      SCOPED_TRACE("n=" + std::to_string(n) + " bytes=" + std::to_string(bytes));
      EXPECT_LE(c.min_bytes, bytes);
      EXPECT_GE(c.max_bytes, bytes);
      EXPECT_EQ(&tuned.algorithm(Coll::kAllreduce, n, bytes), c.algorithm);
      EXPECT_EQ(&tuned.algorithm(Coll::kAllreduce, n, c.min_bytes), c.algorithm);
      EXPECT_EQ(&tuned.algorithm(Coll::kAllreduce, n, c.max_bytes), c.algorithm);
      EXPECT_EQ(&tuned.algorithm(Coll::kAllreduce, n, c.min_bytes + (c.max_bytes - c.min_bytes) / 2), c.algorithm);
      if (c.max_bytes != SIZE_MAX) {
        EXPECT_EQ(tuned.choice(Coll::kAllreduce, n, c.max_bytes + 1).min_bytes, c.max_bytes + 1);
      }
    }
  }
  EXPECT_EQ(tuned.choice(Coll::kAllreduce, 4, 1500).min_bytes, 1000u);
  EXPECT_EQ(tuned.choice(Coll::kAllreduce, 4, 1500).max_bytes, 4999u);
  EXPECT_EQ(tuned.choice(Coll::kBcast, 3, 10).algorithm, &tuned.algorithm(Coll::kBcast, 3, 10));
}

TEST(Selection, LoadReadsAFileAndNamesItInErrors) {
  TempFile good("allreduce 2 0 binomial\n");
  const SelectionTable t = SelectionTable::load(good.path());
  EXPECT_EQ(algo(t, Coll::kAllreduce, 2, 10), "binomial");

  TempFile bad("allreduce 2 0 binomial\nallreduce 2 1Q ring\n");
  try {
    SelectionTable::load(bad.path());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find("COLL_TUNING_FILE=" + bad.path() + ": line 2"),
              std::string::npos)
        << e.what();
  }
  try {
    SelectionTable::load("/nonexistent/tuning.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find("COLL_TUNING_FILE=/nonexistent/tuning.txt: cannot open"),
              std::string::npos)
        << e.what();
  }
  // Not a small regular file: refused at once, not read until memory runs
  // out (/dev/zero), waited on forever (a FIFO) or taken as empty (a
  // directory).
  char dir[] = "/tmp/coll-tuning-dir-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo", big = std::string(dir) + "/big";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  { std::ofstream(big) << std::string((1 << 20) + 1, '#'); }
  const std::pair<std::string, std::string> cases[] = {
      {"/dev/zero", "not a regular file (a character device)"},
      {fifo, "not a regular file (a FIFO)"},
      {dir, "not a regular file (a directory)"},
      {big, "is 1048577 bytes, more than the 1048576"}};
  for (const auto& [path, why] : cases) {
    try {
      SelectionTable::load(path);
      ADD_FAILURE() << path << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
      EXPECT_NE(std::string(e.what()).find("COLL_TUNING_FILE=" + path + ": " + why),
                std::string::npos)
          << e.what();
    }
  }
  unlink(fifo.c_str());
  unlink(big.c_str());
  rmdir(dir);
}

// The only test that touches the process-wide selection: the first call
// with a bad file fails (and keeps failing), once fixed the file is used.
TEST(Selection, ChooseReadsCollTuningFileAtFirstUse) {
  TempFile tuning("allreduce 3 0 recursive_doubling\n");
  TempFile broken("allreduce 3 0 no_such_algo\n");
  setenv("COLL_TUNING_FILE", broken.path().c_str(), 1);
  EXPECT_THROW(load_selection(false), Error);
  EXPECT_THROW(choose_algorithm(Coll::kAllreduce, 3, 8), Error);
  EXPECT_THROW(choose_algorithm(Coll::kBcast, 3, 8), Error);
  setenv("COLL_TUNING_FILE", tuning.path().c_str(), 1);
  EXPECT_EQ(std::string(choose_algorithm(Coll::kAllreduce, 3, 8).name), "recursive_doubling");
  EXPECT_EQ(std::string(choose_algorithm(Coll::kAllreduce, 3, 1 << 30).name), "recursive_doubling");
  unsetenv("COLL_TUNING_FILE");
  // Read once: later changes of the environment do not matter.
  EXPECT_EQ(std::string(choose_algorithm(Coll::kAllreduce, 3, 8).name), "recursive_doubling");
}

TEST(Selection, ForcedNamesAreFoundOrRejectedWithTheValidOnes) {
  for (const char* name :
       {"ring", "tree", "binomial", "recursive_doubling", "rabenseifner", "direct", "hierarchical"})
    EXPECT_EQ(std::string(find_algorithm(Coll::kAllreduce, name).name), name);
  for (const char* name : {"ring", "tree", "binomial", "scatter_allgather", "hierarchical"})
    EXPECT_EQ(std::string(find_algorithm(Coll::kBcast, name).name), name);
  try {
    find_algorithm(Coll::kBcast, "recursive_doubling");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
    EXPECT_STREQ(e.what(),
                 "COLL_BCAST_ALGO=recursive_doubling: unknown algorithm (valid: ring, binomial, "
                 "tree, scatter_allgather, linear, hierarchical, auto)");
  }
  EXPECT_THROW(find_algorithm(Coll::kAllreduce, ""), Error);
  EXPECT_EQ(lookup_algorithm(Coll::kAllreduce, "Ring"), nullptr);
}

// A bcast that goes zero-copy where that spares copies runs the ring,
// whatever the table chose; every other collective keeps the table's.
TEST(Selection, ZeroCopyBcastRunsTheRingOthersKeepTheirChoice) {
  for (const char* name : {"ring", "binomial", "tree", "scatter_allgather", "linear"})
    EXPECT_STREQ(zero_copy_choice(find_algorithm(Coll::kBcast, name), Coll::kBcast).name, "ring");
  EXPECT_STREQ(zero_copy_choice(choose_algorithm(Coll::kBcast, 2, size_t(4) << 20), Coll::kBcast)
                   .name,
               "ring");
  for (const char* name : {"ring", "tree", "recursive_doubling", "rabenseifner"})
    EXPECT_STREQ(zero_copy_choice(find_algorithm(Coll::kAllreduce, name), Coll::kAllreduce).name,
                 name);
  EXPECT_STREQ(zero_copy_choice(find_algorithm(Coll::kAlltoall, "pairwise"), Coll::kAlltoall).name,
               "pairwise");
}

}  // namespace
}  // namespace coll
