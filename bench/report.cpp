#include "report.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
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

std::string fixed2(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", value);
  return text;
}

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

std::vector<Record> flatten(const RunInfo& info, const std::vector<CollectiveResults>& results) {
  std::vector<Record> records;
  for (const CollectiveResults& collective : results) {
    const bool allreduce = collective.collective == Collective::allreduce;
    for (const SizeResult& size : collective.sizes) {
      for (const LibraryResult& library : size.libraries) {
        const bool libcoll = library.library == "libcoll";
        records.push_back({
            {"collective", text(collective_name(collective.collective))},
            {"library", text(library.library)},
            {"np", integer(info.ranks)},
            {"datatype", text(datatype_name(info.workload.datatype))},
            {"op", optional_text(allreduce, op_name(info.workload.op))},
            {"root", allreduce ? Value(Null{}) : integer(info.workload.root)},
            {"size_bytes", integer(static_cast<long long>(size.bytes))},
            {"count", integer(static_cast<long long>(size.count))},
            {"iterations", integer(static_cast<long long>(size.iterations))},
            {"avg_us", Value(library.latency.avg_us)},
            {"min_us", Value(library.latency.min_us)},
            {"max_us", Value(library.latency.max_us)},
            {"algbw_gbs", Value(library.algbw_gbs)},
            {"busbw_gbs", Value(library.busbw_gbs)},
            {"algorithm", optional_text(!library.algorithm.empty(), library.algorithm)},
            {"validation", optional_text(library.valid.has_value(),
                                         library.valid && *library.valid ? "pass" : "fail")},
            {"transport", optional_text(libcoll, info.transport)},
            {"bootstrap", optional_text(libcoll, info.bootstrap)},
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
  if (info.full) {
    for (size_t i = 0; i < libraries.size(); ++i) {
      add_column(label(i, "Min Latency(us)", "Min(us)"), latency(i, &LatencyStats::min_us));
      add_column(label(i, "Max Latency(us)", "Max(us)"), latency(i, &LatencyStats::max_us));
    }
    add_column("Iterations",
               [](const SizeResult& result) { return std::to_string(result.iterations); });
  }
  if (alone) {
    add_column("Algbw(GB/s)",
               [](const SizeResult& result) { return fixed2(result.libraries.at(0).algbw_gbs); });
  }
  for (size_t i = 0; i < libraries.size(); ++i) {
    add_column(label(i, "Busbw(GB/s)", "Busbw(GB/s)"),
               [i](const SizeResult& result) { return fixed2(result.libraries.at(i).busbw_gbs); });
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
  if (info.validate) {
    add_column("Validation",
               [](const SizeResult& result) { return std::string(pass_fail(all_valid(result))); });
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
  std::fprintf(out_, "# np %d, transport %s, bootstrap %s, datatype %s", info_.ranks,
               info_.transport.c_str(), info_.bootstrap.c_str(),
               datatype_name(info_.workload.datatype));
  if (collective_ == Collective::allreduce) {
    std::fprintf(out_, ", op %s", op_name(info_.workload.op));
  } else {
    std::fprintf(out_, ", root %d", info_.workload.root);
  }
  if (!alone) {
    std::fprintf(out_, ", %zu alternating rounds", info_.rounds);
  }
  std::fprintf(out_, "\n%-*s", kSizeWidth, "# Size");
  for (const Column& column : columns_) {
    std::fprintf(out_, "%*s", column.width, column.header.c_str());
  }
  std::fprintf(out_, "\n");
  std::fflush(out_);
}

void TablePrinter::print_row(const SizeResult& result) const {
  std::fprintf(out_, "%-*zu", kSizeWidth, result.bytes);
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
      text += (i ? "," : "") + std::string(records.front()[i].first);
    }
    text += "\n";
  }
  for (const Record& record : records) {
    for (size_t i = 0; i < record.size(); ++i) {
      text += (i ? "," : "") + csv_field(record[i].second);
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
      {"validate", Value(info.validate)},
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
