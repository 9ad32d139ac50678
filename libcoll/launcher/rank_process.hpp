// Starting one rank (fork + exec) and describing how it ended.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace collrun {

// Finds `name` as execvp(3) would: as given when it contains '/', else in
// each PATH entry. nullopt when no executable file is found.
std::optional<std::string> resolve_program(const std::string& name);

struct RankSpawn {
  std::string program_path;       // resolved, absolute or relative
  std::vector<std::string> argv;  // argv[0] is the program as the user typed it
  std::vector<std::string> env;   // "NAME=value"
  int stdin_fd = -1;              // -1: /dev/null
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::optional<cpu_set_t> cpus;  // --bind-to (cpu_placement.hpp)
};

// A rank that could not be started: the message names the program and why.
class SpawnError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Starts the rank in a process group of its own (so that signals reach
// whatever it starts, e.g. behind a wrapper script) and returns its pid
// once exec succeeded. The rank is killed if collrun dies
// (PR_SET_PDEATHSIG). Throws SpawnError.
pid_t spawn_rank(const RankSpawn& spawn);

// The status a shell would report: the exit code, or 128+S for signal S.
int shell_status(int wait_status);
// "exited with status 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int wait_status);

}  // namespace collrun
