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

// --map-by: where consecutive ranks go. slot (the default) and core fill
// each host's slots in order and this host's cores in order; numa and
// package go round-robin over this host's NUMA nodes or packages (the
// cores of each in order); node goes round-robin over the hosts, and over
// this host's cores in order (cpu_placement.hpp, rank_placement.hpp).
enum class MapBy { slot, core, numa, package, node };

// --bind-to: the CPUs a rank on this host may run on: those of its core,
// of the NUMA node or package that holds its core, or all (none).
enum class BindTo { none, core, numa, package };

// The option's word ("package"), for messages.
const char* bind_to_name(BindTo bind_to);

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
  MapBy map_by = MapBy::slot;
  BindTo bind_to = BindTo::none;
  bool report_bindings = false;
  bool tag_output = false;
  std::optional<double> timeout_s;
  std::string timeout_text;  // as given, for messages
  // --enable-recovery: a rank that dies does not end the job (collrun.cpp).
  bool enable_recovery = false;
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
