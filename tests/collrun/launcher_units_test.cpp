// Unit tests of collrun's pieces that need no processes: the command line,
// line buffering of output, shared-memory cleanup, this host's topology
// (the placement math has cpu_placement_test.cpp).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "host_topology.hpp"
#include "launch_options.hpp"
#include "line_buffer.hpp"
#include "rank_process.hpp"
#include "shm_cleanup.hpp"

namespace collrun {
namespace {

TEST(LaunchOptions, MpirunStyleCommandLine) {
  LaunchOptions o = parse_launch_options(
      {"--allow-run-as-root", "-np", "4", "-x", "A", "-x", "B=c=d", "--bind-to", "core",
       "--tag-output", "--timeout", "2.5", "--oversubscribe", "prog", "-np", "7", "--tag-output"});
  EXPECT_EQ(o.num_ranks, 4);
  EXPECT_EQ(o.exports, (std::vector<std::string>{"A", "B=c=d"}));
  EXPECT_EQ(o.bind_to, BindTo::core);
  EXPECT_EQ(o.map_by, MapBy::slot);
  EXPECT_FALSE(o.report_bindings);
  EXPECT_TRUE(o.tag_output);
  ASSERT_TRUE(o.timeout_s.has_value());
  EXPECT_DOUBLE_EQ(*o.timeout_s, 2.5);
  EXPECT_EQ(o.timeout_text, "2.5");
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "-np", "7", "--tag-output"}));
}

TEST(LaunchOptions, SpellingsOfTheRankCount) {
  for (std::vector<std::string> args : {std::vector<std::string>{"-n", "3", "p"},
                                        {"-np", "3", "p"},
                                        {"--np", "3", "p"},
                                        {"--np=3", "p"},
                                        {"--n=3", "p"}}) {
    LaunchOptions o = parse_launch_options(args);
    EXPECT_EQ(o.num_ranks, 3) << args[0];
    EXPECT_EQ(o.command, std::vector<std::string>{"p"});
  }
}

TEST(LaunchOptions, DoubleDashEndsOptions) {
  LaunchOptions o = parse_launch_options({"-np", "1", "--", "-weird-name"});
  EXPECT_EQ(o.command, std::vector<std::string>{"-weird-name"});
}

TEST(LaunchOptions, HelpNeedsNothingElse) {
  EXPECT_TRUE(parse_launch_options({"--help"}).help);
  EXPECT_TRUE(parse_launch_options({"-h"}).help);
}

TEST(LaunchOptions, BadCommandLinesSayWhy) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {{"prog"}, "missing -np"},
           {{"-np", "2"}, "no program"},
           {{"-np", "0", "p"}, "not a positive integer"},
           {{"-np", "2x", "p"}, "not a positive integer"},
           {{"-np", "99999999999999999999", "p"}, "not a positive integer"},
           {{"-np", "100000", "p"}, "at most"},
           {{"-np"}, "needs a value"},
           {{"-x", "1BAD=v", "-np", "1", "p"}, "VAR"},
           {{"-x", "=v", "-np", "1", "p"}, "VAR"},
           {{"--timeout", "0", "-np", "1", "p"}, "positive number"},
           {{"--timeout", "nan", "-np", "1", "p"}, "positive number"},
           {{"--tag-output=yes", "-np", "1", "p"}, "takes no value"},
           {{"--bind-to", "hwthread", "-np", "1", "p"}, "core, numa, package or none"},
           {{"--bind-to", "core:overload-allowed", "-np", "1", "p"}, "--bind-to 'core:"},
           {{"--map-by", "ppr:2:node", "-np", "1", "p"}, "slot, core, numa, package or node"},
           {{"--map-by", "-np", "1", "p"}, "--map-by '-np'"},
           {{"--report-bindings=yes", "-np", "1", "p"}, "takes no value"},
           {{"--mca", "plm_rsh_agent", "ssh", "-np", "1", "p"}, "unknown option '--mca'"},
       }) {
    try {
      parse_launch_options(c.args);
      ADD_FAILURE() << "accepted: " << c.args[0];
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find(c.message), std::string::npos) << error.what();
    }
  }
}

TEST(LineBuffer, HoldsPartialLinesAndPrefixesWholeOnes) {
  LineBuffer buffer("[1,2]<stdout>:");
  EXPECT_EQ(buffer.feed("ab"), "");
  EXPECT_EQ(buffer.feed("c\nde"), "[1,2]<stdout>:abc\n");
  EXPECT_EQ(buffer.feed("f\ng\n\n"), "[1,2]<stdout>:def\n[1,2]<stdout>:g\n[1,2]<stdout>:\n");
  EXPECT_EQ(buffer.feed("tail"), "");
  EXPECT_EQ(buffer.finish(), "[1,2]<stdout>:tail\n");
  EXPECT_EQ(buffer.finish(), "");
}

TEST(LineBuffer, WithoutPrefixTheBytesAreUnchanged) {
  LineBuffer buffer("");
  std::string out = buffer.feed("x\ny");
  out += buffer.feed("z");
  out += buffer.finish();
  EXPECT_EQ(out, "x\nyz");  // no '\n' invented at the end
}

TEST(LineBuffer, CutsOverlongLines) {
  LineBuffer buffer(">", 4);
  EXPECT_EQ(buffer.feed("abcdefghij"), ">abcd\n>efgh\n");
  EXPECT_EQ(buffer.pending_bytes(), 2u);
  EXPECT_EQ(buffer.feed("\n"), ">ij\n");
  EXPECT_EQ(buffer.feed("wxyz\n"), ">wxyz\n");  // exactly the limit: whole
}

class ShmCleanup : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/collrun-shm-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::string command = "rm -rf '" + dir_ + "'";
    ASSERT_EQ(std::system(command.c_str()), 0);
  }
  void touch(const std::string& name) {
    int fd = ::open((dir_ + "/" + name).c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0);
    ::close(fd);
  }
  bool exists(const std::string& name) { return ::access((dir_ + "/" + name).c_str(), F_OK) == 0; }
  std::string dir_;
};

TEST_F(ShmCleanup, RemovesOnlyTheJobsEntries) {
  touch("coll-123xab-seg0");
  touch("coll-123xab-window-1-2");
  touch("coll-123xabc-other-job");
  touch("coll-999x00-seg0");
  touch("unrelated");
  std::vector<std::string> removed = remove_entries_with_prefix(dir_, shm_prefix_for_job("123xab"));
  EXPECT_EQ(removed.size(), 2u);
  EXPECT_FALSE(exists("coll-123xab-seg0"));
  EXPECT_FALSE(exists("coll-123xab-window-1-2"));
  EXPECT_TRUE(exists("coll-123xabc-other-job"));
  EXPECT_TRUE(exists("coll-999x00-seg0"));
  EXPECT_TRUE(exists("unrelated"));
}

TEST_F(ShmCleanup, EmptyPrefixRemovesNothing) {
  touch("a");
  EXPECT_TRUE(remove_entries_with_prefix(dir_, "").empty());
  EXPECT_TRUE(exists("a"));
  EXPECT_TRUE(remove_entries_with_prefix(dir_ + "/missing", "coll-").empty());
}

// This machine as collrun sees it: every core, NUMA node and package holds
// CPUs of the test's affinity mask, each CPU of the mask is in exactly one
// core, and NUMA nodes and packages hold whole cores.
TEST(HostTopology, ObjectsHoldOnlyUsableCpusAndCoresCoverThemOnce) {
  std::string note;
  HostTopology topology = discover_host_topology(&note);
  ASSERT_FALSE(topology.cores.empty()) << note;
  cpu_set_t allowed, covered;
  ASSERT_EQ(::sched_getaffinity(0, sizeof allowed, &allowed), 0);
  CPU_ZERO(&covered);
  auto within = [](const cpu_set_t& inner, const cpu_set_t& outer) {
    cpu_set_t both;
    CPU_AND(&both, &inner, &outer);
    return CPU_EQUAL(&both, &inner);
  };
  for (const cpu_set_t& core : topology.cores) {
    EXPECT_GT(CPU_COUNT(&core), 0);
    EXPECT_TRUE(within(core, allowed)) << describe_cpu_set(core);
    cpu_set_t both;
    CPU_AND(&both, &core, &covered);
    EXPECT_EQ(CPU_COUNT(&both), 0) << "two cores share CPUs " << describe_cpu_set(both);
    CPU_OR(&covered, &covered, &core);
  }
  EXPECT_TRUE(CPU_EQUAL(&covered, &allowed)) << describe_cpu_set(covered);
  for (const std::vector<cpu_set_t>* objects : {&topology.numa_nodes, &topology.packages})
    for (const cpu_set_t& object : *objects) {
      EXPECT_GT(CPU_COUNT(&object), 0);
      EXPECT_TRUE(within(object, allowed)) << describe_cpu_set(object);
      for (const cpu_set_t& core : topology.cores) {
        cpu_set_t both;
        CPU_AND(&both, &core, &object);
        EXPECT_TRUE(CPU_COUNT(&both) == 0 || CPU_EQUAL(&both, &core))
            << "core " << describe_cpu_set(core) << " is split by " << describe_cpu_set(object);
      }
    }
#ifdef COLLRUN_HAVE_HWLOC
  EXPECT_TRUE(topology.without_hwloc.empty()) << topology.without_hwloc;
#else
  EXPECT_EQ(topology.without_hwloc, "collrun is built without hwloc");
  EXPECT_TRUE(topology.numa_nodes.empty() && topology.packages.empty());
#endif
}

TEST(CpuBinding, DescribesRanges) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : {0, 1, 2, 5, 7, 8}) CPU_SET(cpu, &set);
  EXPECT_EQ(describe_cpu_set(set), "0-2,5,7-8");
}

TEST(RankProcess, ResolvesLikeExecvp) {
  EXPECT_EQ(resolve_program("sh").value_or("").ends_with("/sh"), true);
  EXPECT_FALSE(resolve_program("surely-no-such-program-here").has_value());
  EXPECT_FALSE(resolve_program("/etc/passwd").has_value());  // not executable
  EXPECT_FALSE(resolve_program("/").has_value());            // a directory
  EXPECT_EQ(resolve_program("/bin/sh").value_or(""), "/bin/sh");
}

TEST(RankProcess, DescribesHowAProcessEnded) {
  EXPECT_EQ(shell_status(3 << 8), 3);
  EXPECT_EQ(describe_wait_status(3 << 8), "exited with status 3");
  EXPECT_EQ(shell_status(9), 137);
  EXPECT_EQ(describe_wait_status(9).rfind("killed by signal 9 (", 0), 0u);
}

}  // namespace
}  // namespace collrun
