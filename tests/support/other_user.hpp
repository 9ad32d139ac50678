// Runs a copy of a test program as another user, for the attacker tests
// (tests/collrun/bootstrap_helper.cpp, tests/tcp/attacked_job.cpp): uid and
// gid 65534 with no groups (setpriv), an environment of PATH alone (none of
// the job's: no COLL_JOB_SECRET, no COLL_BOOTSTRAP), its stdin and stdout
// pipes to the caller. The copy sits in a fresh 0755 directory under /tmp,
// since the build tree may not be readable by that user. Needs root.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace test_support {

struct OtherUserProcess {
  pid_t pid = -1;
  int to = -1;    // its stdin
  int from = -1;  // its stdout
  std::string staged;  // the copy it runs

  // Removes the staged copy and its directory.
  void remove_staged() const {
    if (staged.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::path(staged).parent_path(), ec);
  }
};

// Starts `self` (copied as `name`) as uid 65534 with `args`. Throws
// std::runtime_error naming the step that failed.
inline OtherUserProcess start_as_other_user(const char* self, const std::string& name,
                                            const std::vector<std::string>& args) {
  char dir[] = "/tmp/coll-other-user.XXXXXX";
  if (::mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
  ::chmod(dir, 0755);
  OtherUserProcess p;
  p.staged = std::string(dir) + "/" + name;
  std::error_code ec;
  std::filesystem::copy_file(self, p.staged, ec);
  if (ec || ::chmod(p.staged.c_str(), 0755) != 0) {
    p.remove_staged();
    throw std::runtime_error("staging " + p.staged + " failed");
  }
  int in[2], out[2];
  if (::pipe(in) != 0) throw std::runtime_error("pipe failed");
  if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
  // Built before the fork: the child only calls async-signal-safe functions.
  std::vector<std::string> words = {"setpriv", "--reuid=65534", "--regid=65534",
                                    "--clear-groups", "--", p.staged};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  char path[] = "PATH=/usr/bin:/bin", asan[] = "ASAN_OPTIONS=detect_leaks=0";
  char* env[] = {path, asan, nullptr};
  p.pid = ::fork();
  if (p.pid < 0) throw std::runtime_error("fork failed");
  if (p.pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::close(in[1]);
    ::close(out[0]);
    ::execve("/usr/bin/setpriv", argv.data(), env);
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  p.to = in[1];
  p.from = out[0];
  return p;
}

}  // namespace test_support
