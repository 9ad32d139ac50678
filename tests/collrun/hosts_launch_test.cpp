// collrun -H / --hostfile for real, with "remote" hosts reached through fake
// launch agents that run the ranks on this machine with an emptied
// environment (fake_agent.sh) or, like ssh, out of reach of signals
// (fake_ssh_agent.sh). Every run is bounded by run_process's limit; ranks
// that must have ended are looked for in /proc for a bounded time.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_process.hpp"
#include "this_host.hpp"

namespace collrun_test {
namespace {

using Strings = std::vector<std::string>;

std::string read_file(const std::string& path) {
  std::ifstream file(path);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// Pids of processes that have `word` as one of their arguments.
std::vector<int> processes_with_argument(const std::string& word) {
  std::vector<int> found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  while (dirent* entry = ::readdir(proc)) {
    int pid = std::atoi(entry->d_name);
    if (pid <= 0 || pid == ::getpid()) continue;
    std::string cmdline = read_file("/proc/" + std::string(entry->d_name) + "/cmdline");
    std::string_view rest(cmdline);
    while (!rest.empty()) {
      std::string_view arg = rest.substr(0, rest.find('\0'));
      if (arg == word) found.push_back(pid);
      rest.remove_prefix(std::min(rest.size(), arg.size() + 1));
    }
  }
  ::closedir(proc);
  return found;
}

// True once no process has `word` as an argument; false if some still do
// after 20 s (collrun's kill grace is 2 s, the remote watcher's 2 s).
bool all_ended(const std::string& word) {
  for (int i = 0; i < 200; ++i) {
    if (processes_with_argument(word).empty()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

std::string unique_token(const char* what) {
  std::random_device random;
  return std::string("collrun-hosts-test-") + what + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(random());
}

class CollrunHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    collrun_ = path_from_env("COLLRUN");
    helper_ = path_from_env("LAUNCH_HELPER");
    bootstrap_helper_ = path_from_env("BOOTSTRAP_HELPER");
    agent_ = path_from_env("FAKE_AGENT");
    ssh_agent_ = path_from_env("FAKE_SSH_AGENT");
    ASSERT_FALSE(collrun_.empty()) << "COLLRUN is not set (run through meson)";
    ASSERT_FALSE(helper_.empty() || bootstrap_helper_.empty() || agent_.empty() ||
                 ssh_agent_.empty())
        << "LAUNCH_HELPER, BOOTSTRAP_HELPER, FAKE_AGENT, FAKE_SSH_AGENT must be set";
    char dir[] = "/tmp/collrun-hosts-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    agent_log_ = dir_ + "/agent.log";
  }
  void TearDown() override {
    if (dir_.empty()) return;
    ::unlink(agent_log_.c_str());
    ::unlink((dir_ + "/hostfile").c_str());
    ::rmdir(dir_.c_str());
  }

  ProcessResult collrun(Strings args, Strings env = {}, const std::string& input = "") {
    args.insert(args.begin(), collrun_);
    env.push_back("FAKE_AGENT_LOG=" + agent_log_);
    return run_process(args, env, 120, input);
  }

  // "rank R VAR=value" lines of launch_helper's env mode, as a map.
  static std::map<std::string, std::string> env_lines(const std::string& out) {
    std::map<std::string, std::string> values;
    std::regex line("rank ([0-9]+) ([A-Za-z_0-9]+)(=(.*)| unset)");
    for (const std::string& text : split_lines(out)) {
      std::smatch match;
      if (std::regex_match(text, match, line))
        values[std::string(match[1]) + " " + std::string(match[2])] =
            match[3] == " unset" ? "(unset)" : std::string(match[4]);
    }
    return values;
  }

  // Sorted host names the agent was called with.
  std::string agent_calls() {
    Strings hosts = split_lines(read_file(agent_log_));
    std::sort(hosts.begin(), hosts.end());
    std::string text;
    for (const std::string& h : hosts) text += h + " ";
    return text;
  }

  std::string collrun_, helper_, bootstrap_helper_, agent_, ssh_agent_, dir_, agent_log_;
};

TEST_F(CollrunHosts, RemoteRanksGetTheJobsEnvironmentExplicitly) {
  ProcessResult r = collrun({"-H",
                             "localhost:1,fakeb:2",
                             "--launch-agent",
                             agent_,
                             "--bootstrap-addr",
                             "127.0.0.1",
                             "-x",
                             "SET_VAR=a b 'c'",
                             "-x",
                             "FORWARDED_VAR",
                             helper_,
                             "env",
                             "COLL_RANK",
                             "COLL_SIZE",
                             "COLL_LOCAL_RANK",
                             "COLL_LOCAL_SIZE",
                             "COLL_HOST_ID",
                             "COLL_BOOTSTRAP",
                             "COLL_JOBID",
                             "COLL_FROM_ENV",
                             "SET_VAR",
                             "FORWARDED_VAR",
                             "NOT_FORWARDED",
                             "PMIX_RANK"},
                            {"FORWARDED_VAR=fwd", "NOT_FORWARDED=here only", "COLL_FROM_ENV=$x",
                             "PMIX_RANK=4", "COLL_HOST_ID=from the shell"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::map<std::string, std::string> v = env_lines(r.out);
  const char* hosts[] = {"localhost", "fakeb", "fakeb"};
  const char* local_ranks[] = {"0", "0", "1"};
  const char* local_sizes[] = {"1", "2", "2"};
  for (int rank = 0; rank < 3; ++rank) {
    std::string p = std::to_string(rank) + " ";
    EXPECT_EQ(v[p + "COLL_RANK"], std::to_string(rank)) << explain(r);
    EXPECT_EQ(v[p + "COLL_SIZE"], "3");
    EXPECT_EQ(v[p + "COLL_LOCAL_RANK"], local_ranks[rank]) << rank;
    EXPECT_EQ(v[p + "COLL_LOCAL_SIZE"], local_sizes[rank]) << rank;
    // The placement wins over an inherited COLL_HOST_ID.
    EXPECT_EQ(v[p + "COLL_HOST_ID"], hosts[rank]) << rank;
    EXPECT_TRUE(std::regex_match(v[p + "COLL_BOOTSTRAP"], std::regex("127\\.0\\.0\\.1:[0-9]+")))
        << v[p + "COLL_BOOTSTRAP"];
    EXPECT_EQ(v[p + "COLL_JOBID"], v["0 COLL_JOBID"]);
    EXPECT_EQ(v[p + "COLL_FROM_ENV"], "$x") << rank;
    EXPECT_EQ(v[p + "SET_VAR"], "a b 'c'") << rank;
    EXPECT_EQ(v[p + "FORWARDED_VAR"], "fwd") << rank;
    EXPECT_EQ(v[p + "PMIX_RANK"], "(unset)") << rank;
  }
  EXPECT_FALSE(v["0 COLL_JOBID"].empty());
  // Only -x and COLL_* variables reach a remote rank (the agent empties the
  // environment, as ssh passes none).
  EXPECT_EQ(v["0 NOT_FORWARDED"], "here only");
  EXPECT_EQ(v["1 NOT_FORWARDED"], "(unset)");
  EXPECT_EQ(v["2 NOT_FORWARDED"], "(unset)");
  // The agent: once a remote rank, once for the /dev/shm clean-up; never
  // for this host.
  EXPECT_EQ(agent_calls(), "fakeb fakeb fakeb ");
}

TEST_F(CollrunHosts, RanksOnThisHostAreForkedWithoutTheAgent) {
  ProcessResult r = collrun({"-H", "localhost:2,127.0.0.1", "--launch-agent", agent_, helper_,
                             "env", "COLL_HOST_ID", "COLL_BOOTSTRAP", "COLL_LOCAL_SIZE"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::map<std::string, std::string> v = env_lines(r.out);
  EXPECT_EQ(v["0 COLL_HOST_ID"], "localhost");
  EXPECT_EQ(v["2 COLL_HOST_ID"], "127.0.0.1");
  EXPECT_EQ(v["2 COLL_LOCAL_SIZE"], "1");
  // Every rank here: the rendezvous stays on the loopback.
  EXPECT_TRUE(v["2 COLL_BOOTSTRAP"].starts_with("127.0.0.1:")) << v["2 COLL_BOOTSTRAP"];
  EXPECT_EQ(agent_calls(), "");
}

TEST_F(CollrunHosts, RemoteRanksReachTheRendezvousAtANonLoopbackAddress) {
  ProcessResult r =
      collrun({"-H", "fakea,fakeb", "--launch-agent", agent_, helper_, "env", "COLL_BOOTSTRAP"});
  std::optional<std::string> address = collrun::first_non_loopback_ipv4();
  if (!address) {
    EXPECT_EQ(r.status, 2) << explain(r);
    EXPECT_NE(r.err.find("give --bootstrap-addr"), std::string::npos) << explain(r);
    GTEST_SKIP() << "this machine has no non-loopback IPv4 address";
  }
  ASSERT_EQ(r.status, 0) << explain(r);
  std::map<std::string, std::string> v = env_lines(r.out);
  EXPECT_TRUE(v["1 COLL_BOOTSTRAP"].starts_with(*address + ":"))
      << v["1 COLL_BOOTSTRAP"] << " vs " << *address;
}

TEST_F(CollrunHosts, BootstrapAcrossHostsThroughTheAgent) {
  // libcoll's collrun client on both sides of the agent: allgathers of up
  // to 1 MiB a rank, every byte checked.
  // (-x LSAN_OPTIONS: the fake agent empties the environment, and a
  // sanitized build needs its suppressions.)
  ProcessResult r =
      collrun({"-H", "localhost:2,fakeb:1,fakec:2", "--launch-agent", agent_, "--bootstrap-addr",
               "0.0.0.0", "-x", "LSAN_OPTIONS", bootstrap_helper_, "allgather", "collrun"});
  ASSERT_EQ(r.status, 0) << explain(r);
  for (int rank = 0; rank < 5; ++rank)
    EXPECT_NE(r.out.find("ok rank " + std::to_string(rank) + " of 5"), std::string::npos)
        << explain(r);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << explain(r);
}

TEST_F(CollrunHosts, HostfilePlacesRanksBySlot) {
  std::ofstream(dir_ + "/hostfile") << "# three hosts\n"
                                       "localhost slots=2\n"
                                       "fakeb slots=1 max_slots=4  # a small one\n"
                                       "fakec\n";
  ProcessResult r = collrun({"--hostfile", dir_ + "/hostfile", "--launch-agent", agent_,
                             "--bootstrap-addr", "127.0.0.1", helper_, "env", "COLL_HOST_ID"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::map<std::string, std::string> v = env_lines(r.out);
  EXPECT_EQ(v["0 COLL_HOST_ID"], "localhost");
  EXPECT_EQ(v["1 COLL_HOST_ID"], "localhost");
  EXPECT_EQ(v["2 COLL_HOST_ID"], "fakeb");
  EXPECT_EQ(v["3 COLL_HOST_ID"], "fakec");
  EXPECT_EQ(v.count("4 COLL_HOST_ID"), 0u) << r.out;

  ProcessResult two = collrun({"--hostfile", dir_ + "/hostfile", "-np", "2", "--launch-agent",
                               agent_, helper_, "env", "COLL_HOST_ID"});
  ASSERT_EQ(two.status, 0) << explain(two);
  EXPECT_EQ(env_lines(two.out)["1 COLL_HOST_ID"], "localhost");
}

TEST_F(CollrunHosts, MapByNodeGoesRoundTheHostsAndOnlyThisHostsRanksAreBound) {
  ProcessResult r =
      collrun({"-H", "localhost:2,fakeb:2", "--map-by", "node", "--bind-to", "core",
               "--report-bindings", "-np", "3", "--launch-agent", agent_, "--bootstrap-addr",
               "127.0.0.1", helper_, "env", "COLL_HOST_ID", "COLL_LOCAL_RANK"});
  ASSERT_EQ(r.status, 0) << explain(r);
  std::map<std::string, std::string> v = env_lines(r.out);
  EXPECT_EQ(v["0 COLL_HOST_ID"], "localhost");
  EXPECT_EQ(v["1 COLL_HOST_ID"], "fakeb");
  EXPECT_EQ(v["2 COLL_HOST_ID"], "localhost");
  EXPECT_EQ(v["2 COLL_LOCAL_RANK"], "1");
  EXPECT_EQ(agent_calls(), "fakeb fakeb ");  // rank 1, then the /dev/shm cleanup
  EXPECT_NE(r.err.find("collrun: --bind-to core binds the ranks on this host only"),
            std::string::npos)
      << explain(r);
  EXPECT_TRUE(
      std::regex_search(r.err, std::regex(R"(\] MCW rank 1 is not bound \(on host fakeb: )"
                                          R"(collrun binds the ranks on this host only\))")))
      << explain(r);
  for (const char* rank : {"0", "2"})
    EXPECT_TRUE(std::regex_search(r.err, std::regex(std::string(R"(\] MCW rank )") + rank +
                                                    R"( (bound to socket|is not bound \(or))")))
        << explain(r);
}

TEST_F(CollrunHosts, MoreRanksThanSlotsNeedOversubscribe) {
  ProcessResult r =
      collrun({"-H", "fakea:1,fakeb:1", "-np", "3", "--launch-agent", agent_, helper_, "exit"});
  EXPECT_EQ(r.status, 2) << explain(r);
  EXPECT_NE(r.err.find("-np 3 is more than the 2 slots"), std::string::npos) << explain(r);
  EXPECT_EQ(agent_calls(), "");

  ProcessResult over =
      collrun({"-H", "fakea:1,fakeb:1", "-np", "3", "--oversubscribe", "--launch-agent", agent_,
               "--bootstrap-addr", "127.0.0.1", helper_, "env", "COLL_HOST_ID"});
  ASSERT_EQ(over.status, 0) << explain(over);
  std::map<std::string, std::string> v = env_lines(over.out);
  EXPECT_EQ(v["0 COLL_HOST_ID"], "fakea");
  EXPECT_EQ(v["1 COLL_HOST_ID"], "fakea");
  EXPECT_EQ(v["2 COLL_HOST_ID"], "fakeb");
}

TEST_F(CollrunHosts, AgentFromTheEnvironmentAndMissingAgents) {
  ProcessResult r = collrun({"-H", "fakea", "--bootstrap-addr", "127.0.0.1", helper_, "exit"},
                            {"COLLRUN_LAUNCH_AGENT=" + agent_});
  EXPECT_EQ(r.status, 0) << explain(r);
  EXPECT_EQ(agent_calls(), "fakea fakea ");

  ProcessResult missing =
      collrun({"-H", "fakea", "--launch-agent", "surely-no-such-agent -x", helper_, "exit"});
  EXPECT_EQ(missing.status, 2) << explain(missing);
  EXPECT_NE(missing.err.find("launch agent 'surely-no-such-agent' not found"), std::string::npos)
      << explain(missing);
}

TEST_F(CollrunHosts, FailingRemoteRankEndsTheJob) {
  for (const std::string& agent : {agent_, ssh_agent_}) {
    std::string token = unique_token("fail");
    // Rank 1 (fakeb) exits 3 while ranks 0 (here) and 2 (fakeb) sleep.
    ProcessResult r =
        collrun({"-H", "localhost:1,fakeb:2", "--launch-agent", agent, "--bootstrap-addr",
                 "127.0.0.1", helper_, "exit", "sleep", "3", "sleep", token});
    ASSERT_FALSE(r.timed_out) << explain(r);
    EXPECT_EQ(r.status, 3) << agent << "\n" << explain(r);
    EXPECT_TRUE(std::regex_search(
        r.err, std::regex("collrun: rank 1 \\(host fakeb, agent pid [0-9]+\\) exited with status "
                          "3; terminating the job")))
        << explain(r);
    EXPECT_TRUE(all_ended(token)) << agent << ": ranks left behind";
  }
}

TEST_F(CollrunHosts, RemoteRankKilledBySignalGives128PlusSignal) {
  ProcessResult r = collrun({"-H", "fakea:2", "--launch-agent", agent_, "--bootstrap-addr",
                             "127.0.0.1", helper_, "exit", "sleep", "kill9"});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 128 + 9) << explain(r);
  EXPECT_NE(r.err.find("exited with status 137 (128+9: killed by signal 9"), std::string::npos)
      << explain(r);
}

TEST_F(CollrunHosts, TimeoutEndsRanksTheAgentPassesNoSignalTo) {
  std::string token = unique_token("timeout");
  ProcessResult r = collrun({"--timeout", "2", "-H", "fakea:1,fakeb:2", "--launch-agent",
                             ssh_agent_, "--bootstrap-addr", "127.0.0.1", helper_, "sleep", token});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 124) << explain(r);
  EXPECT_TRUE(all_ended(token)) << "remote ranks left behind after the job";
}

TEST_F(CollrunHosts, SignalToCollrunEndsRemoteRanks) {
  // Rank 0 (here, collrun's child) sends collrun SIGTERM; the remote ranks
  // are out of the signal's reach and end through their lifeline.
  std::string token = unique_token("signal");
  ProcessResult r = collrun({"-H", "localhost:1,fakeb:2", "--launch-agent", ssh_agent_,
                             "--bootstrap-addr", "127.0.0.1", helper_, "signal-launcher", token});
  ASSERT_FALSE(r.timed_out) << explain(r);
  EXPECT_EQ(r.status, 128 + 15) << explain(r);
  EXPECT_TRUE(all_ended(token)) << "remote ranks left behind after the job";
}

TEST_F(CollrunHosts, RemoteOutputIsForwardedAndStdinStaysHere) {
  ProcessResult tagged = collrun({"--tag-output", "-H", "fakea:1,fakeb:1", "--launch-agent", agent_,
                                  "--bootstrap-addr", "127.0.0.1", helper_, "lines", "50"});
  ASSERT_EQ(tagged.status, 0) << explain(tagged);
  std::regex line("\\[1,([01])\\]<stdout>:rank \\1 fd 1 line [0-9]+ x+ end");
  int lines = 0;
  for (const std::string& text : split_lines(tagged.out)) {
    EXPECT_TRUE(std::regex_match(text, line)) << "'" << text << "'";
    ++lines;
  }
  EXPECT_EQ(lines, 100);
  EXPECT_EQ(split_lines(tagged.err).size(), 100u);

  // A remote rank 0 reads /dev/null, never the lifeline or collrun's stdin.
  ProcessResult in = collrun(
      {"-H", "fakea", "--launch-agent", agent_, "--bootstrap-addr", "127.0.0.1", helper_, "stdin"},
      {}, "input for a local rank 0 only\n");
  ASSERT_EQ(in.status, 0) << explain(in);
  EXPECT_EQ(in.out, "");
}

TEST_F(CollrunHosts, RemoteRankStartsInCollrunsDirectory) {
  // The fake agents start in / as ssh starts in the home directory; the
  // shell command changes to collrun's directory where the host has it.
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof cwd), nullptr);
  ProcessResult r = collrun(
      {"-H", "fakea", "--launch-agent", agent_, "--bootstrap-addr", "127.0.0.1", "/bin/pwd", "-P"});
  ASSERT_EQ(r.status, 0) << explain(r);
  char resolved[4096];
  ASSERT_NE(::realpath(cwd, resolved), nullptr);
  EXPECT_EQ(r.out, std::string(resolved) + "\n");
}

}  // namespace
}  // namespace collrun_test
