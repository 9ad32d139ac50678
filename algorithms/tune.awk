# Part of algorithms/tune.sh: reads the coll_bench CSVs of a sweep, named
# <collective>-np<N>-<algorithm or auto>-round<R>.csv, writes the tuning
# table to the file `table` and prints the median latencies as markdown.
# POSIX awk (mawk or gawk), after bench/median.awk (median, sort_numbers).

# The bytes libcoll's selection is keyed by (Args::select_bytes,
# algorithms/algorithms.hpp) for a coll_bench row: its size, except for the
# reduce_scatters, whose size is the whole vector (OSU's) but whose key is
# one rank's block. Rules must be written in the key, or they would apply
# at other sizes than measured.
function select_bytes(coll, np, size, elements) {
  if (coll == "reduce_scatter") return int(size / np)
  if (coll == "reduce_scatter_block") return elements > 0 ? int(elements / np) * (size / elements) : 0
  return size
}

function add_once(list, item) {
  return index(" " list " ", " " item " ") ? list : (list == "" ? item : list " " item)
}

BEGIN { FS = "," }

FNR == 1 {
  for (i = 1; i <= NF; i++) column[$i] = i
  if (!("avg_us" in column) || !("size_bytes" in column) || !("count" in column) ||
      !("algorithm" in column)) {
    print "tune.awk: " FILENAME " is not coll_bench CSV" > "/dev/stderr"
    failed = 1
    exit 1
  }
  name = FILENAME
  sub(/.*\//, "", name)
  if (split(name, part, "-") != 4) {
    print "tune.awk: " FILENAME ": not <collective>-np<N>-<algorithm>-round<R>.csv" > "/dev/stderr"
    failed = 1
    exit 1
  }
  coll = part[1]
  np = substr(part[2], 3)
  label = part[3]
  next
}

{
  # Rows whose keys coincide (reduce_scatter_block below np elements: 0)
  # are one size to the selection, and pooled.
  size = select_bytes(coll, np, $column["size_bytes"], $column["count"])
  key = coll SUBSEP np SUBSEP size SUBSEP label
  count[key]++
  sample[key, count[key]] = $column["avg_us"]
  if (label == "auto") chosen[coll, np, size] = $column["algorithm"]
  colls = add_once(colls, coll)
  nps[coll] = add_once(nps[coll], np)
  sizes[coll, np] = add_once(sizes[coll, np], size)
  if (label != "auto") labels[coll] = add_once(labels[coll], label)
}

END {
  if (failed) exit 1
  print "# libcoll tuning table, written by algorithms/tune.sh" > table
  print "# collective  ranks  min_bytes  algorithm" > table
  nc = split(colls, clist, " ")
  for (c = 1; c <= nc; c++) {
    coll = clist[c]
    nl = split(labels[coll], llist, " ")
    header = "| np | bytes |"
    rule = "| --- | --- |"
    for (l = 1; l <= nl; l++) { header = header " " llist[l] " |"; rule = rule " --- |" }
    print ""
    print "## " coll " (median us)"
    print ""
    print header " auto | auto/best |"
    print rule " --- | --- |"
    nn = split(nps[coll], nlist, " ")
    for (p = 1; p <= nn; p++) {
      np = nlist[p]
      ns = split(sizes[coll, np], slist, " ")
      # Ascending sizes (they come in order from one run, but be sure).
      sort_numbers(slist, ns)
      current = ""
      for (s = 1; s <= ns; s++) {
        size = slist[s]
        split("", med)
        line = "| " np " | " size " |"
        best = ""
        for (l = 1; l <= nl; l++) {
          key = coll SUBSEP np SUBSEP size SUBSEP llist[l]
          if (!(key in count)) { line = line " - |"; continue }
          for (k = 1; k <= count[key]; k++) v[k] = sample[key, k]
          med[llist[l]] = median(v, count[key])
          line = line sprintf(" %.2f |", med[llist[l]])
          if (best == "" || med[llist[l]] < med[best]) best = llist[l]
        }
        if (best == "") continue
        key = coll SUBSEP np SUBSEP size SUBSEP "auto"
        if (key in count) {
          for (k = 1; k <= count[key]; k++) v[k] = sample[key, k]
          a = median(v, count[key])
          line = line sprintf(" %.2f (%s) | %.2f |", a, chosen[coll, np, size], a / med[best])
        } else {
          line = line " - | - |"
        }
        print line
        # Keep the current winner while it is within keep percent.
        if (current != "" && (current in med) && med[current] <= med[best] * (1 + keep / 100))
          continue
        if (best != current) {
          printf "%-13s %-6s %-10s %s\n", coll, np, (current == "" ? 0 : size), best > table
          current = best
        }
      }
    }
  }
}
