# Medians over repeated runs of `coll_bench_mpi --csv`: reads the CSV of
# every run (one file per run) and prints one CSV row per collective, rank
# count and size with the median libcoll and Open MPI latency and bus
# bandwidth and the median of the per-run ratio libcoll/MPI. Columns are
# found by name, so the order of coll_bench's CSV columns does not matter.
# POSIX awk (mawk or gawk).

function median(values, n,    i, j, x) {
  for (i = 2; i <= n; i++) {  # insertion sort: n is the number of runs
    x = values[i]
    for (j = i - 1; j >= 1 && values[j] > x; j--) values[j + 1] = values[j]
    values[j + 1] = x
  }
  return n % 2 ? values[(n + 1) / 2] : (values[n / 2] + values[n / 2 + 1]) / 2
}

function summary_of(field, key, n,    k, values) {
  for (k = 1; k <= n; k++) values[k] = sample[field, key, k]
  return median(values, n)
}

BEGIN { FS = ","; OFS = "," }

FNR == 1 {
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
  busbw[FILENAME, key, library] = $column["busbw_gbs"]
  if (!(key in runs)) { runs[key] = 0; order[++keys] = key }
  # A run counts once both libraries have reported this size.
  if ((FILENAME, key, "libcoll") in avg && (FILENAME, key, "mpi") in avg &&
      !((FILENAME, key) in counted)) {
    counted[FILENAME, key] = 1
    n = ++runs[key]
    libcoll = avg[FILENAME, key, "libcoll"]
    mpi = avg[FILENAME, key, "mpi"]
    sample["libcoll", key, n] = libcoll
    sample["mpi", key, n] = mpi
    sample["ratio", key, n] = mpi > 0 ? libcoll / mpi : 0
    sample["libcoll_busbw", key, n] = busbw[FILENAME, key, "libcoll"]
    sample["mpi_busbw", key, n] = busbw[FILENAME, key, "mpi"]
  }
}

END {
  if (failed) exit 1
  print "collective,np,size_bytes,runs,libcoll_avg_us,mpi_avg_us,ratio," \
        "libcoll_busbw_gbs,mpi_busbw_gbs"
  for (k = 1; k <= keys; k++) {
    key = order[k]
    n = runs[key]
    if (n == 0) continue
    printf "%s,%d,%.3f,%.3f,%.3f,%.4f,%.4f\n", key, n,
           summary_of("libcoll", key, n), summary_of("mpi", key, n),
           summary_of("ratio", key, n), summary_of("libcoll_busbw", key, n),
           summary_of("mpi_busbw", key, n)
  }
}
