#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <utility>
#include <variant>

#include "datatypes.hpp"

namespace bench {
namespace {

// OSU's layout (osu_util.h): the size left-aligned in 10 characters, every
// other column right-aligned in 18, two decimals.
constexpr int kSizeWidth = 10;
constexpr int kFieldWidth = 18;
// Wide enough for the longest algorithm name ("recursive_doubling") and two
// spaces before it.
constexpr int kAlgorithmWidth = 21;

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string fixed2(double value) { return fixed(value, 2); }

// Busbw/Memcpy: a fraction, mostly well below 1 at small sizes, where two
// decimals would show 0.00.
constexpr int kFractionDecimals = 3;

const char* pass_fail(bool valid) { return valid ? "Pass" : "Fail"; }

std::string display_name(const std::string& library) { return library == "mpi" ? "MPI" : library; }

// --- records for CSV and JSON ---------------------------------------------

struct Null {};
using Value = std::variant<Null, std::string, double, long long, bool>;
using Record = std::vector<std::pair<const char*, Value>>;

// Explicit, so that a const char* can never become the bool alternative.
Value text(std::string value) { return Value(std::move(value)); }
Value integer(long long value) { return Value(value); }
Value optional_text(bool present, std::string value) {
  return present ? text(std::move(value)) : Value(Null{});
}

Value sync_number(const LibraryResult& library, double SyncStartStats::*field) {
  return library.sync_start ? Value((*library.sync_start).*field) : Value(Null{});
}

std::vector<Record> flatten(const RunInfo& info, const std::vector<CollectiveResults>& results) {
  std::vector<Record> records;
  for (const CollectiveResults& collective : results) {
    const bool reduces = takes_op(collective.collective);
    const bool rooted = takes_root(collective.collective);
    const bool sized = has_message(collective.collective);
    const auto sized_number = [sized](double value) {
      return sized ? Value(value) : Value(Null{});
    };
    for (const SizeResult& size : collective.sizes) {
      for (const LibraryResult& library : size.libraries) {
        const bool libcoll = library.library == "libcoll";
        records.push_back({
            {"collective", text(collective_name(collective.collective))},
            {"library", text(library.library)},
            {"np", integer(info.ranks)},
            {"datatype", optional_text(sized, datatype_name(info.workload.datatype))},
            {"op", optional_text(reduces, op_name(info.workload.op))},
            {"root", !rooted            ? Value(Null{})
                     : info.rotate_root ? text("rotating")
                                        : integer(info.workload.root)},
            {"size_bytes", integer(static_cast<long long>(size.bytes))},
            {"count", integer(static_cast<long long>(size.count))},
            {"iterations", integer(static_cast<long long>(size.iterations))},
            {"avg_us", Value(library.latency.avg_us)},
            {"min_us", Value(library.latency.min_us)},
            {"max_us", Value(library.latency.max_us)},
            {"algbw_gbs", sized_number(library.algbw_gbs)},
            {"busbw_gbs", sized_number(library.busbw_gbs)},
            {"memcpy_gbs", size.memcpy_gbs ? Value(*size.memcpy_gbs) : Value(Null{})},
            {"algorithm", optional_text(!library.algorithm.empty(), library.algorithm)},
            {"validation", optional_text(library.valid.has_value(),
                                         library.valid && *library.valid ? "pass" : "fail")},
            {"transport", optional_text(libcoll, info.transport)},
            {"bootstrap", optional_text(libcoll, info.bootstrap)},
            {"sync_max_us", sync_number(library, &SyncStartStats::max_us)},
            {"sync_late", sync_number(library, &SyncStartStats::late)},
            {"sync_window_us", sync_number(library, &SyncStartStats::window_us)},
        });
      }
    }
  }
  return records;
}

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.10g", value);
  return text;
}

std::string csv_field(const Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    if (text->find_first_of(",\"\n") == std::string::npos) return *text;
    std::string quoted = "\"";
    for (char c : *text) {
      if (c == '"') quoted += '"';
      quoted += c;
    }
    return quoted + "\"";
  }
  if (const auto* real = std::get_if<double>(&value)) return number(*real);
  if (const auto* whole = std::get_if<long long>(&value)) {
    return std::to_string(*whole);
  }
  if (const auto* flag = std::get_if<bool>(&value)) {
    return *flag ? "true" : "false";
  }
  return "";
}

std::string json_string(const std::string& text) {
  std::string quoted = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      quoted += '\\';
      quoted += static_cast<char>(c);
    } else if (c < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04x", c);
      quoted += escaped;
    } else {
      quoted += static_cast<char>(c);
    }
  }
  return quoted + "\"";
}

std::string json_value(const Value& value) {
  if (const auto* text = std::get_if<std::string>(&value)) {
    return json_string(*text);
  }
  if (std::holds_alternative<Null>(value)) return "null";
  return csv_field(value);
}

std::string json_object(const Record& record, const char* indent) {
  std::string object = "{";
  for (size_t i = 0; i < record.size(); ++i) {
    object += i ? ",\n" : "\n";
    object += std::string(indent) + "  " + json_string(record[i].first) + ": " +
              json_value(record[i].second);
  }
  return object + "\n" + indent + "}";
}

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

// Writes text to path, or throws naming the path and the reason.
void write_file(const std::string& path, const std::string& text) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "w"));
  if (!file) {
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
  const bool written = std::fwrite(text.data(), 1, text.size(), file.get()) == text.size();
  if (!written || std::fclose(file.release()) != 0) {
    throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
  }
}

}  // namespace

TablePrinter::TablePrinter(std::FILE* out, const RunInfo& info, Collective collective,
                           const std::vector<std::string>& libraries)
    : out_(out), info_(info), collective_(collective) {
  const bool alone = libraries.size() == 1;
  // OSU's column names when libcoll is measured alone; with a library
  // beside it, each latency column names its library.
  const auto label = [&](size_t library, const char* osu, const char* what) {
    return alone ? std::string(osu) : display_name(libraries[library]) + " " + what;
  };
  const auto latency = [](size_t library, double LatencyStats::*field) {
    return [library, field](const SizeResult& result) {
      return fixed2(result.libraries.at(library).latency.*field);
    };
  };

  for (size_t i = 0; i < libraries.size(); ++i) {
    add_column(label(i, "Avg Latency(us)", "Avg(us)"), latency(i, &LatencyStats::avg_us));
  }
  if (libraries.size() == 2) {
    add_column(display_name(libraries[0]) + "/" + display_name(libraries[1]),
               [](const SizeResult& result) {
                 const double denominator = result.libraries.at(1).latency.avg_us;
                 return denominator > 0
                            ? fixed2(result.libraries.at(0).latency.avg_us / denominator)
                            : std::string("-");
               });
  }
  if (info.sync_start) {
    const auto sync_max = [](const SizeResult& result, size_t library) -> std::optional<double> {
      const auto& figure = result.libraries.at(library).sync_start;
      // More than a quarter late even with the widest window: the ranks
      // could not start together (a busy node), and the figure says nothing.
      if (!figure || figure->late > 0.25) return std::nullopt;
      return figure->max_us;
    };
    for (size_t i = 0; i < libraries.size(); ++i) {
      add_column(label(i, "SyncMax Latency(us)", "SyncMax(us)"), [i, sync_max](const SizeResult& r) {
        const std::optional<double> value = sync_max(r, i);
        return value ? fixed2(*value) : std::string("-");
      });
    }
    if (libraries.size() == 2) {
      add_column("SyncMax " + display_name(libraries[0]) + "/" + display_name(libraries[1]),
                 [sync_max](const SizeResult& r) {
                   const std::optional<double> a = sync_max(r, 0), b = sync_max(r, 1);
                   return a && b && *b > 0 ? fixed2(*a / *b) : std::string("-");
                 });
    }
  }
  if (info.full) {
    for (size_t i = 0; i < libraries.size(); ++i) {
      add_column(label(i, "Min Latency(us)", "Min(us)"), latency(i, &LatencyStats::min_us));
      add_column(label(i, "Max Latency(us)", "Max(us)"), latency(i, &LatencyStats::max_us));
    }
    add_column("Iterations",
               [](const SizeResult& result) { return std::to_string(result.iterations); });
  }
  // A barrier moves no bytes: no bandwidth.
  if (alone && has_message(collective)) {
    add_column("Algbw(GB/s)",
               [](const SizeResult& result) { return fixed2(result.libraries.at(0).algbw_gbs); });
  }
  for (size_t i = 0; has_message(collective) && i < libraries.size(); ++i) {
    add_column(label(i, "Busbw(GB/s)", "Busbw(GB/s)"),
               [i](const SizeResult& result) { return fixed2(result.libraries.at(i).busbw_gbs); });
  }
  // The bus bandwidth against this machine's memcpy at the same size
  // (memcpy_probe.hpp). Named by library even alone: the fraction is the
  // library's, the memcpy the machine's.
  if (collective == Collective::allreduce) {
    add_column("Memcpy(GB/s)", [](const SizeResult& result) {
      return result.memcpy_gbs ? fixed2(*result.memcpy_gbs) : std::string("-");
    });
    for (size_t i = 0; i < libraries.size(); ++i) {
      add_column(display_name(libraries[i]) + " Busbw/Memcpy", [i](const SizeResult& result) {
        const std::optional<double> fraction = busbw_per_memcpy(result, i);
        return fraction ? fixed(*fraction, kFractionDecimals) : std::string("-");
      });
    }
  }
  add_column(
      "Algorithm",
      [](const SizeResult& result) {
        for (const LibraryResult& library : result.libraries) {
          if (!library.algorithm.empty()) return library.algorithm;
        }
        return std::string("-");
      },
      kAlgorithmWidth);
  if (info.validate && has_message(collective)) {  // a barrier has no result to check
    add_column("Validation",
               [](const SizeResult& result) { return std::string(pass_fail(all_valid(result))); });
  }
  if (!has_message(collective)) {  // room for the "# " that print_header puts before it
    Column& first = columns_.front();
    first.width = std::max(first.width, static_cast<int>(first.header.size()) + 3);
  }
}

void TablePrinter::add_column(std::string header,
                              std::function<std::string(const SizeResult&)> value,
                              int min_width) {
  // At least one space apart when a header is wider than OSU's field.
  const int width = std::max({kFieldWidth, min_width, static_cast<int>(header.size()) + 1});
  columns_.push_back({std::move(header), width, std::move(value)});
}

void TablePrinter::print_header() const {
  const bool alone = info_.mpi_version.empty();
  std::fprintf(out_, "# libcoll %s%s Latency Test\n",
               alone ? "" : ("vs " + info_.mpi_version + " ").c_str(),
               collective_title(collective_));
  std::fprintf(out_, "# np %d, transport %s, bootstrap %s", info_.ranks, info_.transport.c_str(),
               info_.bootstrap.c_str());
  if (has_message(collective_)) {
    std::fprintf(out_, ", datatype %s", datatype_name(info_.workload.datatype));
  }
  if (takes_op(collective_)) std::fprintf(out_, ", op %s", op_name(info_.workload.op));
  if (takes_root(collective_)) {
    if (info_.rotate_root) {
      std::fprintf(out_, ", root rotating from %d", info_.workload.root);
    } else {
      std::fprintf(out_, ", root %d", info_.workload.root);
    }
  }
  if (!alone) {
    std::fprintf(out_, ", %zu alternating rounds", info_.rounds);
    if (info_.sync == "mpi") std::fprintf(out_, ", MPI_Barrier for both");
    if (info_.sync == "own") std::fprintf(out_, ", each library's own barrier");
  }
  if (info_.sync_start) std::fprintf(out_, ", SyncMax: synchronized start, one clock");
  std::fprintf(out_, "\n");
  const bool sized = has_message(collective_);
  if (sized) std::fprintf(out_, "%-*s", kSizeWidth, "# Size");
  for (size_t i = 0; i < columns_.size(); ++i) {
    const Column& column = columns_[i];
    if (!sized && i == 0) {
      // osu_barrier's layout: no size column, the first header opens the
      // line with "# " (left-aligned, its number right-aligned below it).
      std::fprintf(out_, "%-*s", column.width, ("# " + column.header).c_str());
    } else {
      std::fprintf(out_, "%*s", column.width, column.header.c_str());
    }
  }
  std::fprintf(out_, "\n");
  std::fflush(out_);
}

void TablePrinter::print_row(const SizeResult& result) const {
  if (has_message(collective_)) std::fprintf(out_, "%-*zu", kSizeWidth, result.bytes);
  for (const Column& column : columns_) {
    std::fprintf(out_, "%*s", column.width, column.value(result).c_str());
  }
  std::fprintf(out_, "\n");
  std::fflush(out_);
}

void write_csv(const std::string& path, const RunInfo& info,
               const std::vector<CollectiveResults>& results) {
  const std::vector<Record> records = flatten(info, results);
  std::string text;
  if (!records.empty()) {
    for (size_t i = 0; i < records.front().size(); ++i) {
      // append(), not "," + std::string(...): GCC 12 at -O3 warns
      // (-Wrestrict, a false positive) inside that operator+.
      if (i) text += ',';
      text.append(records.front()[i].first);
    }
    text += "\n";
  }
  for (const Record& record : records) {
    for (size_t i = 0; i < record.size(); ++i) {
      if (i) text += ',';
      text.append(csv_field(record[i].second));
    }
    text += "\n";
  }
  write_file(path, text);
}

void write_json(const std::string& path, const RunInfo& info,
                const std::vector<CollectiveResults>& results) {
  const Record run = {
      {"benchmark", text("coll_bench")},
      {"np", integer(info.ranks)},
      {"transport", text(info.transport)},
      {"bootstrap", text(info.bootstrap)},
      {"mpi", optional_text(!info.mpi_version.empty(), info.mpi_version)},
      {"datatype", text(datatype_name(info.workload.datatype))},
      {"rounds", integer(static_cast<long long>(info.rounds))},
      {"sync", optional_text(!info.sync.empty(), info.sync)},
      {"validate", Value(info.validate)},
      {"sync_start", Value(info.sync_start)},
      {"rotate_root", Value(info.rotate_root)},
  };
  std::string text = "{\n  \"run\": " + json_object(run, "  ") + ",\n  \"results\": [";
  const std::vector<Record> records = flatten(info, results);
  for (size_t i = 0; i < records.size(); ++i) {
    text += (i ? ",\n    " : "\n    ") + json_object(records[i], "    ");
  }
  text += records.empty() ? "]\n}\n" : "\n  ]\n}\n";
  write_file(path, text);
}

}  // namespace bench
