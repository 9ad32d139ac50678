#!/usr/bin/env bash
# libcoll against Open MPI, side by side: runs coll_bench_mpi under mpirun
# for every rank count, REPEATS times (the rank counts alternating within
# each repeat, the libraries alternating within each run), and prints the
# median latency ratio libcoll/MPI per collective and size as a markdown
# table, for allreduce also libcoll's bus bandwidth as a fraction of this
# machine's memcpy (other collectives with -- -b LIST, e.g. -- -b all; the
# collectives are taken from the CSV, whatever they are).
# Writes OUTDIR/raw/*.csv (every run), OUTDIR/summary.csv and
# OUTDIR/summary.md; with --plot also OUTDIR/compare.png (bench/plot.sh).
#
#   bench/compare.sh [--build DIR] [--np "2 4"] [--repeats N] [--sizes MIN:MAX]
#                    [--type TYPE] [--out DIR] [--plot] [-- coll_bench_mpi options]
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build
rank_counts="2 4"
repeats=5
sizes=4:4194304
datatype=float
out=bench-results
plot=0
extra=()

usage() { sed -n '2,14s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "compare.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) rank_counts=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --type) datatype=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --plot) plot=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

bench=$build/bench/coll_bench_mpi
[[ -x $bench ]] || die "no $bench: configure with Open MPI found (meson setup -Dmpi=enabled) and build"
command -v mpirun > /dev/null || die "mpirun not found (Debian: openmpi-bin)"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats: '$repeats' is not a positive integer"

mkdir -p "$out/raw"
rm -f "$out"/raw/*.csv "$out"/raw/*.txt
for ((repeat = 1; repeat <= repeats; repeat++)); do
  for np in $rank_counts; do
    run=$out/raw/np$np-run$repeat
    echo "compare.sh: run $repeat/$repeats, np $np" >&2
    # Root may run mpirun only with --allow-run-as-root; shared memory only
    # (btl self,vader), the transport libcoll uses on one node.
    mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl self,vader \
      "$bench" -m "$sizes" -T "$datatype" --csv "$run.csv" "${extra[@]}" \
      > "$run.txt" || die "coll_bench_mpi failed at np $np (output in $run.txt)"
  done
done

awk -f "$here/median.awk" -f "$here/summarize.awk" "$out"/raw/*.csv |
  { IFS= read -r header; echo "$header"; sort -t, -k1,1 -k2,2n -k3,3n; } \
  > "$out/summary.csv"

# The markdown table, to paste into a report. Columns of summary.csv: 1
# collective, 2 np, 3 size_bytes, 4 runs, 5 libcoll_avg_us, 6 mpi_avg_us,
# 7 ratio, 11 libcoll_busbw_memcpy (allreduce only). A barrier has no size.
awk -F, '
  NR == 1 {
    print "| collective | np | size (B) | libcoll (us) | Open MPI (us) | libcoll/MPI |" \
          " libcoll busbw/memcpy | runs |"
    print "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    next
  }
  {
    size = $1 == "barrier" ? "-" : $3
    fraction = $11 == "" ? "" : sprintf("%.3f", $11)
    printf "| %s | %s | %s | %.2f | %.2f | %.2f | %s | %s |\n", $1, $2, size, $5, $6, $7,
           fraction, $4
  }
' "$out/summary.csv" | tee "$out/summary.md"
echo "compare.sh: wrote $out/summary.csv, $out/summary.md and $out/raw/" >&2

if [[ $plot == 1 ]]; then
  "$here/plot.sh" "$out/summary.csv" "$out/compare.png"
fi
