// Fault tests: runs fault_helper under collrun and checks the job's exit
// status, what each rank reported, that the job ended within a bound, and
// that no shared-memory segment of it is left in /dev/shm.
// Paths come from the environment (set by meson): COLLRUN, FAULT_HELPER.
#include <coll/coll.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Bound on a whole job; collrun itself gets a shorter --timeout.
constexpr int kCollrunTimeoutS = 60;
constexpr int kJobBoundS = 90;

struct JobResult {
  bool finished = false;       // collrun exited within the bound
  bool exited = false;         // ... by exit() rather than a signal
  int exit_status = -1;        // when exited
  int signal = 0;              // when killed by a signal
  bool output_closed = false;  // no process of the job still holds its stdout
  std::string output;
};

std::string required_env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// Starts argv in its own process group with stdout and stderr on one pipe,
// reads everything until collrun exits (plus a grace period for the
// pipe to close), kills the group if the bound passes.
JobResult run_job(const std::vector<std::string>& args, int bound_s) {
  JobResult result;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return result;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    setpgid(0, 0);
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so that killpg works even if the child has not run yet
  close(pipe_fds[1]);

  const auto deadline = Clock::now() + std::chrono::seconds(bound_s);
  auto close_deadline = deadline;
  bool reaped = false;
  int wait_status = 0;
  while (Clock::now() < close_deadline) {
    pollfd fd = {pipe_fds[0], POLLIN, 0};
    if (poll(&fd, 1, 50) > 0) {
      char buffer[4096];
      const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
      if (n > 0) {
        result.output.append(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        result.output_closed = true;
        if (reaped) break;
      }
    }
    if (!reaped && waitpid(pid, &wait_status, WNOHANG) == pid) {
      reaped = true;
      if (result.output_closed) break;
      // Ranks should be gone with collrun: give the pipe a moment to close.
      close_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(5));
    }
    if (result.output_closed && !reaped) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  close(pipe_fds[0]);
  killpg(pid, SIGKILL);  // whatever is left of the job
  if (!reaped) {
    waitpid(pid, &wait_status, 0);
  } else {
    result.finished = true;
    result.exited = WIFEXITED(wait_status);
    result.exit_status = result.exited ? WEXITSTATUS(wait_status) : -1;
    result.signal = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : 0;
  }
  return result;
}

std::set<std::string> coll_shm_entries() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (const dirent* entry = readdir(dir)) {
      if (std::strncmp(entry->d_name, "coll-", 5) == 0) names.insert(entry->d_name);
    }
    closedir(dir);
  }
  return names;
}

// (Plain string scans: std::regex trips GCC 12's -Wmaybe-uninitialized in
// sanitizer builds.)
std::string job_id_of(const std::string& output) {
  static const std::string kKey = "fault-helper jobid=";
  const size_t start = output.find(kKey);
  if (start == std::string::npos) return "";
  const size_t begin = start + kKey.size();
  const size_t end = output.find_first_of(" \t\n", begin);
  return output.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// Lines of output that contain every one of `parts`.
int count_lines_containing(const std::string& output, std::initializer_list<std::string> parts) {
  int count = 0;
  size_t begin = 0;
  while (begin < output.size()) {
    size_t end = output.find('\n', begin);
    if (end == std::string::npos) end = output.size();
    const std::string_view line(output.data() + begin, end - begin);
    bool all = true;
    for (const std::string& part : parts) all = all && line.find(part) != std::string_view::npos;
    count += all;
    begin = end + 1;
  }
  return count;
}

class Fault : public testing::Test {
 protected:
  void SetUp() override {
    collrun_ = required_env("COLLRUN");
    helper_ = required_env("FAULT_HELPER");
    ASSERT_FALSE(collrun_.empty()) << "COLLRUN not set";
    ASSERT_FALSE(helper_.empty()) << "FAULT_HELPER not set";
    shm_before_ = coll_shm_entries();
  }

  JobResult run(int ranks, const std::vector<std::string>& exports, const std::string& mode,
                const std::vector<std::string>& collrun_options = {}) {
    return run_in(ranks, exports, mode, collrun_options);
  }

  // The recover-* modes: with a directory of their own for the helper's
  // files (COLL_TEST_SYNC_DIR).
  JobResult run_recovery(const std::string& mode, const std::vector<std::string>& collrun_options) {
    char sync_dir[] = "/tmp/coll-recovery-sync-XXXXXX";
    EXPECT_NE(mkdtemp(sync_dir), nullptr);
    JobResult job = run_in(4, {"COLL_TIMEOUT=30", std::string("COLL_TEST_SYNC_DIR=") + sync_dir},
                           mode, collrun_options);
    std::filesystem::remove_all(sync_dir);
    return job;
  }

  JobResult run_in(int ranks, const std::vector<std::string>& exports, const std::string& mode,
                   const std::vector<std::string>& collrun_options) {
    std::vector<std::string> args = {collrun_, "-np", std::to_string(ranks), "--timeout",
                                     std::to_string(kCollrunTimeoutS)};
    args.insert(args.end(), collrun_options.begin(), collrun_options.end());
    for (const std::string& e : exports) {
      args.push_back("-x");
      args.push_back(e);
    }
    args.push_back(helper_);
    args.push_back(mode);
    JobResult job = run_job(args, kJobBoundS);
    std::printf("----- output of %s (%d ranks) -----\n%s----- end -----\n", mode.c_str(), ranks,
                job.output.c_str());
    EXPECT_TRUE(job.finished) << mode << ": the job did not end within " << kJobBoundS << " s";
    EXPECT_TRUE(job.output_closed) << mode << ": some rank outlived collrun";
    return job;
  }

  // Nothing of the job in /dev/shm, and no coll-* entry appeared that was
  // not there before (this test is not run in parallel with others).
  void expect_shm_clean(const JobResult& job) {
    const std::string id = job_id_of(job.output);
    EXPECT_FALSE(id.empty()) << "rank 0 did not print the job id";
    const std::set<std::string> after = coll_shm_entries();
    for (const std::string& name : after) {
      if (!id.empty()) {
        EXPECT_NE(name.rfind("coll-" + id + "-", 0), 0u) << "left behind: /dev/shm/" << name;
      }
      EXPECT_TRUE(shm_before_.count(name)) << "new entry after the job: /dev/shm/" << name;
    }
    EXPECT_LE(after.size(), shm_before_.size());
  }

  std::string collrun_;
  std::string helper_;
  std::set<std::string> shm_before_;
};

TEST_F(Fault, SilentRankMakesTheOthersTimeOut) {
  char sync_dir[] = "/tmp/coll-fault-sync-XXXXXX";
  ASSERT_NE(mkdtemp(sync_dir), nullptr);
  const JobResult job =
      run(3, {"COLL_TIMEOUT=3", std::string("COLL_TEST_SYNC_DIR=") + sync_dir}, "silent-rank");
  std::filesystem::remove_all(sync_dir);
  EXPECT_TRUE(job.exited && job.exit_status == 0)
      << "exit " << job.exit_status << " signal " << job.signal
      << ": a rank did not see COLL_ERR_TIMEOUT (see its lines above)";
  const std::string timeout = "status=" + std::to_string(COLL_ERR_TIMEOUT) + " ";
  for (int rank : {0, 1}) {
    const std::string prefix = "fault-helper rank " + std::to_string(rank) + ": ";
    EXPECT_EQ(count_lines_containing(job.output, {prefix + "allreduce " + timeout}), 1)
        << "rank " << rank;
    EXPECT_EQ(count_lines_containing(job.output, {prefix + "second allreduce " + timeout}), 1)
        << "rank " << rank << ": the timeout is not sticky";
    EXPECT_EQ(count_lines_containing(job.output, {prefix + "barrier after " + timeout}), 1)
        << "rank " << rank << ": the timeout is not sticky for barrier";
  }
  expect_shm_clean(job);
}

TEST_F(Fault, KilledRankEndsTheJob) {
  const JobResult job = run(4, {"COLL_TIMEOUT=30"}, "kill-rank");
  EXPECT_TRUE(job.finished);
  EXPECT_FALSE(job.exited && job.exit_status == 0)
      << "collrun reported success after a rank was killed";
  EXPECT_EQ(count_lines_containing(job.output, {"rank 2: raising SIGKILL"}), 1);
  EXPECT_EQ(count_lines_containing(job.output, {"WRONG"}), 0);
  EXPECT_EQ(count_lines_containing(job.output, {"without noticing"}), 0);
  // collrun names the killed rank, not a survivor that exited after it.
  EXPECT_EQ(count_lines_containing(job.output, {"collrun: rank 2 (", "killed by signal 9"}), 1)
      << "collrun did not name rank 2";
  for (const char* survivor : {"collrun: rank 0 (", "collrun: rank 1 (", "collrun: rank 3 ("})
    EXPECT_EQ(count_lines_containing(job.output, {survivor}), 0) << "collrun blamed a survivor";
  // A survivor that got an answer before collrun killed it must have got
  // PEER_LOST (not a timeout: the peer is gone, not slow).
  const int reported = count_lines_containing(job.output, {"allreduce iteration ", " status="});
  const int peer_lost = count_lines_containing(
      job.output, {"allreduce iteration ", " status=" + std::to_string(COLL_ERR_PEER_LOST) + " "});
  EXPECT_EQ(reported, peer_lost) << "a survivor got another error than COLL_ERR_PEER_LOST";
  expect_shm_clean(job);
}

// collrun --enable-recovery, fault_helper's recover-* modes: rank 2 dies
// after the split; the survivors' world allreduce fails with PEER_LOST,
// {0,1} stays exact (on tcp too: a lost connection loses that peer only),
// every survivor finalizes, and collrun names the dead rank in one line.
void expect_survivors_went_on(const JobResult& job, const std::string& death) {
  const std::string peer_lost = "status=" + std::to_string(COLL_ERR_PEER_LOST) + " ";
  EXPECT_EQ(count_lines_containing(job.output, {"WRONG"}), 0);
  for (int rank : {0, 1, 3}) {
    const std::string prefix = "fault-helper rank " + std::to_string(rank) + ": ";
    EXPECT_EQ(count_lines_containing(job.output,
                                     {prefix + "world allreduce after the death " + peer_lost}),
              1)
        << "rank " << rank << ": the world's call after the death did not fail with PEER_LOST";
    EXPECT_EQ(count_lines_containing(job.output, {prefix + "finalize status=0 "}), 1)
        << "rank " << rank << ": finalize did not end cleanly";
  }
  for (int rank : {0, 1})
    EXPECT_EQ(count_lines_containing(job.output, {"fault-helper rank " + std::to_string(rank) +
                                                  ": half exact after the death"}),
              1)
        << "rank " << rank << ": the split without the dead rank";
  EXPECT_EQ(count_lines_containing(job.output, {"collrun: rank 2 (", death,
                                                "the job went on without it (--enable-recovery)"}),
            1)
      << "collrun did not name rank 2 and how it died";
  EXPECT_EQ(count_lines_containing(job.output, {"terminating the job"}), 0);
}

TEST_F(Fault, WithRecoveryTheSurvivorsOfAKilledRankGoOn) {
  const JobResult job = run_recovery("recover-kill", {"--enable-recovery"});
  EXPECT_TRUE(job.exited && job.exit_status == 0)
      << "exit " << job.exit_status << " signal " << job.signal;
  expect_survivors_went_on(job, "died: killed by signal 9");
  expect_shm_clean(job);
}

TEST_F(Fault, WithRecoveryTheSurvivorsOfAnExitedRankGoOn) {
  const JobResult job = run_recovery("recover-exit", {"--enable-recovery"});
  EXPECT_TRUE(job.exited && job.exit_status == 0)
      << "exit " << job.exit_status << " signal " << job.signal;
  expect_survivors_went_on(job, "died: exited with status 3 before coll_finalize");
  expect_shm_clean(job);
}

// A survivor that exits non-zero after coll_finalize is a failure of the
// job (its status), not a death.
TEST_F(Fault, WithRecoveryASurvivorThatFailsGivesItsStatus) {
  const JobResult job =
      run_recovery("recover-kill-then-fail", {"--enable-recovery"});
  EXPECT_TRUE(job.exited && job.exit_status == 5)
      << "exit " << job.exit_status << " signal " << job.signal;
  expect_survivors_went_on(job, "died: killed by signal 9");
  EXPECT_EQ(count_lines_containing(job.output,
                                   {"collrun: rank 1 (", "exited with status 5 after coll_finalize"}),
            1);
  expect_shm_clean(job);
}

// The same program without the option: the death ends the job, as always.
TEST_F(Fault, WithoutRecoveryADeathEndsTheJob) {
  const JobResult job = run_recovery("recover-kill", {});
  EXPECT_TRUE(job.exited && job.exit_status == 128 + 9)
      << "exit " << job.exit_status << " signal " << job.signal;
  EXPECT_EQ(count_lines_containing(
                job.output, {"collrun: rank 2 (", "killed by signal 9", "terminating the job"}),
            1);
  EXPECT_EQ(count_lines_containing(job.output, {"--enable-recovery"}), 0);
  expect_shm_clean(job);
}

void expect_mismatch_noticed(const JobResult& job) {
  EXPECT_TRUE(job.exited && job.exit_status == 0)
      << "exit " << job.exit_status << " signal " << job.signal
      << ": a rank crashed, got wrong data, or an unexpected status";
  EXPECT_EQ(count_lines_containing(job.output, {"WRONG"}), 0);
  const int answered = count_lines_containing(job.output, {"mismatched allreduce status="});
  const int succeeded = count_lines_containing(job.output, {"mismatched allreduce status=0 "});
  EXPECT_GE(answered, 1);
  EXPECT_GE(answered - succeeded, 1) << "no rank noticed the mismatch";
}

TEST_F(Fault, MismatchedCountsEndInAnErrorNotACrash) {
  const JobResult job = run(3, {"COLL_TIMEOUT=3"}, "mismatch");
  expect_mismatch_noticed(job);
  expect_shm_clean(job);
}

// One rank's message fits in cache lines, the others' goes through a slot.
TEST_F(Fault, MismatchedLineAndSlotMessagesEndInAnError) {
  const JobResult job = run(3, {"COLL_TIMEOUT=3"}, "mismatch-slot");
  expect_mismatch_noticed(job);
  EXPECT_GE(count_lines_containing(job.output, {"where it expected"}), 1)
      << "no rank named the lengths:\n" << job.output;
  expect_shm_clean(job);
}

// Rooted and v-collectives: the rank that receives the message of the
// wrong length names it as an argument error.
void expect_rank0_invalid(const JobResult& job, const std::string& what) {
  EXPECT_TRUE(job.exited && job.exit_status == 0)
      << "exit " << job.exit_status << " signal " << job.signal
      << ": a rank crashed or got an unexpected status:\n"
      << job.output;
  EXPECT_EQ(count_lines_containing(
                job.output, {"fault-helper rank 0: mismatched " + what + " status=" +
                                 std::to_string(COLL_ERR_INVALID_ARG) + " "}),
            1)
      << job.output;
  EXPECT_GE(count_lines_containing(job.output, {"where it expected"}), 1) << job.output;
}

TEST_F(Fault, MismatchedGatherCountIsAnArgumentErrorAtTheRoot) {
  const JobResult job = run(3, {"COLL_TIMEOUT=3"}, "mismatch-gather");
  expect_rank0_invalid(job, "gather");
  expect_shm_clean(job);
}

TEST_F(Fault, MismatchedAlltoallvCountsAreAnArgumentError) {
  const JobResult job = run(3, {"COLL_TIMEOUT=3"}, "mismatch-alltoallv");
  expect_rank0_invalid(job, "alltoallv");
  expect_shm_clean(job);
}

// A rank that finalizes while the others are still in a collective with it
// is lost to them: they fail at once with COLL_ERR_PEER_LOST naming it (its
// `left` notice, Channel::quiesce), not after COLL_TIMEOUT (30 s here).
TEST_F(Fault, RankThatFinalizesEarlyIsLostToItsPeersAtOnce) {
  const JobResult job = run(4, {"COLL_TIMEOUT=30"}, "finalize-early");
  EXPECT_FALSE(job.exited && job.exit_status == 0) << "collrun reported success";
  EXPECT_EQ(count_lines_containing(job.output, {"rank 2: calling coll_finalize"}), 1);
  EXPECT_EQ(count_lines_containing(job.output, {"without noticing"}), 0);
  // The leaver's finalize returns (collrun may end it first: then no line).
  EXPECT_EQ(count_lines_containing(job.output, {"rank 2: finalize status="}),
            count_lines_containing(job.output, {"rank 2: finalize status=0 "}));
  const std::string lost = " status=" + std::to_string(COLL_ERR_PEER_LOST) + " ";
  int reported = 0;
  for (int survivor : {0, 1, 3}) {
    const std::string prefix = "fault-helper rank " + std::to_string(survivor) + ": allreduce ";
    const int lines = count_lines_containing(job.output, {prefix});
    EXPECT_EQ(count_lines_containing(job.output, {prefix, lost}), lines)
        << "rank " << survivor << " got another status than COLL_ERR_PEER_LOST";
    reported += lines;
  }
  EXPECT_GE(reported, 1) << "no survivor reported its failure";
  // Within milliseconds: a survivor that timed out would report 30000 ms.
  for (size_t at = job.output.find("after_ms="); at != std::string::npos;
       at = job.output.find("after_ms=", at + 1))
    EXPECT_LT(std::atol(job.output.c_str() + at + 9), 5000) << "noticed late";
  EXPECT_GE(count_lines_containing(job.output, {"rank 2 called coll_finalize while"}), 1)
      << "no survivor named rank 2 as the rank that finalized";
  for (const char* other : {"rank 0 called coll_finalize", "rank 1 called coll_finalize",
                            "rank 3 called coll_finalize"})
    EXPECT_EQ(count_lines_containing(job.output, {other}), 0) << "wrong rank named";
  // Its exit status 0 is no failure: collrun names a survivor, never rank 2.
  EXPECT_EQ(count_lines_containing(job.output, {"collrun: rank 2 ("}), 0);
  expect_shm_clean(job);
}

// The other side: ranks that are still finishing the last operation (their
// messages from rank 0 arrived, they have not looked yet) when rank 0 has
// finalized must complete it; nobody reports a lost peer.
TEST_F(Fault, FinalizeWhilePeersFinishTheLastOperationIsClean) {
  const JobResult job = run(4, {"COLL_TIMEOUT=30"}, "finalize-staggered");
  EXPECT_TRUE(job.exited && job.exit_status == 0)
      << "exit " << job.exit_status << " signal " << job.signal << ": see the ranks' lines";
  EXPECT_EQ(count_lines_containing(job.output, {"staggered bcast status=0 "}), 4);
  EXPECT_EQ(count_lines_containing(job.output, {"staggered allreduce status=0 "}), 4);
  EXPECT_EQ(count_lines_containing(job.output, {"finalize status=0 exit=0"}), 4);
  expect_shm_clean(job);
}

// SIGKILL of collrun and of a rank during start-up, between the rank's
// creating its segment and unlinking it: nobody is left to remove it
// (collrun's safety net died with collrun). The next job's ranks remove it
// (a coll-* segment of this user whose owner is gone), and the new job runs.
TEST_F(Fault, SegmentsOfAJobKilledDuringSetupAreRemovedByTheNextJob) {
  // On shm whatever the suite's transport (tcp_mp_faults runs this driver
  // with COLL_TRANSPORT=tcp): segments are what this is about.
  const JobResult killed = run(2, {"COLL_TRANSPORT=shm"}, "die-in-setup");
  const std::string id = job_id_of(killed.output);
  ASSERT_FALSE(id.empty()) << "rank 0 did not print the job id";
  EXPECT_EQ(killed.signal, SIGKILL) << "collrun was not killed";
  const std::string leftover = "coll-" + id + "-0";
  ASSERT_TRUE(coll_shm_entries().count(leftover))
      << "no leftover to clean: the scenario did not happen (/dev/shm/" << leftover << ")";
  const JobResult next = run(2, {"COLL_TRANSPORT=shm"}, "ok");
  EXPECT_TRUE(next.exited && next.exit_status == 0) << next.output;
  EXPECT_EQ(count_lines_containing(next.output, {"ok status=0"}), 2) << next.output;
  EXPECT_FALSE(coll_shm_entries().count(leftover))
      << "/dev/shm/" << leftover << " of the killed job is still there after the next job";
  expect_shm_clean(next);
}

// Processes whose environment has COLL_JOBID=id (the ranks of that job).
int processes_of_job(const std::string& id) {
  const std::string entry = "COLL_JOBID=" + id;
  int count = 0;
  for (const auto& proc : std::filesystem::directory_iterator("/proc")) {
    const std::string name = proc.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string env;
    if (FILE* f = std::fopen((proc.path() / "environ").c_str(), "r")) {
      char buffer[4096];
      size_t n;
      while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) env.append(buffer, n);
      std::fclose(f);
    }
    for (size_t at = env.find(entry); at != std::string::npos; at = env.find(entry, at + 1)) {
      const size_t end = at + entry.size();
      if ((at == 0 || env[at - 1] == '\0') && (end == env.size() || env[end] == '\0')) {
        ++count;
        break;
      }
    }
  }
  return count;
}

// SIGKILL of collrun alone during start-up, at the worst moment: rank 0 has
// created its segment, no rank has unlinked its own. The ranks must not
// outlive collrun (it starts them with a parent-death SIGKILL), and that
// signal must not leave the segment behind (it is held back until the
// segment is unlinked).
TEST_F(Fault, CollrunKilledDuringSetupLeavesNoSegmentAndNoRank) {
  char sync_dir[] = "/tmp/coll-fault-sync-XXXXXX";
  ASSERT_NE(mkdtemp(sync_dir), nullptr);
  const JobResult job = run(4, {"COLL_TRANSPORT=shm", std::string("COLL_TEST_SYNC_DIR=") + sync_dir},
                            "collrun-dies-in-setup");
  const std::string id = job_id_of(job.output);
  EXPECT_EQ(job.signal, SIGKILL) << "collrun was not killed";
  const bool killed = std::filesystem::exists(std::string(sync_dir) + "/killed-collrun");
  std::filesystem::remove_all(sync_dir);
  ASSERT_FALSE(id.empty()) << "rank 0 did not print the job id";
  EXPECT_TRUE(killed) << "the scenario did not happen: rank 0 did not kill collrun";
  // Every rank ends within moments of collrun (rank 0 once its segment is
  // unlinked), by the signal: one that returned from coll_init sleeps 60 s.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (processes_of_job(id) > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(processes_of_job(id), 0) << "ranks of the job still run 10 s after collrun died";
  for (const std::string& name : coll_shm_entries())
    EXPECT_NE(name.rfind("coll-" + id + "-", 0), 0u) << "left behind: /dev/shm/" << name;
}

}  // namespace
