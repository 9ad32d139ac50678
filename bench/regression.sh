#!/usr/bin/env bash
# One libcoll build against another (a change against main): runs
# coll_bench_mpi of build OLD and build NEW alternately under mpirun, for
# every rank count, REPEATS times, and prints per collective and size the
# median libcoll latency of NEW / OLD, and the same ratio normalized by the
# Open MPI latency measured in the same run (NEW's libcoll/MPI over OLD's
# libcoll/MPI), which cancels the machine's state between runs. Both builds
# time their collectives the same way (the same benchmark, the same
# barrier algorithm, the same buffers); below 1 NEW is faster.
#
#   bench/regression.sh --old DIR --new DIR [--np "2 4"] [--repeats N]
#                       [--sizes MIN:MAX] [--out DIR] [--new-args "ARGS"]
#                       [-- coll_bench_mpi options]
# --new-args: options for NEW only (an older coll_bench_mpi may lack one, e.g.
# --sync own, which keeps the timing of builds before --sync existed).
set -euo pipefail

old=
new=build
rank_counts="2 4"
repeats=5
sizes=4:4194304
out=bench-regression
extra=()
new_args=

usage() { sed -n '2,15s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "regression.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --old) old=$2; shift 2 ;;
    --new) new=$2; shift 2 ;;
    --np) rank_counts=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --new-args) new_args=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[[ -n $old ]] || die "--old DIR is required"
for b in "$old" "$new"; do
  [[ -x $b/bench/coll_bench_mpi ]] || die "no $b/bench/coll_bench_mpi"
done

mkdir -p "$out/raw"
rm -f "$out"/raw/*.csv
for ((repeat = 1; repeat <= repeats; repeat++)); do
  for np in $rank_counts; do
    # Alternate which build goes first, so that neither always meets the
    # machine in the same state.
    if ((repeat % 2)); then order="old new"; else order="new old"; fi
    for which in $order; do
      dir=$old
      args=()
      if [[ $which == new ]]; then
        dir=$new
        read -r -a args <<< "$new_args"
      fi
      echo "regression.sh: run $repeat/$repeats, np $np, $which" >&2
      mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl self,vader \
        "$dir/bench/coll_bench_mpi" -m "$sizes" --csv "$out/raw/$which-np$np-run$repeat.csv" \
        "${args[@]}" "${extra[@]}" > /dev/null || die "coll_bench_mpi ($which) failed at np $np"
    done
  done
done

# build,collective,np,size,library,avg_us rows, then medians.
for f in "$out"/raw/*.csv; do
  which=$(basename "$f" | cut -d- -f1)
  awk -F, -v w="$which" 'NR > 1 { print w "," $1 "," $3 "," $7 "," $2 "," $10 }' "$f"
done > "$out/all.csv"

awk -F, '
  function median(key,   n, i, j, t, v) {
    n = split(samples[key], v, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  { key = $1 "," $2 "," $3 "," $4 "," $5; samples[key] = samples[key] " " $6; rows[$2 "," $3 "," $4] = 1 }
  END {
    print "| collective | np | size | old libcoll (us) | new libcoll (us) | new/old | new/old, normalized by MPI |"
    print "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
    for (r in rows) {
      split(r, k, ",")
      o = median("old," r ",libcoll"); n = median("new," r ",libcoll")
      om = median("old," r ",mpi"); nm = median("new," r ",mpi")
      printf "| %s | %s | %s | %.2f | %.2f | %.3f | %.3f |\n", k[1], k[2], k[3], o, n, n / o, (n / nm) / (o / om)
    }
  }' "$out/all.csv" | { read -r h1; read -r h2; echo "$h1"; echo "$h2"; sort -t'|' -k2,2 -k3,3n -k4,4n; } \
  | tee "$out/summary.md"
