// collrun's command line: the mpirun flags it understands and the program
// to start.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace collrun {

// The most ranks one collrun starts (all of them on this host).
inline constexpr int kMaxRanks = 4096;

struct LaunchOptions {
  int num_ranks = 0;  // 0 with hosts given: one rank a slot
  // -H lists (several -H are joined with ','), or --hostfile: at most one
  // of the two. Neither: every rank on this host.
  std::string host_list;
  std::optional<std::string> hostfile;
  bool oversubscribe = false;
  // --launch-agent CMD (words split at blanks); unset: COLLRUN_LAUNCH_AGENT,
  // then the default (launch_agent.hpp).
  std::optional<std::string> launch_agent;
  // --bootstrap-addr: the IPv4 address the rendezvous listens on.
  std::optional<std::string> bootstrap_addr;
  // -x arguments in order: "VAR" (forward VAR from collrun's environment)
  // or "VAR=value" (set it).
  std::vector<std::string> exports;
  bool bind_to_core = false;
  bool tag_output = false;
  std::optional<double> timeout_s;
  std::string timeout_text;  // as given, for messages
  bool help = false;
  std::vector<std::string> command;  // the program and its arguments
};

// A command line collrun cannot run: the message says why.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// `args` are the arguments after argv[0]. Throws UsageError.
LaunchOptions parse_launch_options(const std::vector<std::string>& args);

std::string usage_text();

}  // namespace collrun
