// Runs a program (collrun, mpirun) as a child of the test, with its output
// captured and a bound on how long it may take.
#pragma once

#include <string>
#include <vector>

namespace collrun_test {

struct ProcessResult {
  int status = -1;         // exit code, or 128+S when killed by signal S
  bool timed_out = false;  // ran past the limit and was killed by the test
  std::string out;
  std::string err;
};

// `env` entries ("NAME=value") are added to the test's environment;
// "NAME" alone removes NAME. The child is killed (SIGKILL) after
// `limit_s`: tests then fail on `timed_out`, never hang.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {}, double limit_s = 120,
                          const std::string& input = "");

// Status, stdout and stderr of a run, for the message of a failed check.
std::string explain(const ProcessResult& r);

// Lines of `text`, without their '\n'.
std::vector<std::string> split_lines(const std::string& text);

// The path in environment variable `name` (set by meson), or "".
std::string path_from_env(const char* name);

}  // namespace collrun_test
