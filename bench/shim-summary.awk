# The table of bench/shim-compare.sh from its runs' CSVs (coll_bench_mpi
# --csv; one folder per contender: DIR/CONTENDER/npN-runR.csv): per
# collective, rank count and size, each contender's median of the MPI
# column, the median of libcoll's native column in the shim runs, the best
# peer (the least median among the contenders other than shim) and the
# median, least and greatest over the repeats of shim / the faster peer of
# that repeat. Prints the markdown table; writes the CSV to `summary`.
# POSIX awk, after median.awk:
#   awk -F, -f bench/median.awk -f bench/shim-summary.awk \
#       -v contenders="shim tuned han" -v summary=OUT.csv DIR/*/*.csv
FNR == 1 {
  split("", column)
  for (i = 1; i <= NF; i++) column[$i] = i
  n = split(FILENAME, parts, "/")
  contender = parts[n - 1]
  run = parts[n]; sub(/^.*-run/, "", run); sub(/[.]csv$/, "", run)
  next
}
{
  size = $column["collective"] == "barrier" ? 0 : $column["size_bytes"]
  key = $column["collective"] SUBSEP $column["np"] SUBSEP size
  if (!(key in seen)) { seen[key] = 1; order[++keys] = key }
  if (!(run in run_seen)) { run_seen[run] = 1; runs[++nruns] = run }
  if ($column["library"] == "mpi") us[contender, key, run] = $column["avg_us"]
  else if (contender == "shim") native[key, ++natives[key]] = $column["avg_us"]
}
function med_of(c, key,    k, m, v) {
  m = 0
  for (k = 1; k <= nruns; k++) if ((c, key, runs[k]) in us) v[++m] = us[c, key, runs[k]]
  return m ? median(v, m) : ""
}
END {
  nc = split(contenders, cs, " ")
  header = "| collective | np | size (B) |"
  rule = "| --- | ---: | ---: |"
  csv = "collective,np,size_bytes"
  for (i = 1; i <= nc; i++) { header = header " " cs[i] " (us) |"; rule = rule " ---: |"; csv = csv "," cs[i] "_us" }
  print header " native libcoll (us) | best peer | shim/best | spread | runs |"
  print rule " ---: | --- | ---: | --- | ---: |"
  print csv ",native_us,best_peer,ratio,ratio_min,ratio_max,runs" > summary
  for (k = 1; k <= keys; k++) {
    key = order[k]
    split(key, f, SUBSEP)
    line = "| " f[1] " | " f[2] " | " (f[1] == "barrier" ? "-" : f[3]) " |"
    row = f[1] "," f[2] "," f[3]
    best = ""; best_us = ""
    for (i = 1; i <= nc; i++) {
      m = med_of(cs[i], key); med[cs[i]] = m
      line = line " " (m == "" ? "-" : sprintf("%.2f", m)) " |"
      row = row "," m
      if (cs[i] != "shim" && m != "" && (best == "" || m + 0 < best_us + 0)) { best = cs[i]; best_us = m }
    }
    nn = natives[key] + 0
    split("", v); for (j = 1; j <= nn; j++) v[j] = native[key, j]
    nat = nn ? median(v, nn) : ""
    # Per repeat: shim / the faster peer of that repeat.
    split("", ratios); nr = 0
    for (j = 1; j <= nruns; j++) {
      r = runs[j]
      if (!(("shim", key, r) in us)) continue
      peer = ""
      for (i = 1; i <= nc; i++)
        if (cs[i] != "shim" && (cs[i], key, r) in us && (peer == "" || us[cs[i], key, r] + 0 < peer + 0))
          peer = us[cs[i], key, r]
      if (peer != "" && peer + 0 > 0) ratios[++nr] = us["shim", key, r] / peer
    }
    if (nr) {
      ratio = median(ratios, nr)  # sorts ratios
      line = line sprintf(" %s | %s | %.2f | %.2f-%.2f | %d |", nat == "" ? "-" : sprintf("%.2f", nat), best, ratio, ratios[1], ratios[nr], nr)
      row = row sprintf(",%s,%s,%.3f,%.3f,%.3f,%d", nat, best, ratio, ratios[1], ratios[nr], nr)
    } else {
      line = line " - | " best " | - | - | 0 |"
      row = row "," nat "," best ",,,,0"
    }
    print line
    print row > summary
  }
}
