#include "launch_agent.hpp"

#include <algorithm>

#include "shm_cleanup.hpp"

namespace collrun {
namespace {

std::vector<std::string> split_at_blanks(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
    size_t start = i;
    while (i < text.size() && text[i] != ' ' && text[i] != '\t') ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

bool needs_no_quotes(std::string_view word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == '/' || c == ',' || c == ':' || c == '+' || c == '@' ||
           c == '%';
  });
}

}  // namespace

std::vector<std::string> launch_agent_words(const std::optional<std::string>& option,
                                            const char* env_value) {
  if (option) {
    std::vector<std::string> words = split_at_blanks(*option);
    if (!words.empty()) return words;
  }
  if (env_value) {
    std::vector<std::string> words = split_at_blanks(env_value);
    if (!words.empty()) return words;
  }
  return split_at_blanks(kDefaultLaunchAgent);
}

std::string shell_quote(std::string_view word) {
  if (needs_no_quotes(word)) return std::string(word);
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'')
      quoted += "'\\''";  // end the quotes, an escaped quote, quotes again
    else
      quoted += c;
  }
  return quoted + "'";
}

std::string remote_rank_script(const RemoteRank& rank) {
  // The job secret comes as the lifeline's first line (collrun writes it),
  // never on a command line; `read` takes that line and nothing more.
  std::string start = "COLL_JOB_SECRET=\"$coll_secret\" ";  // NAME=value... program args
  for (const std::string& entry : rank.env) {
    size_t eq = entry.find('=');
    start += entry.substr(0, eq + 1) + shell_quote(entry.substr(eq + 1)) + " ";
  }
  for (const std::string& word : rank.argv) start += shell_quote(word) + " ";

  std::string script;
  // Before anything else, so that a signal never leaves the program
  // behind without a shell that passes it on. ($p is empty until then.)
  script += "trap 'kill -s TERM $p 2>/dev/null' HUP INT TERM\n";
  if (!rank.working_directory.empty())
    script += "cd " + shell_quote(rank.working_directory) + " 2>/dev/null\n";
  // Keep the lifeline (stdin) on fd 3; the program and the shell read
  // /dev/null. (An asynchronous command reads /dev/null anyway.)
  script += "IFS= read -r coll_secret || exit 1\n";
  script += "exec 3<&0 </dev/null\n";
  script += start + "3<&- &\n";
  script += "p=$!\n";
  // The watcher: when the lifeline ends, end the program.
  script +=
      "{ cat >/dev/null; kill -s TERM $p; sleep 2; kill -s KILL $p; } <&3 >/dev/null 2>&1 &\n";
  script += "w=$!\n";
  // The shell's own reports ("Terminated") are not the rank's output.
  script += "exec 3<&- 2>/dev/null\n";
  // A trapped signal ends `wait` early with the program still running:
  // wait again until the program itself has ended.
  script += "while :; do wait $p; s=$?; kill -0 $p 2>/dev/null || break; done\n";
  script += "kill -s KILL $w 2>/dev/null\n";
  script += "exit $s\n";
  return script;
}

std::string remote_cleanup_script(const std::string& shm_prefix) {
  return std::string("rm -f ") + kShmDirectory + "/" + shell_quote(shm_prefix) + "*\n";
}

std::vector<std::string> agent_command_line(const std::vector<std::string>& agent_words,
                                            const std::string& host, const std::string& script) {
  std::vector<std::string> argv = agent_words;
  argv.push_back(host);
  argv.push_back("exec /bin/sh -c " + shell_quote(script));
  return argv;
}

}  // namespace collrun
