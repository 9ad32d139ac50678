# The table of bench/shim-compare.sh from its runs' CSVs (coll_bench_mpi
# --csv; one folder per contender: DIR/CONTENDER/npN-runR.csv): per
# collective, rank count and size, each contender's median of the MPI
# column, the median of libcoll's native column in the "shim" runs, and
# for every shim contender (shim, and shim-new where shim-compare.sh ran
# one) its ratio to the best peer: per peer (the contenders whose name
# does not begin with "shim": Open MPI's) the median over the repeats of
# its run / the peer's run of the same repeat, the best peer being the one
# with the highest median (as compare.sh takes it), with the least and
# greatest of those ratios (the spread). "best peer" names the shim's.
# Prints the markdown table; writes the CSV to `summary`.
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
# The ratios of shim contender c at key over the repeats, against peer
# (each repeat's run of c / the same repeat's run of peer): their median
# in ratio_med, least in ratio_lo, greatest in ratio_hi; the count returned.
function ratios_against(c, peer, key,    j, r, nr, ratios) {
  nr = 0
  for (j = 1; j <= nruns; j++) {
    r = runs[j]
    if ((c, key, r) in us && (peer, key, r) in us && us[peer, key, r] + 0 > 0)
      ratios[++nr] = us[c, key, r] / us[peer, key, r]
  }
  if (nr) { ratio_med = median(ratios, nr); ratio_lo = ratios[1]; ratio_hi = ratios[nr] }
  return nr
}
# The same against the best peer for c: the one against which c's median
# ratio is highest (compare.sh's rule: the peer that is fastest as c sees
# it, each ratio taken within a repeat), named in ratio_peer.
function ratios_of(c, key,    i, nr, best_nr, med, lo, hi) {
  best_nr = 0; ratio_peer = ""
  for (i = 1; i <= nc; i++) {
    if (cs[i] ~ /^shim/) continue
    nr = ratios_against(c, cs[i], key)
    if (nr && (best_nr == 0 || ratio_med > med)) {
      best_nr = nr; med = ratio_med; lo = ratio_lo; hi = ratio_hi; ratio_peer = cs[i]
    }
  }
  ratio_med = med; ratio_lo = lo; ratio_hi = hi
  return best_nr
}
END {
  nc = split(contenders, cs, " ")
  header = "| collective | np | size (B) |"
  rule = "| --- | ---: | ---: |"
  csv = "collective,np,size_bytes"
  for (i = 1; i <= nc; i++) { header = header " " cs[i] " (us) |"; rule = rule " ---: |"; csv = csv "," cs[i] "_us" }
  header = header " native libcoll (us) | best peer |"; rule = rule " ---: | --- |"
  csv = csv ",native_us,best_peer"
  for (i = 1; i <= nc; i++) if (cs[i] ~ /^shim/) {
    header = header " " cs[i] "/best | spread |"; rule = rule " ---: | --- |"
    csv = csv "," cs[i] "_ratio," cs[i] "_ratio_min," cs[i] "_ratio_max"
  }
  print header " runs |"
  print rule " ---: |"
  print csv ",runs" > summary
  for (k = 1; k <= keys; k++) {
    key = order[k]
    split(key, f, SUBSEP)
    line = "| " f[1] " | " f[2] " | " (f[1] == "barrier" ? "-" : f[3]) " |"
    row = f[1] "," f[2] "," f[3]
    best = ""; best_us = ""
    for (i = 1; i <= nc; i++) {
      m = med_of(cs[i], key)
      line = line " " (m == "" ? "-" : sprintf("%.2f", m)) " |"
      row = row "," m
    }
    best = ratios_of("shim", key) ? ratio_peer : ""
    nn = natives[key] + 0
    split("", v); for (j = 1; j <= nn; j++) v[j] = native[key, j]
    nat = nn ? median(v, nn) : ""
    line = line " " (nat == "" ? "-" : sprintf("%.2f", nat)) " | " best " |"
    row = row "," nat "," best
    nr = 0
    for (i = 1; i <= nc; i++) if (cs[i] ~ /^shim/) {
      nr = ratios_of(cs[i], key)
      if (nr) {
        line = line sprintf(" %.2f | %.2f-%.2f |", ratio_med, ratio_lo, ratio_hi)
        row = row sprintf(",%.3f,%.3f,%.3f", ratio_med, ratio_lo, ratio_hi)
      } else {
        line = line " - | - |"; row = row ",,,"
      }
    }
    print line " " nr " |"
    print row "," nr > summary
  }
}
