// What rank 0 prints and writes: one OSU-style table per collective, and
// the same results as CSV or JSON for scripts (compare.sh, plot.sh).
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "collective.hpp"
#include "measure.hpp"

namespace bench {

struct RunInfo {
  int ranks = 0;
  std::string transport;    // libcoll's
  std::string bootstrap;    // libcoll's
  std::string mpi_version;  // "" unless side by side with MPI
  Workload workload;
  size_t rounds = 1;
  std::string sync;  // side by side: "mpi" or "own" (Options::sync); "" alone
  bool full = false;
  bool validate = false;
  bool sync_start = false;  // SyncMax columns (measure.hpp)
  bool rotate_root = false;  // rooted collectives' root moves per iteration
};

struct CollectiveResults {
  Collective collective;
  std::vector<SizeResult> sizes;
};

// Prints one collective's table, a row as soon as its size is measured.
class TablePrinter {
 public:
  // libraries: Runner::library() of each result, in order.
  TablePrinter(std::FILE* out, const RunInfo& info, Collective collective,
               const std::vector<std::string>& libraries);

  void print_header() const;
  void print_row(const SizeResult& result) const;

 private:
  struct Column {
    std::string header;
    int width;
    std::function<std::string(const SizeResult&)> value;
  };
  // A column at least min_width wide (and never narrower than OSU's 18).
  void add_column(std::string header, std::function<std::string(const SizeResult&)> value,
                  int min_width = 0);

  std::FILE* out_;
  const RunInfo& info_;
  Collective collective_;
  std::vector<Column> columns_;
};

// One record per collective, size and library. Throw std::runtime_error
// when the file cannot be written.
void write_csv(const std::string& path, const RunInfo& info,
               const std::vector<CollectiveResults>& results);
void write_json(const std::string& path, const RunInfo& info,
                const std::vector<CollectiveResults>& results);

}  // namespace bench
