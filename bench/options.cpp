#include "options.hpp"

#include <getopt.h>

#include <algorithm>
#include <charconv>
#include <string_view>

#include "datatypes.hpp"

namespace bench {
namespace {

size_t parse_count(std::string_view text, const char* what) {
  size_t value = 0;
  const char* end = text.data() + text.size();
  auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) {
    throw UsageError(std::string(what) + ": '" + std::string(text) +
                     "' is not a non-negative integer");
  }
  return value;
}

// -m [MIN:]MAX
void parse_message_sizes(std::string_view text, Options& options) {
  const size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    options.min_bytes = parse_count(text.substr(0, colon), "-m MIN");
    options.max_bytes = parse_count(text.substr(colon + 1), "-m MAX");
  } else {
    options.max_bytes = parse_count(text, "-m MAX");
  }
  if (options.min_bytes == 0) throw UsageError("-m: MIN must be at least 1");
  if (options.min_bytes > options.max_bytes) {
    throw UsageError("-m: MIN " + std::to_string(options.min_bytes) + " is above MAX " +
                     std::to_string(options.max_bytes));
  }
}

// -b allreduce,bcast,barrier (in the order given, each once); "all" stands
// for every collective, in the order of coll.h.
std::vector<Collective> parse_collectives(std::string_view text) {
  std::vector<Collective> collectives;
  const auto add = [&](Collective collective) {
    if (std::find(collectives.begin(), collectives.end(), collective) == collectives.end()) {
      collectives.push_back(collective);
    }
  };
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view name = text.substr(0, comma);
    if (name == "all") {
      for (const CollectiveTraits& row : all_collectives()) add(row.collective);
    } else if (const auto collective = parse_collective(name)) {
      add(*collective);
    } else {
      throw UsageError("-b: unknown collective '" + std::string(name) + "' (" +
                       all_collective_names() + ", all)");
    }
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (collectives.empty()) throw UsageError("-b: no collective named");
  return collectives;
}

// "bcast, reduce, ...": the collectives an option applies to.
std::string names_of(bool (*applies)(Collective)) {
  std::string names;
  for (const CollectiveTraits& row : all_collectives()) {
    if (!applies(row.collective)) continue;
    if (!names.empty()) names += ", ";
    names += row.name;
  }
  return names;
}

enum LongOnly { kCsv = 1000, kJson, kRounds, kSync, kSyncStart, kRotateRoot, kAllocMem };

}  // namespace

IterationPlan iteration_plan(const Options& options, size_t message_bytes) {
  if (message_bytes <= kLargeMessageBytes) {
    return {options.warmup, options.iterations};
  }
  return {(options.warmup + 9) / 10, std::max<size_t>(1, (options.iterations + 9) / 10)};
}

std::vector<size_t> message_sizes(const Options& options) {
  const size_t element = coll_datatype_size(options.workload.datatype);
  std::vector<size_t> sizes;
  for (size_t bytes = options.min_bytes; bytes <= options.max_bytes; bytes *= 2) {
    if (bytes >= element) sizes.push_back(bytes);
    if (bytes > options.max_bytes / 2) break;  // the next doubling overflows
  }
  return sizes;
}

Options parse_options(int argc, char** argv, bool side_by_side) {
  static const option kLongOptions[] = {{"csv", required_argument, nullptr, kCsv},
                                        {"json", required_argument, nullptr, kJson},
                                        {"rounds", required_argument, nullptr, kRounds},
                                        {"sync", required_argument, nullptr, kSync},
                                        {"sync-start", no_argument, nullptr, kSyncStart},
                                        {"rotate-root", no_argument, nullptr, kRotateRoot},
                                        {"alloc-mem", no_argument, nullptr, kAllocMem},
                                        {"help", no_argument, nullptr, 'h'},
                                        {nullptr, 0, nullptr, 0}};
  Options options;
  bool root_given = false;
  bool op_given = false;
  opterr = 0;  // errors are reported by the reporting rank only
  optind = 1;
  int code;
  while ((code = getopt_long(argc, argv, ":m:i:x:fcT:r:o:b:h", kLongOptions, nullptr)) != -1) {
    const std::string_view arg = optarg ? optarg : "";
    switch (code) {
      case 'm':
        parse_message_sizes(arg, options);
        break;
      case 'i':
        options.iterations = parse_count(arg, "-i");
        if (options.iterations == 0) throw UsageError("-i: must be at least 1");
        break;
      case 'x':
        options.warmup = parse_count(arg, "-x");
        break;
      case 'f':
        options.full = true;
        break;
      case 'c':
        options.validate = true;
        break;
      case 'T': {
        const auto datatype = parse_datatype(arg);
        if (!datatype) {
          throw UsageError("-T: unknown datatype '" + std::string(arg) + "' (" +
                           all_datatype_names() + ")");
        }
        // The patterns the benchmark fills and checks are typed in C++.
        if (!has_element_type(*datatype))
          throw UsageError("-T " + std::string(arg) + ": not supported by the benchmark");
        options.workload.datatype = *datatype;
        break;
      }
      case 'r': {
        const size_t root = parse_count(arg, "-r");
        if (root > 1u << 30) throw UsageError("-r: root out of range");
        options.workload.root = static_cast<int>(root);
        root_given = true;
        break;
      }
      case 'o': {
        const auto op = parse_op(arg);
        if (!op) {
          throw UsageError("-o: unknown operator '" + std::string(arg) + "' (" + all_op_names() +
                           ")");
        }
        options.workload.op = *op;
        op_given = true;
        break;
      }
      case 'b':
        options.collectives = parse_collectives(arg);
        break;
      case kCsv:
        options.csv_path = arg;
        break;
      case kJson:
        options.json_path = arg;
        break;
      case kRounds:
        if (!side_by_side) {
          throw UsageError("--rounds applies to coll_bench_mpi only");
        }
        options.rounds = parse_count(arg, "--rounds");
        if (options.rounds == 0) {
          throw UsageError("--rounds: must be at least 1");
        }
        break;
      case kSync:
        if (!side_by_side) {
          throw UsageError("--sync applies to coll_bench_mpi only");
        }
        if (arg != "mpi" && arg != "own") {
          throw UsageError("--sync: '" + std::string(arg) + "' is not mpi or own");
        }
        options.sync = arg;
        break;
      case kSyncStart:
        options.sync_start = true;
        break;
      case kRotateRoot:
        options.rotate_root = true;
        break;
      case kAllocMem:
        options.alloc_mem = true;
        break;
      case 'h':
        options.help = true;
        break;
      case ':':
        throw UsageError(std::string("option ") + argv[optind - 1] + " needs an argument");
      default:
        throw UsageError(std::string("unknown option ") + argv[optind - 1]);
    }
  }
  if (optind < argc) {
    throw UsageError(std::string("unexpected argument '") + argv[optind] + "'");
  }
  if (is_loc(options.workload.op)) {
    throw UsageError(std::string("-o ") + op_name(options.workload.op) +
                     " takes a value-index pair datatype, which the benchmark does not run");
  }
  if (integers_only(options.workload.op) && is_floating(options.workload.datatype)) {
    throw UsageError(std::string("-o ") + op_name(options.workload.op) +
                     " takes an integer datatype, not " + datatype_name(options.workload.datatype));
  }
  // Silently ignoring an option would mislead the reader of the results:
  // it must apply to one of the collectives run (and is ignored by the
  // others, as a list of collectives asks for).
  const auto runs_any = [&](bool (*applies)(Collective)) {
    return std::any_of(options.collectives.begin(), options.collectives.end(), applies);
  };
  if (root_given && !runs_any(takes_root)) {
    throw UsageError("-r applies to the rooted collectives (" + names_of(takes_root) +
                     "), which -b leaves out");
  }
  if (op_given && !runs_any(takes_op)) {
    throw UsageError("-o applies to the reductions (" + names_of(takes_op) +
                     "), which -b leaves out");
  }
  return options;
}

std::string usage(const char* program, bool side_by_side) {
  std::string text = std::string("Usage: ") + program + " [options]\n";
  if (side_by_side) {
    text +=
        "Times Open MPI and libcoll on the same buffers, alternating in "
        "rounds.\n"
        "Launch: mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl "
        "self,vader " +
        std::string(program) + "\n";
  } else {
    text += "Launch: collrun -np 4 " + std::string(program) + "\n";
  }
  text +=
      "  -m [MIN:]MAX   message sizes in bytes, doubling from MIN (default "
      "4:1048576)\n"
      "  -i ITER        timed iterations per size (default 1000; sizes above "
      "8192 B run ITER/10)\n"
      "  -x WARMUP      untimed iterations per size (default 100; above 8192 "
      "B: WARMUP/10)\n"
      "  -f             full: also Min/Max Latency(us) and Iterations\n"
      "  -c             validate every result; exit 1 if any is wrong\n"
      "  -T TYPE        datatype: " +
      all_datatype_names() +
      " (default float)\n"
      "  -o OP          operator of " +
      names_of(takes_op) + ": " + all_op_names() +
      " (default sum)\n"
      "  -r ROOT        root of " +
      names_of(takes_root) +
      " (default 0)\n"
      "  -b LIST        collectives, comma-separated, or all: " +
      all_collective_names() +
      " (default allreduce,bcast)\n"
      "  --csv FILE     also write the results as CSV\n"
      "  --json FILE    also write the results as JSON\n"
      "  --sync-start   also: each iteration started at one instant agreed on the\n"
      "                 ranks' clock, the latest rank's finish (SyncMax column)\n"
      "  --rotate-root  rooted collectives: iteration i's root is (ROOT + i) mod np\n"
      "  --alloc-mem    buffers from MPI_Alloc_mem (coll_bench_mpi) or coll_mem_alloc\n";
  if (side_by_side) {
    text +=
        "  --rounds N     alternate the libraries N times per size, ITER "
        "split over them (default 4)\n"
        "  --sync WHOSE   barrier before each timed collective: mpi (MPI_Barrier "
        "for both libraries, default) or own (each library its own)\n";
  }
  text += "  -h, --help     this text\n";
  return text;
}

}  // namespace bench
