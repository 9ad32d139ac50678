// Starting ranks on other hosts through a launch agent (ssh by default),
// as Open MPI's rsh launcher does.
//
// The agent is run on this host as `AGENT... HOST COMMAND`, one agent
// process per remote rank. COMMAND is one argument, a command line for a
// POSIX shell, exactly as ssh hands it to the remote login shell; an agent
// that runs commands itself (ip netns exec, a test's fake agent) runs it
// with `sh -c "$*"`. It starts /bin/sh with a small script that
//   - changes to collrun's working directory when the host has it,
//   - sets the rank's environment explicitly (ssh forwards none): the
//     job's COLL_* variables, COLL_* of collrun's environment, and -x ones,
//   - starts the program in the background, with stdin from /dev/null,
//   - watches its own stdin, which comes from a pipe collrun holds open for
//     the life of the job (through ssh: the ssh connection): when it ends -
//     collrun closed it, or collrun, the agent or the connection died - the
//     program gets SIGTERM, then SIGKILL 2 s later,
//   - passes SIGTERM, SIGHUP and SIGINT on to the program as SIGTERM,
//   - waits for the program and exits with its status (128+S when signal S
//     killed it: through an agent the death by signal is a status).
//
// So a remote rank that dies ends its agent, and collrun ends the job as
// for a local rank; a job that collrun ends (failure, --timeout, a signal)
// closes every lifeline and signals every agent, and the remote ranks end
// within the watcher's 2 s grace. Limits:
//   - the remote program is signalled by its pid: processes it started
//     itself and left behind are not ended (exec the real rank from
//     wrapper scripts);
//   - one ssh connection per rank: sshd's MaxStartups (default 10:30:100)
//     drops some of many simultaneous connections to one host. For many
//     ranks a host use connection sharing, e.g. --launch-agent "ssh -o
//     BatchMode=yes -o ControlMaster=auto -o ControlPath=~/.ssh/cm-%C -o
//     ControlPersist=60";
//   - the remote host needs a POSIX /bin/sh with cat and sleep, the program
//     at the same path (or in its PATH), and a route to the rendezvous
//     address (--bootstrap-addr);
//   - a remote rank reads no stdin;
//   - the rendezvous admits only processes that prove the job secret
//     (job_secret.hpp); a remote rank gets it as the first line of its
//     lifeline (the agent's stdin), never on the command line.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace collrun {

// ssh without password prompts: a prompt would stop a rank in the
// background (SIGTTIN) instead of failing it.
inline constexpr const char* kDefaultLaunchAgent = "ssh -o BatchMode=yes";
inline constexpr const char* kLaunchAgentEnv = "COLLRUN_LAUNCH_AGENT";

// The agent's words: the --launch-agent option when given, else the
// variable's value when set and not blank, else the default; split at
// blanks (no quoting).
std::vector<std::string> launch_agent_words(const std::optional<std::string>& option,
                                            const char* env_value);

// `word` as one word of a POSIX shell command line: as it is when it
// needs no quoting, else in single quotes.
std::string shell_quote(std::string_view word);

struct RemoteRank {
  std::string working_directory;  // "" for the login directory
  std::vector<std::string> env;   // "NAME=value", NAME a shell name
  std::vector<std::string> argv;  // the program (found in the remote PATH) and its arguments
};

// The /bin/sh script described above.
std::string remote_rank_script(const RemoteRank& rank);
// Removes the job's shared-memory segments on a host (best effort).
std::string remote_cleanup_script(const std::string& shm_prefix);

// AGENT... HOST "exec /bin/sh -c 'SCRIPT'": the argv of the agent process.
std::vector<std::string> agent_command_line(const std::vector<std::string>& agent_words,
                                            const std::string& host, const std::string& script);

}  // namespace collrun
