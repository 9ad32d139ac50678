// collrun run for real on launch_helper (tests/collrun/launch_helper.cpp).
// Every run is bounded by run_process's limit, far above what a run needs
// but far below the helper's own ten minutes of sleep: a launcher that did
// not end ranks shows up as timed_out, never as a hung test.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "host_topology.hpp"
#include "run_process.hpp"

namespace collrun_test {
namespace {

class CollrunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    collrun_ = path_from_env("COLLRUN");
    helper_ = path_from_env("LAUNCH_HELPER");
    ASSERT_FALSE(collrun_.empty()) << "COLLRUN is not set (run through meson)";
    ASSERT_FALSE(helper_.empty()) << "LAUNCH_HELPER is not set";
  }

  ProcessResult collrun(std::vector<std::string> args, const std::vector<std::string>& env = {},
                        const std::string& input = "") {
    args.insert(args.begin(), collrun_);
    return run_process(args, env, 120, input);
  }

  // The CPUs a rank of a job without binding options may run on:
  // collrun's own. Empty when that job fails.
  std::set<int> unbound_cpus();

  std::string collrun_;
  std::string helper_;
};

TEST_F(CollrunTest, AllRanksExitZeroGivesZero) {
  ProcessResult r = collrun({"-np", "3", helper_, "exit", "0", "0", "0"});
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.status, 0) << explain(r);
}

TEST_F(CollrunTest, FirstFailingRankGivesTheStatusAndEndsTheOthers) {
  // Rank 1 exits 3 while rank 2 would sleep for ten minutes.
  ProcessResult r = collrun({"-np", "3", helper_, "exit", "0", "3", "sleep"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 3) << explain(r);
  EXPECT_NE(r.err.find("collrun: rank 1 (pid "), std::string::npos) << explain(r);
  EXPECT_NE(r.err.find(") exited with status 3; terminating the job"), std::string::npos)
      << explain(r);
}

TEST_F(CollrunTest, RankKilledBySignalGives128PlusSignal) {
  ProcessResult r = collrun({"-np", "3", helper_, "exit", "sleep", "sleep", "kill9"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 128 + 9) << explain(r);
  EXPECT_TRUE(
      std::regex_search(r.err, std::regex("collrun: rank 2 \\(pid [0-9]+\\) killed by signal 9 "
                                          "\\([^)]*\\); terminating the job")))
      << explain(r);
  // One line names the failure; the ranks collrun ended are not reported
  // as failures of their own.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << explain(r);
}

// --enable-recovery: a rank that dies (a signal, or a non-zero exit
// without coll_finalize: these ranks never init) ends nothing; each is
// named once, at the end.
TEST_F(CollrunTest, RecoveryKeepsTheOthersAndNamesTheDead) {
  ProcessResult r =
      collrun({"--enable-recovery", "-np", "4", helper_, "exit", "0", "3", "kill9", "0"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 0) << explain(r);
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("collrun: rank 1 \\(pid [0-9]+\\) died: exited with status 3 before "
                        "coll_finalize; the job went on without it \\(--enable-recovery\\)\n")))
      << explain(r);
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex("collrun: rank 2 \\(pid [0-9]+\\) died: killed by signal 9 \\([^)]*\\); "
                        "the job went on without it")))
      << explain(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << explain(r);
}

TEST_F(CollrunTest, RecoveryWhereEveryRankDiedIsAFailure) {
  ProcessResult r = collrun({"--enable-recovery", "-np", "2", helper_, "exit", "kill9", "4"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_NE(r.status, 0) << explain(r);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << explain(r);
}

// --timeout still ends everything under --enable-recovery.
TEST_F(CollrunTest, RecoveryStillEndsTheJobOnTimeout) {
  ProcessResult r =
      collrun({"--enable-recovery", "--timeout", "1", "-np", "2", helper_, "exit", "kill9", "sleep"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 124) << explain(r);
  EXPECT_NE(r.err.find("collrun: job timed out after 1 s"), std::string::npos) << explain(r);
  EXPECT_NE(r.err.find("collrun: rank 0 (pid "), std::string::npos) << explain(r);
}

TEST_F(CollrunTest, RankIgnoringSigtermIsKilled) {
  ProcessResult r = collrun({"-np", "2", helper_, "ignore-term"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 7) << explain(r);
  EXPECT_NE(r.out.find("rank 1 ignores SIGTERM"), std::string::npos) << explain(r);
}

TEST_F(CollrunTest, TimeoutEndsTheJobWith124) {
  ProcessResult r = collrun({"--timeout", "1", "-np", "2", helper_, "sleep"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 124) << explain(r);
  EXPECT_NE(r.err.find("collrun: job timed out after 1 s"), std::string::npos) << explain(r);
}

TEST_F(CollrunTest, SigtermToCollrunIsForwardedToTheRanks) {
  ProcessResult r = collrun({"-np", "3", helper_, "signal-launcher"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 128 + 15) << explain(r);  // the ranks died of it
  EXPECT_NE(r.err.find("collrun: received signal 15"), std::string::npos) << explain(r);
}

TEST_F(CollrunTest, EnvironmentNamesTheJob) {
  ProcessResult r = collrun({"-np", "2", helper_, "env", "COLL_RANK", "COLL_SIZE",
                             "COLL_LOCAL_RANK", "COLL_LOCAL_SIZE", "COLL_JOBID", "COLL_BOOTSTRAP"});
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank = 0; rank < 2; ++rank) {
    std::string tag = "rank " + std::to_string(rank) + " ";
    EXPECT_NE(r.out.find(tag + "COLL_RANK=" + std::to_string(rank) + "\n"), std::string::npos)
        << explain(r);
    EXPECT_NE(r.out.find(tag + "COLL_SIZE=2\n"), std::string::npos);
    EXPECT_NE(r.out.find(tag + "COLL_LOCAL_RANK=" + std::to_string(rank)), std::string::npos);
    EXPECT_NE(r.out.find(tag + "COLL_LOCAL_SIZE=2\n"), std::string::npos);
  }
  std::smatch match;
  ASSERT_TRUE(std::regex_search(r.out, match, std::regex("rank 0 COLL_JOBID=([A-Za-z0-9_.-]+)\n")))
      << explain(r);
  std::string job_id = match[1];
  EXPECT_NE(r.out.find("rank 1 COLL_JOBID=" + job_id + "\n"), std::string::npos);
  EXPECT_TRUE(
      std::regex_search(r.out, std::regex("rank 0 COLL_BOOTSTRAP=127\\.0\\.0\\.1:[0-9]+\n")));

  // Another job gets another id.
  ProcessResult again = collrun({"-np", "1", helper_, "env", "COLL_JOBID"});
  ASSERT_EQ(again.status, 0);
  EXPECT_EQ(again.out.find(job_id), std::string::npos) << again.out;
}

// torch.distributed's env:// variables, as torchrun sets them: a script
// written for torchrun runs under collrun unchanged.
TEST_F(CollrunTest, EnvironmentForTorch) {
  ProcessResult r = collrun({"-np", "2", helper_, "env", "RANK", "LOCAL_RANK", "WORLD_SIZE",
                             "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"},
                            {"RANK=7", "MASTER_ADDR", "MASTER_PORT"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::smatch match;
  ASSERT_TRUE(std::regex_search(r.out, match, std::regex("rank 0 MASTER_PORT=([0-9]+)\n")))
      << explain(r);
  const int port = std::stoi(match[1]);
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  for (int rank = 0; rank < 2; ++rank) {
    std::string tag = "rank " + std::to_string(rank) + " ";
    // collrun's rank, not an outer RANK.
    EXPECT_NE(r.out.find(tag + "RANK=" + std::to_string(rank) + "\n"), std::string::npos)
        << explain(r);
    EXPECT_NE(r.out.find(tag + "LOCAL_RANK=" + std::to_string(rank) + "\n"), std::string::npos);
    EXPECT_NE(r.out.find(tag + "WORLD_SIZE=2\n"), std::string::npos);
    EXPECT_NE(r.out.find(tag + "LOCAL_WORLD_SIZE=2\n"), std::string::npos);
    EXPECT_NE(r.out.find(tag + "MASTER_ADDR=127.0.0.1\n"), std::string::npos);
    EXPECT_NE(r.out.find(tag + "MASTER_PORT=" + match[1].str() + "\n"), std::string::npos);
  }

  // The user's MASTER_ADDR and MASTER_PORT are kept.
  ProcessResult given = collrun({"-np", "2", helper_, "env", "MASTER_ADDR", "MASTER_PORT"},
                                {"MASTER_ADDR=10.1.2.3", "MASTER_PORT=29555"});
  ASSERT_EQ(given.status, 0) << explain(given);
  for (std::string rank : {"0", "1"}) {
    EXPECT_NE(given.out.find("rank " + rank + " MASTER_ADDR=10.1.2.3\n"), std::string::npos)
        << explain(given);
    EXPECT_NE(given.out.find("rank " + rank + " MASTER_PORT=29555\n"), std::string::npos)
        << explain(given);
  }
}

TEST_F(CollrunTest, DashXForwardsAndSets) {
  ProcessResult r =
      collrun({"-x", "FORWARDED_VAR", "-x", "SET_VAR=set value", "-x", "COLL_FAKE=a=b", "-np", "2",
               helper_, "env", "FORWARDED_VAR", "SET_VAR", "COLL_FAKE", "PMIX_RANK"},
              {"FORWARDED_VAR=from collrun", "SET_VAR=overridden", "PMIX_RANK=5"});
  ASSERT_EQ(r.status, 0) << explain(r);
  for (std::string rank : {"0", "1"}) {
    EXPECT_NE(r.out.find("rank " + rank + " FORWARDED_VAR=from collrun\n"), std::string::npos)
        << explain(r);
    EXPECT_NE(r.out.find("rank " + rank + " SET_VAR=set value\n"), std::string::npos) << explain(r);
    EXPECT_NE(r.out.find("rank " + rank + " COLL_FAKE=a=b\n"), std::string::npos) << explain(r);
    // An outer PMIx launcher's identity is not passed on.
    EXPECT_NE(r.out.find("rank " + rank + " PMIX_RANK unset\n"), std::string::npos) << explain(r);
  }
}

TEST_F(CollrunTest, DashXOfAnUnsetVariableWarns) {
  ProcessResult r = collrun(
      {"-x", "SURELY_NOT_SET_ANYWHERE", "-np", "1", helper_, "env", "SURELY_NOT_SET_ANYWHERE"},
      {"SURELY_NOT_SET_ANYWHERE"});
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_NE(r.err.find("SURELY_NOT_SET_ANYWHERE is not set"), std::string::npos) << explain(r);
  EXPECT_NE(r.out.find("rank 0 SURELY_NOT_SET_ANYWHERE unset"), std::string::npos);
}

// Every line of a stream with --tag-output: the prefix, then exactly what
// the helper wrote as one line.
void expect_whole_tagged_lines(const std::string& text, const char* stream, int ranks,
                               int lines_per_rank) {
  std::regex line_format(std::string("\\[1,([0-9]+)\\]<") + stream +
                         ">:rank ([0-9]+) fd [12] line ([0-9]+) x+ end");
  std::map<int, int> next_line;
  for (const std::string& line : split_lines(text)) {
    std::smatch match;
    ASSERT_TRUE(std::regex_match(line, match, line_format))
        << "not a whole tagged line: '" << line << "'";
    int tag_rank = std::stoi(match[1]);
    EXPECT_EQ(tag_rank, std::stoi(match[2]));
    // A rank's lines keep their order.
    EXPECT_EQ(std::stoi(match[3]), next_line[tag_rank]++);
  }
  for (int rank = 0; rank < ranks; ++rank)
    EXPECT_EQ(next_line[rank], lines_per_rank) << "rank " << rank;
}

TEST_F(CollrunTest, TagOutputPrefixesWholeLines) {
  ProcessResult r = collrun({"--tag-output", "-np", "3", helper_, "lines", "300"});
  ASSERT_EQ(r.status, 0) << explain(r);
  expect_whole_tagged_lines(r.out, "stdout", 3, 300);
  expect_whole_tagged_lines(r.err, "stderr", 3, 300);
}

TEST_F(CollrunTest, LinesOfRanksNeverInterleave) {
  ProcessResult r = collrun({"-np", "3", helper_, "lines", "300"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::regex line_format("rank ([0-9]) fd 1 line ([0-9]+) x+ end");
  int lines = 0;
  for (const std::string& line : split_lines(r.out)) {
    ASSERT_TRUE(std::regex_match(line, line_format)) << "'" << line << "'";
    ++lines;
  }
  EXPECT_EQ(lines, 900);
}

TEST_F(CollrunTest, PartialLinesAreHeldUntilComplete) {
  ProcessResult r = collrun({"--tag-output", "-np", "2", helper_, "partial"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::multiset<std::string> lines;
  for (const std::string& line : split_lines(r.out)) lines.insert(line);
  for (std::string rank : {"0", "1"}) {
    std::string tag = "[1," + rank + "]<stdout>:";
    EXPECT_EQ(lines.count(tag + "first half second half of rank " + rank), 1u) << r.out;
    EXPECT_EQ(lines.count(tag + "no newline at the end"), 1u) << r.out;
  }
  EXPECT_EQ(lines.size(), 4u) << r.out;
}

TEST_F(CollrunTest, StdinGoesToRankZero) {
  ProcessResult r = collrun({"-np", "2", helper_, "stdin"}, {}, "some input\nmore\n");
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_EQ(r.out, "some input\nmore\n");
}

// The ranks' output names the job id (the one group of `pattern`): once
// collrun has ended, no /dev/shm/coll-<id>-* may be left.
void expect_no_shm_of_the_job_left(const ProcessResult& r, const char* pattern) {
  std::smatch match;
  ASSERT_TRUE(std::regex_search(r.out, match, std::regex(pattern))) << explain(r);
  std::string prefix = "coll-" + std::string(match[1]) + "-";
  bool found = false;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (dirent* entry = ::readdir(dir))
      if (std::string(entry->d_name).starts_with(prefix)) found = true;
    ::closedir(dir);
  }
  EXPECT_FALSE(found) << "collrun left /dev/shm/" << prefix << "* behind";
}

TEST_F(CollrunTest, SharedMemoryOfAKilledJobIsRemoved) {
  ProcessResult r = collrun({"-np", "3", helper_, "shm-then-die"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 128 + 9) << explain(r);
  expect_no_shm_of_the_job_left(r, "created /dev/shm/coll-([A-Za-z0-9_.-]+)-helper-0");
}

TEST_F(CollrunTest, SharedMemoryIsRemovedAfterAFailedJobToo) {
  // ignore-term leaves a marker file in the job's /dev/shm namespace.
  ProcessResult r = collrun({"-np", "2", helper_, "ignore-term"});
  ASSERT_EQ(r.status, 7) << explain(r);
  expect_no_shm_of_the_job_left(r, "rank 1 ignores SIGTERM in job ([A-Za-z0-9_.-]+)");
}

// "rank R cpus 0 1 ..." lines of the affinity helper, by rank.
std::map<int, std::set<int>> parse_affinity(const std::string& out) {
  std::map<int, std::set<int>> sets;
  std::regex format("rank ([0-9]+) cpus((?: [0-9]+)+)");
  for (const std::string& line : split_lines(out)) {
    std::smatch match;
    if (!std::regex_match(line, match, format)) continue;
    std::set<int>& cpus = sets[std::stoi(match[1])];
    std::string list = match[2];
    for (size_t at = 0; at < list.size();) {
      size_t used = 0;
      cpus.insert(std::stoi(list.substr(at), &used));
      at += used;
    }
  }
  return sets;
}

std::set<int> CollrunTest::unbound_cpus() {
  ProcessResult unbound = collrun({"-np", "1", helper_, "affinity"});
  EXPECT_EQ(unbound.status, 0) << explain(unbound);
  EXPECT_EQ(unbound.err.find("MCW rank"), std::string::npos) << "reported unasked\n"
                                                             << explain(unbound);
  return parse_affinity(unbound.out)[0];
}

TEST_F(CollrunTest, BindToCoreGivesEachRankOneCore) {
  std::set<int> allowed = unbound_cpus();
  ASSERT_FALSE(allowed.empty());

  ProcessResult r = collrun({"--bind-to", "core", "-np", "2", helper_, "affinity"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::map<int, std::set<int>> sets = parse_affinity(r.out);
  ASSERT_EQ(sets.size(), 2u) << r.out;
  for (auto& [rank, cpus] : sets) {
    EXPECT_FALSE(cpus.empty());
    EXPECT_TRUE(std::includes(allowed.begin(), allowed.end(), cpus.begin(), cpus.end()))
        << "rank " << rank << " is bound outside collrun's CPUs\n"
        << r.out;
  }
  if (sets[0] != allowed) {
    // More than one core: the two ranks share none.
    std::vector<int> shared;
    std::set_intersection(sets[0].begin(), sets[0].end(), sets[1].begin(), sets[1].end(),
                          std::back_inserter(shared));
    EXPECT_TRUE(shared.empty()) << r.out;
  }
  // Unbound is the default.
  ProcessResult again = collrun({"-np", "2", helper_, "affinity"});
  ASSERT_EQ(again.status, 0);
  for (auto& [rank, cpus] : parse_affinity(again.out)) EXPECT_EQ(cpus, allowed) << again.out;
}

// One --report-bindings line: "[host:pid] MCW rank R bound to socket
// S[core C[hwt H]], ...: [B/.]" or "[host:pid] MCW rank R is not bound
// (...)".
struct BindingReport {
  std::string host;
  bool bound = false;
  std::map<int, std::string> threads_of_core;  // C -> H ("0", "0-1")
  std::string map;                             // "[B/.]"
};

std::map<int, BindingReport> parse_binding_reports(const std::string& err) {
  std::map<int, BindingReport> reports;
  std::regex bound(R"(\[([^:\]]+):[0-9]+\] MCW rank ([0-9]+) bound to (.+): ((\[[B./]+\])+))");
  std::regex not_bound(
      R"(\[([^:\]]+):[0-9]+\] MCW rank ([0-9]+) is not bound \(or bound to all available processors\))");
  std::regex one_core(R"(socket [0-9]+\[core ([0-9]+)\[hwt ([0-9,-]+)\]\])");
  for (const std::string& line : split_lines(err)) {
    std::smatch match;
    BindingReport report;
    if (std::regex_match(line, match, bound)) {
      report.bound = true;
      report.map = match[4];
      std::string cores = match[3];
      for (std::sregex_iterator it(cores.begin(), cores.end(), one_core), end; it != end; ++it)
        report.threads_of_core[std::stoi((*it)[1])] = (*it)[2];
    } else if (!std::regex_match(line, match, not_bound)) {
      continue;
    }
    report.host = match[1];
    reports[std::stoi(match[2])] = report;
  }
  return reports;
}

// The CPUs a report names: hardware thread H of core C is the H-th CPU of
// this host's core C, as collrun numbers them (host_topology.hpp).
std::set<int> cpus_named(const BindingReport& report, const collrun::HostTopology& topology) {
  std::set<int> named;
  for (const auto& [core, threads] : report.threads_of_core) {
    if (size_t(core) >= topology.cores.size()) return {-1};  // no such core
    std::vector<int> cpus_of_core;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &topology.cores[size_t(core)])) cpus_of_core.push_back(cpu);
    for (size_t at = 0; at < threads.size();) {  // "0", "0-1", "0,2"
      size_t used = 0;
      int first = std::stoi(threads.substr(at), &used), last = first;
      at += used;
      if (at < threads.size() && threads[at] == '-') {
        last = std::stoi(threads.substr(at + 1), &used);
        at += used + 1;
      }
      if (at < threads.size() && threads[at] == ',') ++at;
      for (int thread = first; thread <= last; ++thread)
        named.insert(size_t(thread) < cpus_of_core.size() ? cpus_of_core[size_t(thread)] : -1);
    }
  }
  return named;
}

// Every rank of `r` has a report line, and what it says is what the rank
// runs on: the CPUs it names, or all of collrun's (`allowed`) when it says
// "not bound". Returns the reports.
std::map<int, BindingReport> expect_reports_match_affinity(const ProcessResult& r, int ranks,
                                                           const std::set<int>& allowed) {
  std::string note;
  collrun::HostTopology topology = collrun::discover_host_topology(&note);
  EXPECT_FALSE(topology.cores.empty()) << note;
  std::map<int, BindingReport> reports = parse_binding_reports(r.err);
  std::map<int, std::set<int>> affinity = parse_affinity(r.out);
  EXPECT_EQ(reports.size(), size_t(ranks)) << explain(r);
  EXPECT_EQ(affinity.size(), size_t(ranks)) << explain(r);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  for (const auto& [rank, report] : reports) {
    EXPECT_EQ(report.host, host);
    if (!report.bound) {
      EXPECT_EQ(affinity[rank], allowed) << "rank " << rank << " said not bound\n" << explain(r);
      continue;
    }
    EXPECT_EQ(cpus_named(report, topology), affinity[rank]) << "rank " << rank << "\n"
                                                            << explain(r);
    EXPECT_EQ(std::count(report.map.begin(), report.map.end(), 'B'), long(affinity[rank].size()))
        << report.map;
  }
  return reports;
}

TEST_F(CollrunTest, ReportBindingsSaysWhatEachRankRunsOn) {
  std::set<int> allowed = unbound_cpus();
  ASSERT_FALSE(allowed.empty());
  std::string note;
  const size_t cores = collrun::discover_host_topology(&note).cores.size();
  ASSERT_GT(cores, 0u) << note;

  // One rank more than cores: the last shares rank 0's core.
  const int ranks = static_cast<int>(cores) + 1;
  ProcessResult r = collrun({"--map-by", "core", "--bind-to", "core", "--report-bindings", "-np",
                             std::to_string(ranks), helper_, "affinity"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::map<int, BindingReport> reports = expect_reports_match_affinity(r, ranks, allowed);
  for (int rank = 0; rank < ranks && cores > 1; ++rank) {
    ASSERT_TRUE(reports[rank].bound) << explain(r);
    int core = rank % static_cast<int>(cores);
    EXPECT_EQ(reports[rank].threads_of_core.size(), 1u) << explain(r);
    EXPECT_EQ(reports[rank].threads_of_core.count(core), 1u) << "rank " << rank << "\n"
                                                             << explain(r);
  }
  // collrun's own lines: nothing but the reports (no note on this host).
  for (const std::string& line : split_lines(r.err))
    EXPECT_NE(line.find("] MCW rank "), std::string::npos) << explain(r);

  ProcessResult none =
      collrun({"--bind-to", "none", "--report-bindings", "-np", "2", helper_, "affinity"});
  ASSERT_EQ(none.status, 0) << explain(none);
  for (const auto& [rank, report] : expect_reports_match_affinity(none, 2, allowed))
    EXPECT_FALSE(report.bound) << explain(none);

  // NUMA nodes and packages, whatever this host has of them.
  for (const char* object : {"numa", "package"}) {
    ProcessResult wide = collrun({"--map-by", object, "--bind-to", object, "--report-bindings",
                                  "-np", "2", helper_, "affinity"});
    ASSERT_EQ(wide.status, 0) << explain(wide);
    expect_reports_match_affinity(wide, 2, allowed);
  }
}

TEST_F(CollrunTest, BadUsageExitsTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{helper_}, "missing -np"},
      {{"-np", "2"}, "no program"},
      {{"-np", "0", helper_}, "not a positive integer"},
      {{"-np", "abc", helper_}, "not a positive integer"},
      {{"-np", "-3", helper_}, "not a positive integer"},
      {{"-np"}, "needs a value"},
      {{"--timeout", "soon", "-np", "1", helper_}, "--timeout 'soon'"},
      {{"--bind-to", "board", "-np", "1", helper_}, "--bind-to 'board'"},
      {{"--map-by", "ppr:1:node", "-np", "1", helper_}, "--map-by 'ppr:1:node'"},
      {{"--mca", "btl", "self", "-np", "1", helper_}, "unknown option '--mca'"},
      {{"-np", "1", "surely-no-such-program-here"}, "'surely-no-such-program-here' not found"},
      {{"-np", "1", "./surely/no/such/program"}, "'./surely/no/such/program' not found"},
  };
  for (const Case& c : cases) {
    ProcessResult r = collrun(c.args);
    EXPECT_EQ(r.status, 2) << c.message << "\n" << explain(r);
    EXPECT_NE(r.err.find(c.message), std::string::npos) << "expected '" << c.message << "' in:\n"
                                                        << r.err;
  }
}

TEST_F(CollrunTest, MpirunFlagsAreAccepted) {
  ProcessResult r = collrun({"--allow-run-as-root", "--oversubscribe", "-n", "2", "--bind-to",
                             "none", "--np=2", helper_, "exit", "0", "0"});
  EXPECT_EQ(r.status, 0) << explain(r);
  ProcessResult help = collrun({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("usage: collrun -np N"), std::string::npos);
}

TEST_F(CollrunTest, ProgramArgumentsAreNotOptions) {
  // Options after the program belong to the program.
  ProcessResult r = collrun({"-np", "1", helper_, "env", "-np", "--tag-output"});
  ASSERT_EQ(r.status, 0) << explain(r);
  EXPECT_EQ(r.out, "rank 0 -np unset\nrank 0 --tag-output unset\n");
}

}  // namespace
}  // namespace collrun_test
