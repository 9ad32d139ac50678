#include "launch_options.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

namespace collrun {
namespace {

bool is_env_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) return false;
  }
  return true;
}

int parse_num_ranks(const std::string& option, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < 1)
    throw UsageError(option + " '" + text + "' is not a positive integer");
  if (value > kMaxRanks)
    throw UsageError(option + " " + text + ": collrun starts at most " + std::to_string(kMaxRanks) +
                     " ranks");
  return static_cast<int>(value);
}

double parse_timeout(const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !std::isfinite(value) || value <= 0)
    throw UsageError("--timeout '" + text + "' is not a positive number of seconds");
  return value;
}

}  // namespace

LaunchOptions parse_launch_options(const std::vector<std::string>& args) {
  LaunchOptions options;
  bool have_num_ranks = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the program

    // Open MPI takes long options with one dash or two (-np, --np,
    // -tag-output, --tag-output), and "--name=value".
    bool two_dashes = arg.starts_with("--");
    std::string name = arg.substr(two_dashes ? 2 : 1);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); two_dashes && eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw UsageError(arg + " needs a value");
      return args[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw UsageError("--" + name + " takes no value");
    };

    if (name == "n" || name == "np") {
      options.num_ranks = parse_num_ranks(arg, value());
      have_num_ranks = true;
    } else if (name == "x") {
      std::string spec = value();
      std::string var = spec.substr(0, spec.find('='));
      if (!is_env_name(var))
        throw UsageError("-x '" + spec +
                         "': expected VAR or VAR=value with VAR a variable "
                         "name");
      options.exports.push_back(spec);
    } else if (name == "bind-to") {
      std::string what = value();
      if (what == "core")
        options.bind_to_core = true;
      else if (what == "none")
        options.bind_to_core = false;
      else
        throw UsageError("--bind-to '" + what + "': collrun binds to core or none");
    } else if (name == "tag-output") {
      no_value();
      options.tag_output = true;
    } else if (name == "timeout") {
      options.timeout_text = value();
      options.timeout_s = parse_timeout(options.timeout_text);
    } else if (name == "allow-run-as-root" || name == "oversubscribe") {
      no_value();  // accepted for mpirun compatibility; nothing to do here
    } else if (name == "h" || name == "help") {
      options.help = true;
    } else {
      throw UsageError("unknown option '" + arg +
                       "' (collrun --help lists "
                       "the options it takes)");
    }
  }
  options.command.assign(args.begin() + static_cast<long>(i), args.end());
  if (options.help) return options;
  if (!have_num_ranks) throw UsageError("missing -np N: how many ranks to start");
  if (options.command.empty()) throw UsageError("no program to run given");
  return options;
}

std::string usage_text() {
  return R"(usage: collrun -np N [options] program [args...]

Starts N ranks of program on this host and hosts their rendezvous for
libcoll (COLL_BOOTSTRAP, COLL_RANK, COLL_SIZE, COLL_LOCAL_RANK,
COLL_LOCAL_SIZE and COLL_JOBID are set in each rank's environment).

  -n N, -np N, --np N   number of ranks (required)
  -x VAR                forward VAR from collrun's environment
  -x VAR=value          set VAR in the ranks' environment
  --bind-to core|none   bind each rank to one core (default: none)
  --tag-output          prefix output lines with [1,RANK]<stdout>: or
                        [1,RANK]<stderr>:
  --timeout S           end the job after S seconds (exit status 124)
  --allow-run-as-root, --oversubscribe
                        accepted for mpirun compatibility; no effect
  -h, --help            this text

Exit status: 0 when every rank exits 0; otherwise the first failing rank's
status (128+S for a rank killed by signal S), 124 on --timeout, 2 for a
command line collrun cannot run. When a rank fails, collrun ends the others
(SIGTERM, then SIGKILL) and removes the job's /dev/shm/coll-<COLL_JOBID>-*
segments.
)";
}

}  // namespace collrun
