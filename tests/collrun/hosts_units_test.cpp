// Unit tests of what collrun needs for ranks on several hosts: -H and
// hostfile parsing, slot placement, which hosts are this machine, the
// remote ranks' environment and the launch agent's command line (the
// latter also run through a real /bin/sh, as the remote host would).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "host_list.hpp"
#include "job_plan.hpp"
#include "launch_agent.hpp"
#include "launch_options.hpp"
#include "rank_environment.hpp"
#include "rank_placement.hpp"
#include "this_host.hpp"

namespace collrun {
namespace {

using Strings = std::vector<std::string>;

std::string describe(const std::vector<HostSlots>& hosts) {
  std::string text;
  for (const HostSlots& h : hosts) {
    text += h.name + ":" + std::to_string(h.slots);
    // append(), not "/" + std::to_string(): GCC 12 at -O3 warns
    // (-Wrestrict, a false positive) inside that operator+.
    if (h.max_slots) text.append("/").append(std::to_string(*h.max_slots));
    text += " ";
  }
  return text;
}

template <typename Call>
std::string usage_error_of(Call call) {
  try {
    call();
  } catch (const UsageError& error) {
    return error.what();
  }
  return "(accepted)";
}

TEST(HostList, NamesWithAndWithoutSlots) {
  EXPECT_EQ(describe(parse_host_list("a:2,b:2,c")), "a:2 b:2 c:1 ");
  EXPECT_EQ(describe(parse_host_list("node-1.cluster:16")), "node-1.cluster:16 ");
  EXPECT_EQ(describe(parse_host_list("me@10.0.0.7:3")), "me@10.0.0.7:3 ");
  EXPECT_EQ(describe(parse_host_list("ns_a:1")), "ns_a:1 ");
}

TEST(HostList, AHostNamedAgainAddsItsSlotsInFirstPlace) {
  EXPECT_EQ(describe(parse_host_list("a,b,a:3,b")), "a:4 b:2 ");
}

TEST(HostList, BadListsSayWhy) {
  struct Case {
    std::string list;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"a:0", "must be a whole number from 1"},
           {"a:x", "must be a whole number"},
           {"a:", "must be a whole number"},
           {"a:-2", "must be a whole number"},
           {"a:99999999999", "must be a whole number"},
           {"a:100000", "must be a whole number"},
           {"a,,b", "an empty host entry"},
           {",a", "an empty host entry"},
           {"-oProxyCommand=x:1", "not a host name"},
           {"a b:1", "not a host name"},
           {"a;rm:1", "not a host name"},
           {"@b", "not a host name"},
           {"u@v@w", "not a host name"},
           {":2", "not a host name"},
       }) {
    std::string message = usage_error_of([&] { parse_host_list(c.list); });
    EXPECT_NE(message.find(c.message), std::string::npos) << "-H " << c.list << ": " << message;
  }
}

TEST(Hostfile, OpenMpiSyntax) {
  std::string text =
      "# the cluster\n"
      "\n"
      "node1 slots=4\n"
      "node2\tslots=2 max_slots=6   # a comment after a host\n"
      "   node3   \n"
      "node1 slots=1\n"
      "node4 max-slots=3\r\n";
  EXPECT_EQ(describe(parse_hostfile(text, "hf")), "node1:5 node2:2/6 node3:1 node4:1/3 ");
}

TEST(Hostfile, BadLinesNameTheFileAndLine) {
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {"a slots=0\n", "hf:1: 'slots=0': slots must be"},
           {"a\nb slots\n", "hf:2: 'slots': expected slots=N"},
           {"a cpus=2\n", "hf:1: unknown attribute 'cpus'"},
           {"a slots=4 max_slots=2\n", "max_slots=2 is less than slots=4"},
           {"# nothing\n\n", "no hosts"},
           {"-x slots=1\n", "hf:1: '-x' is not a host name"},
       }) {
    std::string message = usage_error_of([&] { parse_hostfile(c.text, "hf"); });
    EXPECT_NE(message.find(c.message), std::string::npos) << c.text << ": " << message;
  }
}

TEST(Hostfile, LoadsAFileAndSaysWhenItCannot) {
  char path[] = "/tmp/collrun-hostfile-XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  std::ofstream(path) << "x slots=2\ny\n";
  EXPECT_EQ(describe(load_hostfile(path)), "x:2 y:1 ");
  ::unlink(path);
  EXPECT_NE(usage_error_of([&] { load_hostfile(path); }).find("cannot open"), std::string::npos);
}

// What a path may name besides a small file: refused at once, never read
// until memory runs out (/dev/zero) or waited on forever (a FIFO).
TEST(Hostfile, RefusesWhatIsNotASmallRegularFile) {
  char dir[] = "/tmp/collrun-hostfile-dir-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string fifo = std::string(dir) + "/fifo", big = std::string(dir) + "/big";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(big) << std::string((1 << 20) + 1, 'x');
  EXPECT_NE(usage_error_of([&] { load_hostfile("/dev/zero"); }).find("character device"),
            std::string::npos);
  EXPECT_NE(usage_error_of([&] { load_hostfile(fifo); }).find("a FIFO"), std::string::npos);
  EXPECT_NE(usage_error_of([&] { load_hostfile(dir); }).find("a directory"), std::string::npos);
  const std::string message = usage_error_of([&] { load_hostfile(big); });
  EXPECT_NE(message.find("--hostfile " + big + ": is 1048577 bytes, more than the 1048576"),
            std::string::npos)
      << message;
  ::unlink(fifo.c_str());
  ::unlink(big.c_str());
  ::rmdir(dir);
}

std::vector<HostSlots> hosts_of(const std::string& list) { return parse_host_list(list); }

TEST(RankPlacement, FillsSlotsInOrder) {
  RankPlacement p = place_ranks(hosts_of("a:2,b:2,c:2"), 6, false);
  EXPECT_EQ(p.host_of_rank, (std::vector<int>{0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(p.local_rank, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(p.ranks_on_host, (std::vector<int>{2, 2, 2}));
}

TEST(RankPlacement, FewerRanksThanSlotsLeaveTheLastSlotsEmpty) {
  RankPlacement p = place_ranks(hosts_of("a:3,b:2,c"), 4, false);
  EXPECT_EQ(p.host_of_rank, (std::vector<int>{0, 0, 0, 1}));
  EXPECT_EQ(p.ranks_on_host, (std::vector<int>{3, 1, 0}));
}

TEST(RankPlacement, TooManyRanksNeedOversubscribe) {
  std::string message = usage_error_of([] { place_ranks(hosts_of("a:2,b"), 4, false); });
  EXPECT_NE(message.find("-np 4 is more than the 3 slots"), std::string::npos) << message;
  EXPECT_NE(message.find("--oversubscribe"), std::string::npos) << message;
}

TEST(RankPlacement, OversubscribedRanksGoRoundTheSlotsAgain) {
  // a:2,b:1 with 7 ranks: slots a a b, then a a b again, then a.
  RankPlacement p = place_ranks(hosts_of("a:2,b:1"), 7, true);
  EXPECT_EQ(p.ranks_on_host, (std::vector<int>{5, 2}));
  EXPECT_EQ(p.host_of_rank, (std::vector<int>{0, 0, 0, 0, 0, 1, 1}));
  EXPECT_EQ(p.local_rank, (std::vector<int>{0, 1, 2, 3, 4, 0, 1}));
}

TEST(RankPlacement, OversubscribingStopsAtMaxSlots) {
  std::vector<HostSlots> hosts = parse_hostfile("a slots=1 max_slots=2\nb slots=1\n", "hf");
  EXPECT_EQ(place_ranks(hosts, 5, true).ranks_on_host, (std::vector<int>{2, 3}));
  std::vector<HostSlots> capped =
      parse_hostfile("a slots=1 max_slots=2\nb slots=2 max_slots=2\n", "hf");
  EXPECT_EQ(place_ranks(capped, 4, true).ranks_on_host, (std::vector<int>{2, 2}));
  std::string message = usage_error_of([&] { place_ranks(capped, 5, true); });
  EXPECT_NE(message.find("max_slots allow at most 4 ranks"), std::string::npos) << message;
}

TEST(RankPlacement, ByNodeGoesRoundTheHosts) {
  RankPlacement p = place_ranks(hosts_of("a:2,b:2,c:2"), 5, false, MapBy::node);
  EXPECT_EQ(p.host_of_rank, (std::vector<int>{0, 1, 2, 0, 1}));
  EXPECT_EQ(p.local_rank, (std::vector<int>{0, 0, 0, 1, 1}));
  EXPECT_EQ(p.ranks_on_host, (std::vector<int>{2, 2, 1}));
  // A host whose slots are taken is skipped.
  EXPECT_EQ(place_ranks(hosts_of("a:3,b:1"), 4, false, MapBy::node).host_of_rank,
            (std::vector<int>{0, 1, 0, 0}));
  // core, numa and package place ranks within a host: across hosts, by slot.
  for (MapBy map_by : {MapBy::core, MapBy::numa, MapBy::package})
    EXPECT_EQ(place_ranks(hosts_of("a:2,b:2"), 3, false, map_by).host_of_rank,
              (std::vector<int>{0, 0, 1}));
}

TEST(RankPlacement, ByNodePastTheSlotsNeedsOversubscribeAndStopsAtMaxSlots) {
  std::string message =
      usage_error_of([] { place_ranks(hosts_of("a:2,b"), 4, false, MapBy::node); });
  EXPECT_NE(message.find("-np 4 is more than the 3 slots"), std::string::npos) << message;
  RankPlacement p = place_ranks(hosts_of("a:2,b"), 6, true, MapBy::node);
  EXPECT_EQ(p.host_of_rank, (std::vector<int>{0, 1, 0, 0, 1, 0}));
  EXPECT_EQ(p.local_rank, (std::vector<int>{0, 0, 1, 2, 1, 3}));
  std::vector<HostSlots> capped =
      parse_hostfile("a slots=1 max_slots=2\nb slots=1 max_slots=1\n", "hf");
  EXPECT_EQ(place_ranks(capped, 3, true, MapBy::node).host_of_rank, (std::vector<int>{0, 1, 0}));
  message = usage_error_of([&] { place_ranks(capped, 4, true, MapBy::node); });
  EXPECT_NE(message.find("max_slots allow at most 3 ranks"), std::string::npos) << message;
}

ThisHostFacts example_facts() {
  ThisHostFacts facts;
  facts.host_name = "node1.cluster";
  facts.addresses = {"127.0.0.1", "10.1.2.3", "fe80::1"};
  facts.etc_hosts =
      "127.0.0.1 localhost\n"
      "10.1.2.3  node1-ib alias1 # this machine's second name\n"
      "10.9.9.9  node9 alias1x\n"
      "127.0.1.1 loopname\n";
  return facts;
}

TEST(ThisHost, KnowsItsOwnNamesAndAddresses) {
  ThisHostFacts facts = example_facts();
  for (const char* name :
       {"localhost", "LOCALHOST", "127.0.0.1", "127.4.5.6", "::1", "node1", "NODE1.cluster",
        "node1.other", "10.1.2.3", "fe80::1", "alias1", "node1-ib", "loopname"})
    EXPECT_TRUE(is_local_host(name, facts)) << name;
  for (const char* name : {"node2", "node9", "alias1x", "10.9.9.9", "10.1.2.4", "me@localhost",
                           "me@node1", "node", ""})
    EXPECT_FALSE(is_local_host(name, facts)) << name;
}

TEST(ThisHost, ThisMachineKnowsItself) {
  ThisHostFacts facts = ThisHostFacts::of_this_machine();
  EXPECT_TRUE(is_local_host("localhost", facts));
  if (!facts.host_name.empty()) {
    EXPECT_TRUE(is_local_host(facts.host_name, facts));
  }
  if (std::optional<std::string> address = first_non_loopback_ipv4()) {
    EXPECT_FALSE(address->starts_with("127.")) << *address;
    EXPECT_TRUE(is_local_host(*address, facts)) << *address;
  }
}

TEST(JobPlan, WithoutHostsEveryRankIsHere) {
  JobPlan plan = plan_job(parse_launch_options({"-np", "3", "p"}), example_facts());
  EXPECT_FALSE(plan.hosts_given);
  EXPECT_FALSE(plan.any_remote());
  ASSERT_EQ(plan.hosts.size(), 1u);
  EXPECT_EQ(plan.hosts[0].ranks, 3);
  EXPECT_EQ(plan.local_rank, (std::vector<int>{0, 1, 2}));
}

TEST(JobPlan, HostsSayWhereAndWhetherLocal) {
  JobPlan plan =
      plan_job(parse_launch_options({"-H", "node1:2,b:1,c:4", "-np", "4", "p"}), example_facts());
  EXPECT_TRUE(plan.hosts_given);
  EXPECT_TRUE(plan.any_remote());
  EXPECT_EQ(plan.num_ranks, 4);
  ASSERT_EQ(plan.hosts.size(), 3u);
  EXPECT_EQ(plan.hosts[0].name, "node1");
  EXPECT_TRUE(plan.hosts[0].local);
  EXPECT_FALSE(plan.hosts[1].local);
  EXPECT_FALSE(plan.hosts[2].local);
  EXPECT_EQ(plan.host_of_rank, (std::vector<int>{0, 0, 1, 2}));
  EXPECT_EQ(plan.local_rank, (std::vector<int>{0, 1, 0, 0}));
  EXPECT_EQ(plan.host_of(3).name, "c");
  EXPECT_EQ(plan.host_of(3).ranks, 1);
}

TEST(JobPlan, WithoutNpEverySlotGetsARankAndEmptyHostsTakeNoPart) {
  JobPlan all = plan_job(parse_launch_options({"-H", "a:2,b:3", "p"}), example_facts());
  EXPECT_EQ(all.num_ranks, 5);
  JobPlan some =
      plan_job(parse_launch_options({"-H", "a:2,b:3,localhost", "-np", "2", "p"}), example_facts());
  ASSERT_EQ(some.hosts.size(), 1u);
  EXPECT_EQ(some.hosts[0].name, "a");
  EXPECT_TRUE(some.any_remote());
}

TEST(JobPlan, TooManyRanksForTheSlots) {
  std::string message = usage_error_of([] {
    plan_job(parse_launch_options({"-H", "a,b", "-np", "3", "p"}), example_facts());
  });
  EXPECT_NE(message.find("more than the 2 slots"), std::string::npos) << message;
  JobPlan plan = plan_job(parse_launch_options({"-H", "a,b", "-np", "3", "--oversubscribe", "p"}),
                          example_facts());
  EXPECT_EQ(plan.host_of_rank, (std::vector<int>{0, 0, 1}));
}

TEST(JobPlan, MapByNodeSpreadsRanksOverTheHosts) {
  JobPlan plan =
      plan_job(parse_launch_options({"-H", "node1:2,b:2", "--map-by", "node", "-np", "3", "p"}),
               example_facts());
  EXPECT_EQ(plan.host_of_rank, (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(plan.local_rank, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(plan.hosts[0].ranks, 2);
  EXPECT_TRUE(plan.hosts[0].local);
  // Without hosts every rank is here, whatever --map-by says.
  JobPlan here =
      plan_job(parse_launch_options({"--map-by", "node", "-np", "2", "p"}), example_facts());
  EXPECT_EQ(here.host_of_rank, (std::vector<int>{0, 0}));
}

TEST(LaunchOptions, HostOptions) {
  LaunchOptions o =
      parse_launch_options({"-H", "a:2", "--host", "b", "--launch-agent", "ssh -p 2222",
                            "--bootstrap-addr", "10.0.0.1", "--oversubscribe", "p"});
  EXPECT_EQ(o.host_list, "a:2,b");
  EXPECT_EQ(o.num_ranks, 0);
  EXPECT_EQ(o.launch_agent, "ssh -p 2222");
  EXPECT_EQ(o.bootstrap_addr, "10.0.0.1");
  EXPECT_TRUE(o.oversubscribe);
  EXPECT_FALSE(o.hostfile.has_value());

  LaunchOptions f = parse_launch_options({"--hostfile", "hf", "-np", "2", "p"});
  EXPECT_EQ(f.hostfile, "hf");
  EXPECT_EQ(parse_launch_options({"-machinefile", "m", "p"}).hostfile, "m");
  EXPECT_EQ(parse_launch_options({"--hostfile=h2", "p"}).hostfile, "h2");
  EXPECT_EQ(parse_launch_options({"-hosts", "x,y", "p"}).host_list, "x,y");
}

TEST(LaunchOptions, BadHostOptionsSayWhy) {
  struct Case {
    Strings args;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {{"-H", "a", "--hostfile", "f", "p"}, "give one of them"},
           {{"--hostfile", "f", "--hostfile", "g", "p"}, "one hostfile only"},
           {{"-H", "", "p"}, "needs a list of hosts"},
           {{"-H"}, "needs a value"},
           {{"--launch-agent", " ", "-np", "1", "p"}, "needs a command"},
           {{"--bootstrap-addr", "host.example", "-np", "1", "p"}, "not an IPv4 address"},
           {{"--bootstrap-addr", "::1", "-np", "1", "p"}, "not an IPv4 address"},
           {{"--oversubscribe=1", "-np", "1", "p"}, "takes no value"},
           {{"-H", "a"}, "no program"},
       }) {
    std::string message = usage_error_of([&] { parse_launch_options(c.args); });
    EXPECT_NE(message.find(c.message), std::string::npos) << c.args[0] << ": " << message;
  }
}

TEST(LaunchAgent, OptionThenEnvironmentThenSsh) {
  EXPECT_EQ(launch_agent_words(std::string("my-agent  -v\t-x"), "env-agent"),
            (Strings{"my-agent", "-v", "-x"}));
  EXPECT_EQ(launch_agent_words(std::nullopt, "env-agent --flag"), (Strings{"env-agent", "--flag"}));
  EXPECT_EQ(launch_agent_words(std::nullopt, "  "), (Strings{"ssh", "-o", "BatchMode=yes"}));
  EXPECT_EQ(launch_agent_words(std::nullopt, nullptr), (Strings{"ssh", "-o", "BatchMode=yes"}));
}

TEST(LaunchAgent, ShellQuoting) {
  EXPECT_EQ(shell_quote("plain/path-1.2_x,y:z+@%"), "plain/path-1.2_x,y:z+@%");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("two words"), "'two words'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$HOME `x` \"q\" *"), "'$HOME `x` \"q\" *'");
}

TEST(LaunchAgent, CommandLineIsAgentHostAndOneShellCommand) {
  RemoteRank rank{"/work dir", {"COLL_RANK=3", "X=a b"}, {"prog", "arg 1"}};
  std::string script = remote_rank_script(rank);
  Strings argv = agent_command_line({"ssh", "-p", "22"}, "node7", script);
  ASSERT_EQ(argv.size(), 5u);
  EXPECT_EQ(argv[0], "ssh");
  EXPECT_EQ(argv[2], "22");
  EXPECT_EQ(argv[3], "node7");
  EXPECT_EQ(argv[4], "exec /bin/sh -c " + shell_quote(script));
  EXPECT_NE(script.find("cd '/work dir' 2>/dev/null\n"), std::string::npos) << script;
  EXPECT_NE(script.find("COLL_RANK=3 X='a b' prog 'arg 1' 3<&- &\n"), std::string::npos) << script;
  EXPECT_EQ(remote_cleanup_script("coll-12x34-"), "rm -f /dev/shm/coll-12x34-*\n");
}

struct ShellRun {
  int wait_status = -1;
  std::string out;
};

// Runs `command_line` as ssh's remote side would, `/bin/sh -c LINE`, with a
// pipe as stdin that stays open until the command ends (the lifeline), and
// collects its stdout. Bounded: killed after 60 s.
// As an agent runs it: the lifeline (stdin) starts with the job secret's
// line, as collrun writes it.
ShellRun run_as_remote_shell(const std::string& command_line,
                             const std::string& secret = "0123abcd") {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return {};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::execl("/bin/sh", "sh", "-c", command_line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  const std::string line = secret + "\n";
  [[maybe_unused]] ssize_t w = ::write(in[1], line.data(), line.size());
  ShellRun run;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char buffer[4096];
  for (;;) {
    pollfd fd{out[0], POLLIN, 0};
    if (::poll(&fd, 1, 100) > 0) {
      ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n <= 0) break;
      run.out.append(buffer, static_cast<size_t>(n));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      break;
    }
  }
  ::waitpid(pid, &run.wait_status, 0);
  ::close(out[0]);
  ::close(in[1]);
  return run;
}

TEST(LaunchAgent, TheRemoteShellRunsExactlyTheRank) {
  // Words that a careless quote would split, expand or end.
  Strings args = {
      "/usr/bin/printf", "[%s]\\n", "two words", "it's", "$HOME", "`id`", "a\"b", "*", "",
      "new\nline",       "-x"};
  RemoteRank rank{"/", {"COLL_TEST_VALUE=x y'z", "OTHER=$PATH"}, args};
  Strings argv = agent_command_line({"agent"}, "host", remote_rank_script(rank));
  ShellRun run = run_as_remote_shell(argv.back());
  ASSERT_TRUE(WIFEXITED(run.wait_status)) << run.wait_status;
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 0);
  EXPECT_EQ(run.out, "[two words]\n[it's]\n[$HOME]\n[`id`]\n[a\"b]\n[*]\n[]\n[new\nline]\n[-x]\n");

  RemoteRank env_rank{"/",
                      {"COLL_TEST_VALUE=x y'z", "OTHER=$PATH"},
                      {"/bin/sh", "-c",
                       "echo \"$COLL_TEST_VALUE|$OTHER|$(pwd)|$COLL_JOB_SECRET\""}};
  const Strings env_argv = agent_command_line({"agent"}, "host", remote_rank_script(env_rank));
  run = run_as_remote_shell(env_argv.back(), "f00dfeed");
  // The secret reaches the rank from the lifeline, never by the command line.
  EXPECT_EQ(run.out, "x y'z|$PATH|/|f00dfeed\n");
  for (const std::string& word : env_argv) EXPECT_EQ(word.find("f00dfeed"), std::string::npos);
}

TEST(LaunchAgent, TheRemoteShellPassesOnTheRanksStatus) {
  RemoteRank exits{"", {}, {"/bin/sh", "-c", "exit 7"}};
  ShellRun run =
      run_as_remote_shell(agent_command_line({"a"}, "h", remote_rank_script(exits)).back());
  ASSERT_TRUE(WIFEXITED(run.wait_status));
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 7);

  RemoteRank killed{"", {}, {"/bin/sh", "-c", "kill -9 $$"}};
  run = run_as_remote_shell(agent_command_line({"a"}, "h", remote_rank_script(killed)).back());
  ASSERT_TRUE(WIFEXITED(run.wait_status));
  EXPECT_EQ(WEXITSTATUS(run.wait_status), 128 + 9);
}

TEST(RankEnvironment, LaterSettingsReplaceEarlierOnes) {
  RankEnvironment env({"A=1", "B=2", "A=3", "not an assignment"});
  EXPECT_EQ(env.entries(), (Strings{"A=3", "B=2"}));
  env.set("B", "x=y");
  env.set_entry("C=");
  EXPECT_EQ(env.entries(), (Strings{"A=3", "B=x=y", "C="}));
  EXPECT_TRUE(env.contains("C"));
  EXPECT_FALSE(env.contains("D"));
}

TEST(RankEnvironment, RemoteRanksGetCollVariablesAndExportedOnes) {
  RankEnvironment env({"PATH=/bin", "COLL_RANK=1", "COLL_TRANSPORT=tcp", "MINE=v", "OTHER=o",
                       "COLL_BAD-NAME=x", "COLLAPSE=no", "COLL_JOB_SECRET=s"});
  EXPECT_EQ(env.for_remote_rank({"MINE"}),
            (Strings{"COLL_RANK=1", "COLL_TRANSPORT=tcp", "MINE=v"}));
}

}  // namespace
}  // namespace collrun
