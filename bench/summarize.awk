# Medians over repeated runs of `coll_bench_mpi --csv`: reads the CSV of
# every run (one file per run) and prints one CSV row per collective, rank
# count and size with the median libcoll and Open MPI latency and bus
# bandwidth, the median of the per-run ratio libcoll/MPI, the median memcpy
# bandwidth of the machine and the median of each library's per-run bus
# bandwidth / memcpy fraction (allreduce). Columns are found by name, so the
# order of coll_bench's CSV columns does not matter; a field that a run left
# empty (barrier's bandwidth, bcast's memcpy) stays empty in the summary.
# POSIX awk (mawk or gawk), after median.awk:
#   awk -f bench/median.awk -f bench/summarize.awk RUN.csv...

# Records value as the next sample of field for key, unless it is empty.
function add(field, key, value) {
  if (value == "") return
  sample[field, key, ++samples[field, key]] = value + 0
}

# The median of field's samples for key, printed with format; "" if none.
function summary_of(field, key, format,    n, k, values) {
  n = samples[field, key] + 0
  if (n == 0) return ""
  for (k = 1; k <= n; k++) values[k] = sample[field, key, k]
  return sprintf(format, median(values, n))
}

# $name, or "" when this file has no such column (CSV of an older build).
function field_of(name) { return (name in column) ? $column[name] : "" }

# The median synchronized-start ratio, where at least half of the n runs
# gave one (both libraries' starts valid); else "". Beside a busy process
# most runs have too many late starts, and the median of the one or two
# left is the state of those runs, not the size's: in a busy np 2
# comparison of seven runs (session 14) the one valid run of allreduce
# 32 KiB gave 147 (libcoll 3.1 ms in that run, 5-19 us in the six others).
function sync_summary(key, n) {
  return 2 * samples["sync_ratio", key] >= n ? summary_of("sync_ratio", key, "%.3f") : ""
}

BEGIN { FS = ","; OFS = "," }

FNR == 1 {
  split("", column)  # forget the previous file's header
  for (i = 1; i <= NF; i++) column[$i] = i
  if (!("library" in column) || !("avg_us" in column)) {
    print "summarize.awk: " FILENAME " is not coll_bench CSV" > "/dev/stderr"
    failed = 1
    exit 1
  }
  next
}

{
  key = $column["collective"] OFS $column["np"] OFS $column["size_bytes"]
  library = $column["library"]
  avg[FILENAME, key, library] = $column["avg_us"]
  busbw[FILENAME, key, library] = field_of("busbw_gbs")
  memcpy[FILENAME, key] = field_of("memcpy_gbs")  # the same in both records
  # The synchronized-start figure, when the run took it and it was valid
  # (a quarter or fewer of its iterations late).
  late = field_of("sync_late")
  sync[FILENAME, key, library] = (late != "" && late + 0 <= 0.25) ? field_of("sync_max_us") : ""
  if (!(key in runs)) { runs[key] = 0; order[++keys] = key }
  # A run counts once both libraries have reported this size.
  if ((FILENAME, key, "libcoll") in avg && (FILENAME, key, "mpi") in avg &&
      !((FILENAME, key) in counted)) {
    counted[FILENAME, key] = 1
    runs[key]++
    libcoll = avg[FILENAME, key, "libcoll"]
    mpi = avg[FILENAME, key, "mpi"]
    add("libcoll", key, libcoll)
    add("mpi", key, mpi)
    add("ratio", key, mpi > 0 ? libcoll / mpi : 0)
    add("libcoll_busbw", key, busbw[FILENAME, key, "libcoll"])
    add("mpi_busbw", key, busbw[FILENAME, key, "mpi"])
    libcoll_sync = sync[FILENAME, key, "libcoll"]
    mpi_sync = sync[FILENAME, key, "mpi"]
    add("libcoll_sync", key, libcoll_sync)
    add("mpi_sync", key, mpi_sync)
    if (libcoll_sync != "" && mpi_sync != "" && mpi_sync + 0 > 0)
      add("sync_ratio", key, libcoll_sync / mpi_sync)
    copy = memcpy[FILENAME, key]
    if (copy != "" && copy + 0 > 0) {
      add("memcpy", key, copy)
      if (busbw[FILENAME, key, "libcoll"] != "") {
        add("libcoll_fraction", key, busbw[FILENAME, key, "libcoll"] / copy)
      }
      if (busbw[FILENAME, key, "mpi"] != "") {
        add("mpi_fraction", key, busbw[FILENAME, key, "mpi"] / copy)
      }
    }
  }
}

END {
  if (failed) exit 1
  # New columns go at the end: compare.sh and plot.sh read them by position.
  print "collective,np,size_bytes,runs,libcoll_avg_us,mpi_avg_us,ratio," \
        "libcoll_busbw_gbs,mpi_busbw_gbs,memcpy_gbs,libcoll_busbw_memcpy," \
        "mpi_busbw_memcpy,libcoll_sync_max_us,mpi_sync_max_us,sync_ratio"
  for (k = 1; k <= keys; k++) {
    key = order[k]
    n = runs[key]
    if (n == 0) continue
    print key, n, summary_of("libcoll", key, "%.3f"), summary_of("mpi", key, "%.3f"),
          summary_of("ratio", key, "%.3f"), summary_of("libcoll_busbw", key, "%.4f"),
          summary_of("mpi_busbw", key, "%.4f"), summary_of("memcpy", key, "%.4f"),
          summary_of("libcoll_fraction", key, "%.4f"),
          summary_of("mpi_fraction", key, "%.4f"),
          summary_of("libcoll_sync", key, "%.3f"), summary_of("mpi_sync", key, "%.3f"),
          sync_summary(key, n)
  }
}
