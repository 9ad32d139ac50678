#include "rank_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "bootstrap/unique_fd.hpp"
#include "cpu_placement.hpp"

namespace collrun {
namespace {

bool is_executable_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// What the child reports through the exec pipe when it cannot become the
// rank. Written with write(2) only: between fork and exec only
// async-signal-safe calls are allowed.
struct ChildFailure {
  enum Stage : int { kBind = 1, kExec = 2, kSetup = 3 } stage;
  int error;
};

[[noreturn]] void child_fail(int report_fd, ChildFailure::Stage stage, int error) {
  ChildFailure failure{stage, error};
  [[maybe_unused]] ssize_t ignored = ::write(report_fd, &failure, sizeof failure);
  ::_exit(127);
}

std::vector<char*> pointers_to(const std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  pointers.reserve(strings.size() + 1);
  for (const std::string& s : strings) pointers.push_back(const_cast<char*>(s.c_str()));
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace

std::optional<std::string> resolve_program(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos)
    return is_executable_file(name) ? std::optional(name) : std::nullopt;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    size_t end = dirs.find(':', start);
    std::string dir =
        dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    if (end == std::string::npos) return std::nullopt;
    start = end + 1;
  }
}

pid_t spawn_rank(const RankSpawn& spawn) {
  // Everything the child needs is prepared before fork().
  std::vector<char*> argv = pointers_to(spawn.argv);
  std::vector<char*> envp = pointers_to(spawn.env);
  coll::UniqueFd dev_null;
  int stdin_fd = spawn.stdin_fd;
  if (stdin_fd < 0) {
    dev_null.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    stdin_fd = dev_null.get();
  }
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    throw SpawnError(std::string("pipe: ") + std::strerror(errno));
  coll::UniqueFd report_read(report[0]);
  coll::UniqueFd report_write(report[1]);
  pid_t parent = ::getpid();

  pid_t pid = ::fork();
  if (pid < 0) throw SpawnError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    int fd = report_write.get();
    // SIGPIPE is ignored in collrun and an ignored signal stays ignored
    // across exec: give the rank the default back. Handled signals are
    // reset by exec itself.
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setpgid(0, 0);
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) child_fail(fd, ChildFailure::kSetup, errno);
    if (::getppid() != parent) ::_exit(127);  // collrun died already
    if ((stdin_fd >= 0 && ::dup2(stdin_fd, 0) < 0) ||
        (spawn.stdout_fd >= 0 && ::dup2(spawn.stdout_fd, 1) < 0) ||
        (spawn.stderr_fd >= 0 && ::dup2(spawn.stderr_fd, 2) < 0))
      child_fail(fd, ChildFailure::kSetup, errno);
    if (spawn.cpus && ::sched_setaffinity(0, sizeof(cpu_set_t), &*spawn.cpus) != 0)
      child_fail(fd, ChildFailure::kBind, errno);
    ::execve(spawn.program_path.c_str(), argv.data(), envp.data());
    child_fail(fd, ChildFailure::kExec, errno);
  }

  // Also from this side, so the group exists before collrun signals it.
  // EACCES means the child has exec'd already (and set it itself).
  ::setpgid(pid, pid);
  report_write.reset();
  ChildFailure failure{};
  ssize_t n;
  do {
    n = ::read(report_read.get(), &failure, sizeof failure);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return pid;  // the pipe closed on exec: the rank runs

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != static_cast<ssize_t>(sizeof failure))
    throw SpawnError("starting '" + spawn.argv[0] + "' failed");
  std::string why = std::strerror(failure.error);
  switch (failure.stage) {
    case ChildFailure::kBind:
      throw SpawnError("cannot bind '" + spawn.argv[0] + "' to CPUs " +
                       describe_cpu_set(*spawn.cpus) + ": " + why);
    case ChildFailure::kExec:
      throw SpawnError("cannot execute '" + spawn.program_path + "': " + why);
    case ChildFailure::kSetup:
      break;
  }
  throw SpawnError("preparing to run '" + spawn.argv[0] + "': " + why);
}

int shell_status(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

std::string describe_wait_status(int wait_status) {
  if (WIFEXITED(wait_status))
    return "exited with status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    int signo = WTERMSIG(wait_status);
    const char* name = ::strsignal(signo);
    return "killed by signal " + std::to_string(signo) + " (" + (name ? name : "unknown") + ")" +
           (WCOREDUMP(wait_status) ? ", core dumped" : "");
  }
  return "ended with wait status " + std::to_string(wait_status);
}

}  // namespace collrun
