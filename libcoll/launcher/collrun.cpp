// collrun: starts N ranks of a program on this host, hosts their
// rendezvous, forwards their output and ends the job as a whole.
//
// Everything happens in one poll() loop over the signal pipe (SIGCHLD,
// SIGINT, SIGTERM, SIGHUP), the rendezvous sockets and the ranks' output
// pipes, with the --timeout and kill deadlines as the poll timeout, so
// collrun never blocks on any one rank.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/collrun_protocol.hpp"
#include "cpu_binding.hpp"
#include "launch_options.hpp"
#include "output_forwarder.hpp"
#include "rank_process.hpp"
#include "rendezvous_server.hpp"
#include "shm_cleanup.hpp"
#include "signal_pipe.hpp"

extern char** environ;

namespace collrun {
namespace {

namespace proto = coll::collrun_protocol;
using Clock = std::chrono::steady_clock;

constexpr int kUsageStatus = 2;
constexpr int kTimeoutStatus = 124;  // as timeout(1)
// From SIGTERM to SIGKILL for ranks that do not end.
constexpr auto kKillGrace = std::chrono::seconds(2);
// After SIGKILL a rank ends at once unless it is stuck in the kernel; do not
// wait on such a rank forever.
constexpr auto kReapGrace = std::chrono::seconds(10);

void say(const std::string& line) {
  std::string text = "collrun: " + line + "\n";
  [[maybe_unused]] ssize_t ignored = ::write(2, text.data(), text.size());
}

// Unique per job and usable in file names: collrun's pid and 32 random bits.
std::string make_job_id() {
  std::random_device random;
  char id[64];
  std::snprintf(id, sizeof id, "%ldx%08x", static_cast<long>(::getpid()),
                static_cast<unsigned>(random()));
  return id;
}

// Descriptors 0-2 must be open, or the pipes made for the ranks could land
// on them and be closed by exec.
void ensure_standard_fds_open() {
  for (int fd = 0; fd <= 2; ++fd)
    if (::fcntl(fd, F_GETFD) < 0) ::open("/dev/null", O_RDWR);
}

struct Rank {
  pid_t pid = 0;
  bool running = false;
};

class Job {
 public:
  Job(LaunchOptions options, std::string program_path)
      : options_(std::move(options)),
        program_path_(std::move(program_path)),
        job_id_(make_job_id()),
        signals_({SIGCHLD, SIGINT, SIGTERM, SIGHUP}),
        server_(options_.num_ranks, job_id_),
        output_(options_.tag_output),
        ranks_(static_cast<size_t>(options_.num_ranks)) {}

  ~Job() {
    // The safety net for shared memory, whichever way the job ended.
    remove_entries_with_prefix(kShmDirectory, shm_prefix_for_job(job_id_));
  }

  int run() {
    if (options_.timeout_s)
      job_deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(*options_.timeout_s));
    start_ranks();
    while (any_running()) {
      wait_for_events();
      reap();
      check_deadlines();
    }
    output_.drain_all();
    server_.shut_down();
    if (timed_out_) return kTimeoutStatus;
    return exit_status_.value_or(0);
  }

 private:
  std::vector<std::string> rank_environment_base() {
    // Names set explicitly win over collrun's own environment.
    std::set<std::string, std::less<>> overridden = {proto::kEnvAddress,   proto::kEnvRank,
                                                     proto::kEnvSize,      proto::kEnvLocalRank,
                                                     proto::kEnvLocalSize, proto::kEnvJobId};
    std::vector<std::string> set_by_x;
    for (const std::string& spec : options_.exports) {
      size_t eq = spec.find('=');
      if (eq == std::string::npos) {
        const char* value = std::getenv(spec.c_str());
        if (!value) {
          say("-x " + spec + ": " + spec +
              " is not set in collrun's environment; nothing to forward");
          continue;
        }
        overridden.insert(spec);
        set_by_x.push_back(spec + "=" + value);
        continue;
      }
      overridden.insert(spec.substr(0, eq));
      set_by_x.push_back(spec);
    }
    std::vector<std::string> env;
    for (char** entry = environ; entry && *entry; ++entry) {
      std::string_view text(*entry);
      std::string_view name = text.substr(0, text.find('='));
      // The ranks are collrun's job: an outer PMIx launcher's identity
      // (collrun run inside mpirun or srun) would make them join that job.
      if (name.starts_with("PMIX_")) continue;
      if (overridden.contains(name)) continue;
      env.emplace_back(text);
    }
    env.insert(env.end(), set_by_x.begin(), set_by_x.end());
    env.push_back(std::string(proto::kEnvAddress) + "=" + server_.address());
    env.push_back(std::string(proto::kEnvSize) + "=" + std::to_string(options_.num_ranks));
    env.push_back(std::string(proto::kEnvLocalSize) + "=" + std::to_string(options_.num_ranks));
    env.push_back(std::string(proto::kEnvJobId) + "=" + job_id_);
    return env;
  }

  void start_ranks() {
    std::vector<cpu_set_t> binding;
    if (options_.bind_to_core) {
      std::string why;
      binding = plan_core_binding(options_.num_ranks, &why);
      if (binding.empty()) say("--bind-to core: " + why + "; ranks are not bound");
    }
    std::vector<std::string> base_env = rank_environment_base();
    // Rank 0 reads collrun's stdin, as with mpirun; but not a terminal: the
    // ranks are in process groups of their own, and reading the terminal
    // from a background group would stop the rank (SIGTTIN).
    int rank0_stdin = ::isatty(0) ? -1 : 0;

    for (int rank = 0; rank < options_.num_ranks; ++rank) {
      RankSpawn spawn;
      spawn.program_path = program_path_;
      spawn.argv = options_.command;
      spawn.env = base_env;
      spawn.env.push_back(std::string(proto::kEnvRank) + "=" + std::to_string(rank));
      spawn.env.push_back(std::string(proto::kEnvLocalRank) + "=" + std::to_string(rank));
      spawn.stdin_fd = rank == 0 ? rank0_stdin : -1;
      if (!binding.empty()) spawn.cpus = binding[static_cast<size_t>(rank)];
      try {
        OutputForwarder::ChildEnds ends = output_.add_rank(rank);
        spawn.stdout_fd = ends.out.get();
        spawn.stderr_fd = ends.err.get();
        pid_t pid = spawn_rank(spawn);
        ranks_[static_cast<size_t>(rank)] = Rank{pid, true};
        server_.set_rank_pid(rank, pid);
      } catch (const std::exception& error) {
        say(std::string(error.what()) + "; rank " + std::to_string(rank) + " not started");
        exit_status_ = kUsageStatus;
        for (int never = rank; never < options_.num_ranks; ++never)
          server_.rank_exited(never, "was never started");
        terminate();
        return;
      }
    }
  }

  bool any_running() const {
    return std::any_of(ranks_.begin(), ranks_.end(), [](const Rank& r) { return r.running; });
  }

  void wait_for_events() {
    std::vector<pollfd> fds;
    fds.push_back(pollfd{signals_.read_fd(), POLLIN, 0});
    server_.add_pollfds(fds);
    output_.add_pollfds(fds);
    int rc = ::poll(fds.data(), fds.size(), poll_timeout_ms());
    if (rc < 0) {
      if (errno == EINTR) return;
      say(std::string("poll: ") + std::strerror(errno));
      return;
    }
    if (fds[0].revents & POLLIN)
      for (int signo : signals_.take())
        if (signo != SIGCHLD) on_signal(signo);
    server_.handle(fds);
    output_.handle(fds);
  }

  // Until the next deadline; at most a second, so that children are reaped
  // even if a SIGCHLD byte was ever lost.
  int poll_timeout_ms() const {
    auto next = Clock::now() + std::chrono::seconds(1);
    if (job_deadline_ && !terminating_) next = std::min(next, *job_deadline_);
    if (kill_deadline_) next = std::min(next, *kill_deadline_);
    if (give_up_deadline_) next = std::min(next, *give_up_deadline_);
    auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    return static_cast<int>(std::max<long long>(left.count(), 0));
  }

  void reap() {
    for (size_t rank = 0; rank < ranks_.size(); ++rank) {
      Rank& r = ranks_[rank];
      if (!r.running) continue;
      int status = 0;
      pid_t done = ::waitpid(r.pid, &status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) continue;
      r.running = false;
      if (done < 0) status = 0;  // not our child any more: nothing to report
      on_rank_end(static_cast<int>(rank), status);
    }
  }

  void on_rank_end(int rank, int wait_status) {
    // Everything the rank wrote before it ended is in its pipes now.
    output_.drain_rank(rank);
    std::string how = describe_wait_status(wait_status);
    int status = shell_status(wait_status);
    if (status != 0 && !exit_status_) {
      exit_status_ = status;
      if (!terminating_) {
        std::string line = "rank " + std::to_string(rank) + " (pid " +
                           std::to_string(ranks_[rank].pid) + ") " + how;
        if (any_running()) line += "; terminating the job";
        say(line);
        terminate();
      }
    }
    server_.rank_exited(rank, how);
  }

  void on_signal(int signo) {
    if (signals_forwarded_ > 0) {
      // A second signal: the user means it.
      kill_all(SIGKILL);
      kill_deadline_.reset();
      give_up_deadline_ = Clock::now() + kReapGrace;
      return;
    }
    ++signals_forwarded_;
    say("received signal " + std::to_string(signo) + " (" + ::strsignal(signo) +
        "); forwarding it to the ranks");
    kill_all(signo);
    if (!terminating_) {
      terminating_ = true;
      server_.shut_down();
      kill_deadline_ = Clock::now() + kKillGrace;
    }
  }

  void check_deadlines() {
    auto now = Clock::now();
    if (job_deadline_ && !terminating_ && now >= *job_deadline_ && any_running()) {
      timed_out_ = true;
      say("job timed out after " + options_.timeout_text + " s; terminating the job");
      terminate();
    }
    if (kill_deadline_ && now >= *kill_deadline_) {
      kill_all(SIGKILL);
      kill_deadline_.reset();
      give_up_deadline_ = now + kReapGrace;
    }
    if (give_up_deadline_ && now >= *give_up_deadline_) {
      for (size_t rank = 0; rank < ranks_.size(); ++rank) {
        if (!ranks_[rank].running) continue;
        say("rank " + std::to_string(rank) + " (pid " + std::to_string(ranks_[rank].pid) +
            ") did not end after SIGKILL; leaving it");
        ranks_[rank].running = false;
      }
      if (!exit_status_) exit_status_ = 1;
    }
  }

  // Ends the job: SIGTERM now, SIGKILL after kKillGrace.
  void terminate() {
    if (terminating_) return;
    terminating_ = true;
    // Ranks waiting in the bootstrap learn at once that the job is over.
    server_.shut_down();
    kill_all(SIGTERM);
    kill_deadline_ = Clock::now() + kKillGrace;
  }

  // Each rank leads its own process group: signal the group, so that what
  // a rank started (behind a wrapper script, say) ends with it.
  void kill_all(int signo) {
    for (const Rank& r : ranks_)
      if (r.running && ::kill(-r.pid, signo) != 0) ::kill(r.pid, signo);
  }

  LaunchOptions options_;
  std::string program_path_;
  std::string job_id_;
  SignalPipe signals_;
  RendezvousServer server_;
  OutputForwarder output_;
  std::vector<Rank> ranks_;

  std::optional<int> exit_status_;  // the first failure's
  bool timed_out_ = false;
  bool terminating_ = false;
  int signals_forwarded_ = 0;
  std::optional<Clock::time_point> job_deadline_;
  std::optional<Clock::time_point> kill_deadline_;
  std::optional<Clock::time_point> give_up_deadline_;
};

int collrun_main(int argc, char** argv) {
  ensure_standard_fds_open();
  LaunchOptions options;
  try {
    options = parse_launch_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const UsageError& error) {
    say(error.what());
    std::fprintf(stderr,
                 "usage: collrun -np N [options] program [args...] "
                 "(collrun --help for more)\n");
    return kUsageStatus;
  }
  if (options.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  std::optional<std::string> program = resolve_program(options.command[0]);
  if (!program) {
    say("program '" + options.command[0] + "' not found" +
        (options.command[0].find('/') == std::string::npos ? " in PATH"
                                                           : " or not an executable file"));
    return kUsageStatus;
  }
  // Output to a closed pipe must not kill collrun (and the job with it).
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Job job(std::move(options), *program);
    return job.run();
  } catch (const std::exception& error) {
    say(std::string("cannot run the job: ") + error.what());
    return 1;
  }
}

}  // namespace
}  // namespace collrun

int main(int argc, char** argv) { return collrun::collrun_main(argc, argv); }
