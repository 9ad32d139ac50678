#include "run_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>

extern char** environ;

namespace collrun_test {

ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          double limit_s, const std::string& input) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    size_t eq = entry.find('=');
    merged[entry.substr(0, eq)] = entry;
  }
  for (const std::string& entry : env) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos)
      merged.erase(entry);
    else
      merged[entry.substr(0, eq)] = entry;
  }
  std::vector<std::string> env_strings;
  for (auto& [name, entry] : merged) env_strings.push_back(entry);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC)) return {};
  ::signal(SIGPIPE, SIG_IGN);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(args[0], args.data(), envp.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ProcessResult result;
  [[maybe_unused]] ssize_t ignored = input.empty() ? 0 : ::write(in[1], input.data(), input.size());
  ::close(in[1]);

  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(limit_s));
  int fds[2] = {out[0], err[0]};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_count = 2;
  while (open_count > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd p[2];
    for (int i = 0; i < 2; ++i) p[i] = pollfd{fds[i], POLLIN, 0};
    int rc = ::poll(p, 2, static_cast<int>(left.count()));
    if (rc < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[65536];
      ssize_t n = ::read(fds[i], buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else {
        ::close(fds[i]);
        fds[i] = -1;
        --open_count;
      }
    }
  }
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
  int status = 0;
  // The pipes closed: the child is exiting. A child that closed them and
  // lives on is killed at the deadline.
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    ::usleep(10000);
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string explain(const ProcessResult& r) {
  return "status " + std::to_string(r.status) + (r.timed_out ? " (timed out)" : "") +
         "\n--- stdout:\n" + r.out + "\n--- stderr:\n" + r.err;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      lines.push_back(text.substr(start));
      break;
    }
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string path_from_env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace collrun_test
