#include "launch_options.hpp"

#include <arpa/inet.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "rank_environment.hpp"

namespace collrun {
namespace {

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

// Open MPI's words; "socket" is its older name for a package. Its
// modifiers (core:PE=2, numa:span, core:overload-allowed) are not taken.
template <typename Value>
struct Word {
  std::string_view word;
  Value value;
};
constexpr Word<MapBy> kMapByWords[] = {{"slot", MapBy::slot},      {"core", MapBy::core},
                                       {"numa", MapBy::numa},      {"package", MapBy::package},
                                       {"socket", MapBy::package}, {"node", MapBy::node}};
constexpr Word<BindTo> kBindToWords[] = {{"none", BindTo::none},
                                         {"core", BindTo::core},
                                         {"numa", BindTo::numa},
                                         {"package", BindTo::package},
                                         {"socket", BindTo::package}};

template <typename Value, size_t N>
Value parse_word(const Word<Value> (&words)[N], const std::string& option, const std::string& what,
                 const char* expected) {
  for (const Word<Value>& word : words)
    if (word.word == what) return word.value;
  throw UsageError(option + " '" + what + "': collrun " + expected);
}

}  // namespace

const char* bind_to_name(BindTo bind_to) {
  for (const Word<BindTo>& word : kBindToWords)
    if (word.value == bind_to) return word.word.data();  // a literal: NUL-terminated
  return "?";
}

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
      if (!is_shell_name(var))
        throw UsageError("-x '" + spec +
                         "': expected VAR or VAR=value with VAR a variable "
                         "name");
      options.exports.push_back(spec);
    } else if (name == "map-by") {
      options.map_by =
          parse_word(kMapByWords, "--map-by", value(), "maps by slot, core, numa, package or node");
    } else if (name == "bind-to") {
      options.bind_to =
          parse_word(kBindToWords, "--bind-to", value(), "binds to core, numa, package or none");
    } else if (name == "report-bindings") {
      no_value();
      options.report_bindings = true;
    } else if (name == "tag-output") {
      no_value();
      options.tag_output = true;
    } else if (name == "enable-recovery") {
      no_value();
      options.enable_recovery = true;
    } else if (name == "timeout") {
      options.timeout_text = value();
      options.timeout_s = parse_timeout(options.timeout_text);
    } else if (name == "H" || name == "host" || name == "hosts") {
      std::string list = value();
      if (list.empty()) throw UsageError(arg + " needs a list of hosts");
      options.host_list += (options.host_list.empty() ? "" : ",") + list;
    } else if (name == "hostfile" || name == "machinefile") {
      std::string path = value();
      if (path.empty()) throw UsageError(arg + " needs a file name");
      if (options.hostfile && *options.hostfile != path)
        throw UsageError(arg + " " + path + ": one hostfile only (it was " + *options.hostfile +
                         ")");
      options.hostfile = path;
    } else if (name == "launch-agent") {
      std::string agent = value();
      if (agent.find_first_not_of(" \t") == std::string::npos)
        throw UsageError(arg + " needs a command");
      options.launch_agent = agent;
    } else if (name == "bootstrap-addr") {
      std::string address = value();
      in_addr parsed{};
      if (::inet_pton(AF_INET, address.c_str(), &parsed) != 1)
        throw UsageError(arg + " '" + address + "' is not an IPv4 address (like 10.0.0.1)");
      options.bootstrap_addr = address;
    } else if (name == "oversubscribe") {
      no_value();
      options.oversubscribe = true;
    } else if (name == "allow-run-as-root") {
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
  if (!options.host_list.empty() && options.hostfile)
    throw UsageError("-H and --hostfile both name the hosts: give one of them");
  bool have_hosts = !options.host_list.empty() || options.hostfile;
  if (!have_num_ranks && !have_hosts) throw UsageError("missing -np N: how many ranks to start");
  if (options.command.empty()) throw UsageError("no program to run given");
  return options;
}

std::string usage_text() {
  return R"(usage: collrun -np N [options] program [args...]
       collrun -H HOST:SLOTS,... [-np N] [options] program [args...]
       collrun --hostfile FILE [-np N] [options] program [args...]

Starts N ranks of program, on this host or on the hosts given, and hosts
their rendezvous for libcoll (COLL_BOOTSTRAP, COLL_RANK, COLL_SIZE,
COLL_LOCAL_RANK, COLL_LOCAL_SIZE, COLL_JOBID and COLL_JOB_SECRET are set in
each rank's environment; with hosts given, COLL_HOST_ID=<host as given>
too, so that libcoll uses shared memory within a host and TCP between
hosts). Only processes that prove COLL_JOB_SECRET join the rendezvous.
For torch.distributed's env:// (as torchrun), RANK, LOCAL_RANK, WORLD_SIZE
and LOCAL_WORLD_SIZE are set too, and MASTER_ADDR (where rank 0 runs) and
MASTER_PORT (a port free on this host) unless set already.

  -n N, -np N, --np N   number of ranks (required without hosts; with
                        hosts, default: one rank a slot)
  -H, --host LIST       hosts and their slots: a:2,b:2,c (c: 1 slot); a host
                        named twice adds up its slots
  --hostfile FILE, --machinefile FILE
                        one host a line: "a slots=2", "c", "b slots=4
                        max_slots=8"; '#' starts a comment
  --oversubscribe       allow more ranks than slots: the extra ranks go round
                        the hosts' slots again (never past max_slots)
  --launch-agent CMD    starts ranks on other hosts (default: $COLLRUN_LAUNCH_AGENT,
                        else "ssh -o BatchMode=yes"), run as
                        CMD HOST COMMAND, COMMAND one /bin/sh command line
  --bootstrap-addr IP   the IPv4 address the rendezvous listens on (default:
                        127.0.0.1 when every rank is on this host, else the
                        first non-loopback address; 0.0.0.0: every address)
  -x VAR                forward VAR from collrun's environment
  -x VAR=value          set VAR in the ranks' environment
  --map-by slot|core|numa|package|node
                        where consecutive ranks go: slot (the default) and
                        core fill each host's slots and this host's cores in
                        order; numa, package (or socket): round-robin over
                        this host's NUMA nodes or packages, the cores of
                        each in order; node: round-robin over the hosts
  --bind-to core|numa|package|none
                        bind each rank on this host to the CPUs of its
                        core, or of the NUMA node or package that holds its
                        core (default: none, unlike mpirun)
  --report-bindings     print each rank's binding to stderr as Open MPI's
                        mpirun does: "[host:pid] MCW rank 0 bound to socket
                        0[core 0[hwt 0]]: [B/.]", or "... is not bound"
  --tag-output          prefix output lines with [1,RANK]<stdout>: or
                        [1,RANK]<stderr>:
  --timeout S           end the job after S seconds (exit status 124)
  --enable-recovery     a rank that dies (a signal, or a non-zero exit before
                        coll_finalize) does not end the job: the others go
                        on, collrun's bootstrap barriers (coll_finalize's)
                        complete without it, and at the end one line a dead
                        rank says how it died (see Exit status)
  --allow-run-as-root   accepted for mpirun compatibility; no effect
  -h, --help            this text

Placement. The cores of this host are those hwloc shows in collrun's own
affinity mask (without hwloc in the build: each CPU of that mask is a
core, and the whole machine one NUMA node and one package; so too where
hwloc shows no NUMA node or package, and collrun says so). More ranks than
cores go round the cores again, in the same order, as with mpirun. A rank
bound to every CPU collrun may use is reported as not bound, as mpirun
does. Ranks on other hosts are not bound.

Hosts. Ranks fill the slots in order: the first host's slots take ranks 0,
1, ..., then the next host's; with --map-by node they go round-robin over
the hosts instead (a host whose slots are taken is skipped). A host that
is this machine (localhost, 127.x, its host name or address, or a name
/etc/hosts maps to one) has its ranks forked here; every other host gets
one launch agent process a rank. The agent's command line sets the rank's
environment explicitly (ssh passes none): the job's COLL_* variables,
every COLL_* variable of collrun's environment, and the -x ones. The
remote rank starts in collrun's working directory where that exists there;
its stdin is /dev/null (stdin reaches rank 0 only when it runs on this
host). It ends when its agent's stdin closes (collrun ended the job, or
collrun, the agent or the ssh connection died): SIGTERM, SIGKILL 2 s
later. A remote rank killed by signal S shows as exit status 128+S. When
the job ends collrun removes /dev/shm/coll-<COLL_JOBID>-* on each remote
host through the agent (best effort, at most 10 s).

Exit status: 0 when every rank exits 0; otherwise the first failing rank's
status (128+S for a rank killed by signal S), 124 on --timeout, 2 for a
command line collrun cannot run. When a rank fails, collrun ends the others
(SIGTERM, then SIGKILL) and removes the job's /dev/shm/coll-<COLL_JOBID>-*
segments. With --enable-recovery a dead rank ends nothing: the exit status
is that of the survivors (0 when each exited 0, else the first that failed
after coll_finalize), or that of the first dead rank when none survived;
signals to collrun and --timeout still end the whole job.
)";
}

}  // namespace collrun
