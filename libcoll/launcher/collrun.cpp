// collrun: starts N ranks of a program, on this host or on the hosts of -H
// / --hostfile (those through a launch agent, launch_agent.hpp), hosts
// their rendezvous, forwards their output and ends the job as a whole.
//
// Everything happens in one poll() loop over the signal pipe (SIGCHLD,
// SIGINT, SIGTERM, SIGHUP), the rendezvous sockets and the ranks' output
// pipes, with the --timeout and kill deadlines as the poll timeout, so
// collrun never blocks on any one rank.
//
// --enable-recovery: a rank that dies — killed by a signal, or a non-zero
// exit without having finalized (the rendezvous' kLeaving) — ends nothing.
// The others go on, the rendezvous completes their barriers without it,
// and at the end one line a dead rank says how it died. The job's status
// is then the survivors'. Signals to collrun and --timeout still end all.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/collrun_protocol.hpp"
#include "bootstrap/unique_fd.hpp"
#include "cpu_placement.hpp"
#include "host_topology.hpp"
#include "job_plan.hpp"
#include "job_secret.hpp"
#include "launch_agent.hpp"
#include "launch_options.hpp"
#include "output_forwarder.hpp"
#include "process_state.hpp"
#include "rank_environment.hpp"
#include "rank_process.hpp"
#include "rendezvous_server.hpp"
#include "shm_cleanup.hpp"
#include "signal_pipe.hpp"
#include "this_host.hpp"

extern char** environ;

namespace collrun {
namespace {

namespace proto = coll::collrun_protocol;
using Clock = std::chrono::steady_clock;

// torch.distributed's env:// variables, set for every rank (also remote).
constexpr const char* kTorchNames[] = {"RANK",        "LOCAL_RANK", "WORLD_SIZE",
                                       "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};

constexpr int kUsageStatus = 2;
constexpr int kTimeoutStatus = 124;  // as timeout(1)
// From SIGTERM to SIGKILL for ranks that do not end.
constexpr auto kKillGrace = std::chrono::seconds(2);
// How long a rank's error exit waits for a peer's death to be named instead.
constexpr auto kBlameGrace = std::chrono::milliseconds(200);
// After SIGKILL a rank ends at once unless it is stuck in the kernel; do not
// wait on such a rank forever.
constexpr auto kReapGrace = std::chrono::seconds(10);
// Removing the job's /dev/shm segments on a remote host, through the agent.
constexpr auto kRemoteCleanupLimit = std::chrono::seconds(10);

// One write(2) a line, so that lines of collrun and of its ranks do not mix.
void write_stderr(const std::string& text) {
  [[maybe_unused]] ssize_t ignored = ::write(2, text.data(), text.size());
}

void say(const std::string& line) { write_stderr("collrun: " + line + "\n"); }

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Whether the process is stopped (SIGSTOP, or traced by a debugger). A
// tracing stop counts only when it lasts a second: LeakSanitizer stops
// every thread of a process that exits by ptrace while it scans its
// memory (state 't', for a moment), and a survivor exiting so was named as
// stopped (CI, the ASan build of tcp_mp_faults). Only called while
// blaming a failed job, so the wait costs nothing on a healthy one.
bool is_stopped(pid_t pid) {
  const char state = coll::process_state(pid);
  if (state == 'T') return true;
  if (state != 't') return false;
  for (int i = 0; i < 100; ++i) {
    ::usleep(10 * 1000);
    if (coll::process_state(pid) != 't') return false;
  }
  return true;
}

// The secret's bytes, from the hex that the ranks get.
std::string secret_bytes(const std::string& hex) {
  std::string bytes;
  coll::job_secret::decode(hex, &bytes);  // made by job_secret::make: always valid
  return bytes;
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

// collrun's environment less an outer PMIx launcher's identity: with it
// the ranks (collrun run inside mpirun or srun) would join that job.
std::vector<std::string> own_environment_without_pmix() {
  std::vector<std::string> env;
  for (char** entry = environ; entry && *entry; ++entry) {
    std::string_view text(*entry);
    if (!text.starts_with("PMIX_")) env.emplace_back(text);
  }
  return env;
}

// A TCP port free on this host now, for torch's MASTER_PORT (rank 0's
// TCPStore listens there): the kernel's choice for a socket bound to port 0,
// closed again. Another process may take it before rank 0 does (torch then
// fails to listen, naming the port); "" when no socket could be bound.
std::string free_tcp_port() {
  coll::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    return "";
  return std::to_string(ntohs(address.sin_port));
}

std::string working_directory() {
  std::vector<char> buffer(4096);
  for (;;) {
    if (::getcwd(buffer.data(), buffer.size())) return buffer.data();
    if (errno != ERANGE || buffer.size() > (1u << 20)) return "";
    buffer.resize(buffer.size() * 2);
  }
}

// Where the rendezvous listens, and the address remote ranks are told.
struct RendezvousPlan {
  std::string listen_ip = "127.0.0.1";
  std::string remote_ip;  // "" when the job has no remote ranks
};

// --bootstrap-addr when given; else 127.0.0.1 for a job on this host only,
// else the first non-loopback IPv4 address (the tcp transport's choice).
RendezvousPlan plan_rendezvous(const LaunchOptions& options, const JobPlan& plan) {
  RendezvousPlan rendezvous;
  if (options.bootstrap_addr) rendezvous.listen_ip = *options.bootstrap_addr;
  if (!plan.any_remote()) return rendezvous;
  if (options.bootstrap_addr && *options.bootstrap_addr != "0.0.0.0") {
    rendezvous.remote_ip = *options.bootstrap_addr;
    return rendezvous;
  }
  std::optional<std::string> reachable = first_non_loopback_ipv4();
  if (!reachable)
    throw UsageError(
        "this host has no non-loopback IPv4 address for the remote ranks to reach collrun at: "
        "give --bootstrap-addr ADDR");
  rendezvous.remote_ip = *reachable;
  if (!options.bootstrap_addr) rendezvous.listen_ip = *reachable;
  return rendezvous;
}

// What a launch agent says with its exit status, for the message of a
// failed remote rank.
std::string agent_status_hint(int wait_status) {
  if (!WIFEXITED(wait_status)) return "";
  int status = WEXITSTATUS(wait_status);
  if (status == 255) return " (ssh's own error status: could the agent reach the host?)";
  if (status > 128 && status < 128 + 65) {
    const char* name = ::strsignal(status - 128);
    return " (128+" + std::to_string(status - 128) + ": killed by signal " +
           std::to_string(status - 128) + " (" + (name ? name : "unknown") + ") on its host?)";
  }
  return "";
}

struct Rank {
  pid_t pid = 0;
  bool running = false;
  bool remote = false;
  std::string process;  // how messages name it: "pid 12", "host b, agent pid 12"
  // A remote rank's lifeline: the write end of its agent's stdin. Closing
  // it ends the remote rank (launch_agent.hpp).
  coll::UniqueFd lifeline;
};

// What starting remote ranks needs, resolved before the job starts.
struct AgentPlan {
  std::vector<std::string> words;  // the agent command, split
  std::string path;                // words[0] found in PATH
};

class Job {
 public:
  Job(LaunchOptions options, JobPlan plan, std::string program_path, AgentPlan agent,
      RendezvousPlan rendezvous)
      : options_(std::move(options)),
        plan_(std::move(plan)),
        program_path_(std::move(program_path)),
        agent_(std::move(agent)),
        rendezvous_(std::move(rendezvous)),
        job_id_(make_job_id()),
        secret_(coll::job_secret::make()),
        signals_({SIGCHLD, SIGINT, SIGTERM, SIGHUP}),
        server_(plan_.num_ranks, job_id_, secret_bytes(secret_), rendezvous_.listen_ip),
        output_(options_.tag_output),
        ranks_(static_cast<size_t>(plan_.num_ranks)) {
    if (options_.enable_recovery) server_.enable_recovery();
    server_.set_rank_killer([this](int rank) { kill_silent_rank(rank); });
  }

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
    settle_pending_blame();  // every rank ended within the grace
    output_.drain_all();
    server_.shut_down();
    clean_remote_shared_memory();
    report_dead_ranks();
    if (timed_out_) return kTimeoutStatus;
    // Nobody survived: the first death is the job's status.
    if (!exit_status_ && !dead_.empty() && dead_.size() == ranks_.size())
      return dead_.front().status;
    return exit_status_.value_or(0);
  }

 private:
  // Every rank's environment before its own variables: collrun's, then -x.
  RankEnvironment shared_environment() {
    RankEnvironment env(own_environment_without_pmix());
    for (const std::string& spec : options_.exports) {
      size_t eq = spec.find('=');
      std::string name = spec.substr(0, eq);
      exported_names_.push_back(name);
      if (eq != std::string::npos) {
        env.set_entry(spec);
        continue;
      }
      const char* value = std::getenv(spec.c_str());
      if (!value) {
        say("-x " + spec + ": " + spec +
            " is not set in collrun's environment; nothing to forward");
        continue;
      }
      env.set(spec, value);
    }
    env.set(proto::kEnvSize, std::to_string(plan_.num_ranks));
    env.set(proto::kEnvJobId, job_id_);
    // A local rank's environment only (readable by its user and root);
    // remote ranks read it from their lifeline (remote_rank_script).
    env.set(coll::job_secret::kEnv, secret_);
    // torch.distributed's env:// rendezvous (what torchrun sets), so that
    // `collrun -np N python3 train.py` runs a script written for torchrun:
    // rank 0's TCPStore at MASTER_ADDR:MASTER_PORT, unless the user set
    // them (in collrun's environment or with -x). RANK and the sizes are
    // collrun's own, as COLL_RANK is.
    if (!env.contains("MASTER_PORT")) {
      std::string port = free_tcp_port();
      if (port.empty())
        say("no free TCP port found for MASTER_PORT; torch's env:// rendezvous needs one");
      else
        env.set("MASTER_PORT", port);
    }
    master_addr_given_ = env.contains("MASTER_ADDR");
    env.set("WORLD_SIZE", std::to_string(plan_.num_ranks));
    return env;
  }

  // Where rank 0 runs, as another rank reaches it: 127.0.0.1 for ranks on
  // this host when rank 0 is here, the rendezvous' address for remote ones;
  // rank 0's host name when rank 0 is remote.
  std::string master_addr_for(const PlannedHost& host) const {
    const PlannedHost& first = plan_.host_of(0);
    if (!first.local) return first.name;
    return host.local ? "127.0.0.1" : rendezvous_.remote_ip;
  }

  RankEnvironment rank_environment(const RankEnvironment& shared, int rank) {
    const PlannedHost& host = plan_.host_of(rank);
    RankEnvironment env = shared;
    env.set(proto::kEnvAddress, host.local
                                    ? server_.address()
                                    : rendezvous_.remote_ip + ":" + std::to_string(server_.port()));
    env.set(proto::kEnvRank, std::to_string(rank));
    env.set(proto::kEnvLocalRank, std::to_string(plan_.local_rank[size_t(rank)]));
    env.set(proto::kEnvLocalSize, std::to_string(host.ranks));
    env.set("RANK", std::to_string(rank));
    env.set("LOCAL_RANK", std::to_string(plan_.local_rank[size_t(rank)]));
    env.set("LOCAL_WORLD_SIZE", std::to_string(host.ranks));
    if (!master_addr_given_) env.set("MASTER_ADDR", master_addr_for(host));
    // libcoll's choice of shared memory or TCP for each pair then matches
    // the placement (an explicit -x COLL_HOST_ID still wins).
    bool host_id_exported = std::find(exported_names_.begin(), exported_names_.end(),
                                      "COLL_HOST_ID") != exported_names_.end();
    if (plan_.hosts_given && !host_id_exported) env.set("COLL_HOST_ID", host.name);
    return env;
  }

  // The CPUs of each rank on this host (--map-by, --bind-to), by rank:
  // unset for ranks not bound. Says the notes of the placement and, with
  // --report-bindings, each rank's binding.
  std::vector<std::optional<cpu_set_t>> bind_local_ranks() {
    std::vector<int> local;
    for (int rank = 0; rank < plan_.num_ranks; ++rank)
      if (plan_.host_of(rank).local) local.push_back(rank);
    const std::string option = std::string("--bind-to ") + bind_to_name(options_.bind_to);
    HostTopology topology;  // no cores: nothing is bound
    if (options_.bind_to != BindTo::none && !local.empty()) {
      std::string why;
      topology = discover_host_topology(&why);
      if (topology.cores.empty()) say(option + ": " + why + "; ranks are not bound");
    }
    if (options_.bind_to != BindTo::none && local.size() < size_t(plan_.num_ranks))
      say(option + " binds the ranks on this host only");
    HostPlacement placement = place_on_host(topology, local, options_.map_by, options_.bind_to);
    for (const std::string& note : placement.notes) say(note);

    std::vector<std::optional<cpu_set_t>> cpus(size_t(plan_.num_ranks));
    std::vector<std::string> reports(size_t(plan_.num_ranks));
    for (const RankCpus& r : placement.ranks) {
      cpus[size_t(r.rank)] = r.cpus;
      reports[size_t(r.rank)] = r.report;
    }
    if (!options_.report_bindings) return cpus;
    // "[host:pid] " names the process that did the binding, as Open MPI's
    // daemon names itself: collrun, for every rank (it binds no remote one).
    std::string prefix = "[" + host_name() + ":" + std::to_string(::getpid()) + "] ";
    for (int rank = 0; rank < plan_.num_ranks; ++rank) {
      std::string line = reports[size_t(rank)];
      if (line.empty())
        line = "MCW rank " + std::to_string(rank) + " is not bound (on host " +
               plan_.host_of(rank).name + ": collrun binds the ranks on this host only)";
      write_stderr(prefix + line + "\n");
    }
    return cpus;
  }

  void start_ranks() {
    std::vector<std::optional<cpu_set_t>> binding = bind_local_ranks();
    RankEnvironment shared = shared_environment();
    std::vector<std::string> agent_env = own_environment_without_pmix();
    std::string cwd = working_directory();
    // Rank 0 reads collrun's stdin, as with mpirun; but not a terminal: the
    // ranks are in process groups of their own, and reading the terminal
    // from a background group would stop the rank (SIGTTIN). A remote rank
    // 0 reads nothing: its agent's stdin is its lifeline.
    int rank0_stdin = ::isatty(0) ? -1 : 0;

    for (int rank = 0; rank < plan_.num_ranks; ++rank) {
      const PlannedHost& host = plan_.host_of(rank);
      Rank& r = ranks_[static_cast<size_t>(rank)];
      r.remote = !host.local;
      RankEnvironment env = rank_environment(shared, rank);
      RankSpawn spawn;
      coll::UniqueFd lifeline_read;
      if (host.local) {
        spawn.program_path = program_path_;
        spawn.argv = options_.command;
        spawn.env = env.entries();
        spawn.stdin_fd = rank == 0 ? rank0_stdin : -1;
        spawn.cpus = binding[size_t(rank)];
      } else {
        std::vector<std::string> forwarded = exported_names_;
        forwarded.insert(forwarded.end(), std::begin(kTorchNames), std::end(kTorchNames));
        RemoteRank remote{cwd, env.for_remote_rank(forwarded), options_.command};
        spawn.program_path = agent_.path;
        spawn.argv = agent_command_line(agent_.words, host.name, remote_rank_script(remote));
        spawn.env = agent_env;
      }
      try {
        if (r.remote) {
          int ends[2];
          if (::pipe2(ends, O_CLOEXEC) != 0)
            throw SpawnError(std::string("pipe: ") + std::strerror(errno));
          lifeline_read.reset(ends[0]);
          r.lifeline.reset(ends[1]);
          spawn.stdin_fd = lifeline_read.get();
        }
        OutputForwarder::ChildEnds ends = output_.add_rank(rank);
        spawn.stdout_fd = ends.out.get();
        spawn.stderr_fd = ends.err.get();
        pid_t pid = spawn_rank(spawn);
        r.pid = pid;
        r.running = true;
        // The remote rank's script reads the secret as its lifeline's
        // first line (a pipe holds far more than one line: no blocking).
        if (r.remote) {
          const std::string line = secret_ + "\n";
          if (::write(r.lifeline.get(), line.data(), line.size()) != ssize_t(line.size()))
            say("rank " + std::to_string(rank) + ": cannot hand the job secret to its agent: " +
                std::strerror(errno));
        }
        if (r.remote)
          r.process = "host " + host.name + ", agent pid " + std::to_string(pid);
        else if (plan_.hosts_given)
          r.process = "host " + host.name + ", pid " + std::to_string(pid);
        else
          r.process = "pid " + std::to_string(pid);
        server_.set_rank_process(rank, r.process);
      } catch (const std::exception& error) {
        say(std::string(error.what()) + "; rank " + std::to_string(rank) + " not started");
        exit_status_ = kUsageStatus;
        for (int never = rank; never < plan_.num_ranks; ++never)
          server_.rank_exited(never, "was never started");
        terminate();
        return;
      }
    }
  }

  // Best effort, bounded: a remote rank that was killed could not remove
  // its segments, and this host's safety net (~Job) does not reach there.
  // Skipped when the user signalled collrun twice: they want out.
  void clean_remote_shared_memory() {
    if (!plan_.any_remote() || signals_forwarded_ > 1) return;
    coll::UniqueFd dev_null(::open("/dev/null", O_WRONLY | O_CLOEXEC));
    std::string script = remote_cleanup_script(shm_prefix_for_job(job_id_));
    std::vector<std::pair<pid_t, std::string>> cleaners;
    for (const PlannedHost& host : plan_.hosts) {
      if (host.local) continue;
      RankSpawn spawn;
      spawn.program_path = agent_.path;
      spawn.argv = agent_command_line(agent_.words, host.name, script);
      spawn.env = own_environment_without_pmix();
      spawn.stdout_fd = dev_null.get();
      spawn.stderr_fd = dev_null.get();
      try {
        cleaners.emplace_back(spawn_rank(spawn), host.name);
      } catch (const std::exception& error) {
        say("removing /dev/shm/" + shm_prefix_for_job(job_id_) + "* on host " + host.name + ": " +
            error.what());
      }
    }
    auto deadline = Clock::now() + kRemoteCleanupLimit;
    while (!cleaners.empty()) {
      std::erase_if(cleaners, [](const std::pair<pid_t, std::string>& cleaner) {
        int status = 0;
        pid_t done = ::waitpid(cleaner.first, &status, WNOHANG);
        return done == cleaner.first || (done < 0 && errno != EINTR);
      });
      if (cleaners.empty()) break;
      if (Clock::now() >= deadline) {
        for (const auto& [pid, host] : cleaners) {
          say("removing /dev/shm/" + shm_prefix_for_job(job_id_) + "* on host " + host +
              " did not finish within " + std::to_string(kRemoteCleanupLimit.count()) +
              " s; given up");
          ::kill(-pid, SIGKILL);
          int status = 0;
          while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
          }
        }
        break;
      }
      // SIGCHLD lands in the signal pipe: wait on it, briefly. Any other
      // signal means the user wants out: give up at once.
      pollfd signal_fd{signals_.read_fd(), POLLIN, 0};
      ::poll(&signal_fd, 1, 50);
      for (int signo : signals_.take())
        if (signo != SIGCHLD) deadline = Clock::now();
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
    if (blame_deadline_) next = std::min(next, *blame_deadline_);
    if (kill_deadline_) next = std::min(next, *kill_deadline_);
    if (give_up_deadline_) next = std::min(next, *give_up_deadline_);
    // A survivors' round whose silent members are killed then.
    if (auto round = server_.next_deadline()) next = std::min(next, *round);
    auto left = std::chrono::ceil<std::chrono::milliseconds>(next - Clock::now());
    return static_cast<int>(std::max<long long>(left.count(), 0));
  }

  void reap() {
    // Every rank that has ended since the last pass; the first reported
    // is the one collrun names (and whose status it returns). waitpid does
    // not say which ended first, so a rank killed by a signal goes before
    // ranks that exited: when one rank is killed, the survivors exit
    // moments later with PEER_LOST, and by then they may all be here
    // together (scanned in rank order, a survivor was named in 9 of 30
    // trials).
    std::vector<std::pair<int, int>> ended;  // rank, wait status
    for (size_t rank = 0; rank < ranks_.size(); ++rank) {
      Rank& r = ranks_[rank];
      if (!r.running) continue;
      int status = 0;
      pid_t done = ::waitpid(r.pid, &status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) continue;
      r.running = false;
      if (done < 0) status = 0;  // not our child any more: nothing to report
      ended.emplace_back(static_cast<int>(rank), status);
    }
    std::stable_sort(ended.begin(), ended.end(), [](const auto& a, const auto& b) {
      return WIFSIGNALED(a.second) && !WIFSIGNALED(b.second);
    });
    for (const auto& [rank, status] : ended) on_rank_end(rank, status);
  }

  void on_rank_end(int rank, int wait_status) {
    // Everything the rank wrote before it ended is in its pipes now.
    output_.drain_rank(rank);
    ranks_[size_t(rank)].lifeline.reset();
    std::string how = describe_wait_status(wait_status);
    if (ranks_[size_t(rank)].remote) how += agent_status_hint(wait_status);
    int status = shell_status(wait_status);
    if (options_.enable_recovery && !terminating_) {
      // Before rank_exited settles the rounds: whatever the rank sent
      // before it ended (a round, its kLeaving) is read first.
      const bool finalized = server_.rank_finalized(rank);
      server_.rank_exited(rank, how);
      on_rank_end_recovering(rank, wait_status, status, finalized, how);
      return;
    }
    server_.rank_exited(rank, how);
    if (status == 0 || exit_status_ || terminating_) {
      if (status != 0 && !exit_status_) exit_status_ = status;
      return;
    }
    if (!WIFSIGNALED(wait_status)) {
      // A rank that exits with an error may be the survivor of a peer that
      // is being killed right now: a killed process closes its sockets
      // (the survivor sees the reset at once) before it can be reaped. So
      // the first such rank waits kBlameGrace for a rank ended by a signal,
      // which is named instead; if none comes, it is named.
      if (!pending_blame_) {
        pending_blame_ = PendingBlame{rank, status, how};
        blame_deadline_ = Clock::now() + kBlameGrace;
      }
      return;
    }
    blame(rank, status, how);
  }

  // --enable-recovery: nothing ends. A rank that did not finalize died
  // (its peers got COLL_ERR_PEER_LOST and go on without it); one that
  // finalized and then failed is a survivor that failed, whose status the
  // job returns, as without the option. A signal after finalize is a death
  // all the same: the process did not end as it meant to.
  void on_rank_end_recovering(int rank, int wait_status, int status, bool finalized,
                              const std::string& how) {
    if (WIFSIGNALED(wait_status) || (status != 0 && !finalized)) {
      dead_.push_back(DeadRank{rank, status, how});
      return;
    }
    if (status == 0) return;
    say("rank " + std::to_string(rank) + " (" + ranks_[size_t(rank)].process + ") " + how +
        " after coll_finalize");
    if (!exit_status_) exit_status_ = status;
  }

  // One line a dead rank, once the job has ended.
  void report_dead_ranks() {
    for (const DeadRank& dead : dead_)
      say("rank " + std::to_string(dead.rank) + " (" + ranks_[size_t(dead.rank)].process +
          ") died: " + dead.how + (dead.how.starts_with("exited") ? " before coll_finalize" : "") +
          "; the job went on without it (--enable-recovery)");
  }

  // Names the rank that ended the job and ends the others.
  void blame(int rank, int status, std::string how) {  // by value: may come from pending_blame_
    pending_blame_.reset();
    blame_deadline_.reset();
    exit_status_ = status;
    std::string line =
        "rank " + std::to_string(rank) + " (" + ranks_[size_t(rank)].process + ") " + how;
    if (any_running()) line += "; terminating the job";
    say(line);
    // A stopped rank (SIGSTOP, a debugger) never fails by itself: the
    // others time out waiting for it, and the first of them is named
    // above. Say so.
    for (size_t r = 0; r < ranks_.size(); ++r)
      if (ranks_[r].running && !ranks_[r].remote && is_stopped(ranks_[r].pid))
        say("rank " + std::to_string(r) + " (" + ranks_[r].process +
            ") is stopped (SIGSTOP or a debugger): the others may have waited for it");
    terminate();
  }

  void settle_pending_blame() {
    if (pending_blame_ && (!blame_deadline_ || Clock::now() >= *blame_deadline_ || !any_running()))
      blame(pending_blame_->rank, pending_blame_->status, pending_blame_->how);
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
    for (Rank& r : ranks_) r.lifeline.reset();
    if (!terminating_) {
      terminating_ = true;
      server_.shut_down();
      kill_deadline_ = Clock::now() + kKillGrace;
    }
  }

  void check_deadlines() {
    settle_pending_blame();
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
        say("rank " + std::to_string(rank) + " (" + ranks_[rank].process +
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
    // Remote ranks end also where the agent passes no signal on (ssh).
    for (Rank& r : ranks_) r.lifeline.reset();
    kill_deadline_ = Clock::now() + kKillGrace;
  }

  // A rank that did not join a survivors' round in time (the rendezvous
  // has said so and counts it dead): SIGKILL, which also ends a stopped
  // rank; a remote rank ends when its lifeline closes. Its end is then
  // reaped as any other: without --enable-recovery it ends the job.
  void kill_silent_rank(int rank) {
    Rank& r = ranks_[size_t(rank)];
    if (!r.running) return;
    if (r.remote) {
      r.lifeline.reset();
      return;
    }
    if (::kill(-r.pid, SIGKILL) != 0) ::kill(r.pid, SIGKILL);
  }

  // Each rank leads its own process group: signal the group, so that what
  // a rank started (behind a wrapper script, say) ends with it.
  void kill_all(int signo) {
    for (const Rank& r : ranks_)
      if (r.running && ::kill(-r.pid, signo) != 0) ::kill(r.pid, signo);
  }

  LaunchOptions options_;
  JobPlan plan_;
  std::string program_path_;  // "" when no rank runs on this host
  AgentPlan agent_;
  RendezvousPlan rendezvous_;
  std::vector<std::string> exported_names_;  // of -x
  bool master_addr_given_ = false;  // MASTER_ADDR set by the user: kept
  std::string job_id_;
  std::string secret_;  // hex, as COLL_JOB_SECRET; never printed
  SignalPipe signals_;
  RendezvousServer server_;
  OutputForwarder output_;
  std::vector<Rank> ranks_;

  std::optional<int> exit_status_;  // the first failure's
  bool timed_out_ = false;
  bool terminating_ = false;
  int signals_forwarded_ = 0;
  struct PendingBlame {
    int rank;
    int status;
    std::string how;
  };
  std::optional<PendingBlame> pending_blame_;
  struct DeadRank {
    int rank;
    int status;
    std::string how;
  };
  std::vector<DeadRank> dead_;  // --enable-recovery, in the order they ended
  std::optional<Clock::time_point> blame_deadline_;
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
  JobPlan plan;
  RendezvousPlan rendezvous;
  try {
    plan = plan_job(options, ThisHostFacts::of_this_machine());
    rendezvous = plan_rendezvous(options, plan);
  } catch (const UsageError& error) {
    say(error.what());
    return kUsageStatus;
  }
  // The program must be here only when ranks run here; remote hosts look
  // it up themselves.
  std::optional<std::string> program;
  bool any_local = std::any_of(plan.hosts.begin(), plan.hosts.end(),
                               [](const PlannedHost& h) { return h.local; });
  if (any_local) {
    program = resolve_program(options.command[0]);
    if (!program) {
      say("program '" + options.command[0] + "' not found" +
          (options.command[0].find('/') == std::string::npos ? " in PATH"
                                                             : " or not an executable file"));
      return kUsageStatus;
    }
  }
  AgentPlan agent;
  if (plan.any_remote()) {
    agent.words = launch_agent_words(options.launch_agent, std::getenv(kLaunchAgentEnv));
    std::optional<std::string> path = resolve_program(agent.words[0]);
    if (!path) {
      say("launch agent '" + agent.words[0] + "' not found" +
          (agent.words[0].find('/') == std::string::npos ? " in PATH"
                                                         : " or not an executable file") +
          " (--launch-agent, " + kLaunchAgentEnv + ")");
      return kUsageStatus;
    }
    agent.path = *path;
  }
  // Output to a closed pipe must not kill collrun (and the job with it).
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Job job(std::move(options), std::move(plan), program.value_or(""), std::move(agent),
            std::move(rendezvous));
    return job.run();
  } catch (const std::exception& error) {
    say(std::string("cannot run the job: ") + error.what());
    return 1;
  }
}

}  // namespace
}  // namespace collrun

int main(int argc, char** argv) { return collrun::collrun_main(argc, argv); }
