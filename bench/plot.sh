#!/usr/bin/env bash
# Latency and bus bandwidth against message size, libcoll beside Open MPI,
# from the summary that bench/compare.sh writes: one row of two panels per
# collective, one pair of lines per rank count; with more summaries of
# other peers (compare.sh's summary-PEER.csv), their lines too, named by
# PEER (MPICH for mpich). Needs gnuplot (Debian: gnuplot-nox).
#
#   bench/plot.sh [SUMMARY_CSV [OUT_PNG [PEER_SUMMARY_CSV...]]]
#       (default bench-results/summary.csv, and compare.png beside it)
set -euo pipefail

summary=${1:-bench-results/summary.csv}
png=${2:-$(dirname "$summary")/compare.png}
peer_summaries=("${@:3}")

die() { echo "plot.sh: $*" >&2; exit 1; }
command -v gnuplot > /dev/null || die "gnuplot not found (Debian: apt-get install gnuplot-nox)"
[[ -r $summary ]] || die "no $summary: run bench/compare.sh first"
for file in "$summary" "${peer_summaries[@]}"; do
  [[ -r $file && $(head -1 "$file") == collective,np,size_bytes,runs,libcoll_avg_us,mpi_avg_us,* ]] ||
    die "$file is not a summary from bench/compare.sh"
done
# The other peers' curves: "PEER" from summary-PEER.csv, named as the
# library it is (mpich: MPICH; else an Open MPI configuration), a dash and
# point type of its own, only at the rank counts it has (compare.sh leaves
# MPICH out where the ranks outnumber the cores), coloured by rank count as
# the first summary's. Set after rank_counts below.
peer_curves() {
  local file peer label nps np n kind=2
  for file in "${peer_summaries[@]}"; do
    peer=$(basename "$file" .csv)
    peer=${peer#summary-}
    kind=$((kind + 1))
    if [[ $peer == mpich ]]; then label="MPICH"; else label="Open MPI $peer"; fi
    nps=$(tail -n +2 "$file" | cut -d, -f2 | sort -nu | tr '\n' ' ')
    for np in $nps; do
      n=1
      for count in $rank_counts; do [[ $count == "$np" ]] && break; n=$((n + 1)); done
      printf ', "%s" skip 1 using 3:(pick(name, %s, column(mpi))) with linespoints lt %s dt %s pt %s title "%s np %s"' \
        "$file" "$np" "$n" "$kind" "$((2 * kind))" "$label" "$np"
    done
  done
}

# A barrier has no size (its rows say 0) and no bandwidth: not plotted
# against size; its medians are in the summary.
collectives=$(tail -n +2 "$summary" | cut -d, -f1 | grep -vx barrier | sort -u | tr '\n' ' ' || true)
rank_counts=$(tail -n +2 "$summary" | cut -d, -f2 | sort -nu | tr '\n' ' ')
peer_curves=$(peer_curves)
[[ -n $collectives ]] || die "$summary has no rows with a message size to plot"
rows=$(wc -w <<< "$collectives")
terminal=pngcairo
gnuplot -e 'set terminal pngcairo' 2> /dev/null || terminal=png

gnuplot <<GNUPLOT
set terminal $terminal size 1400,$((450 * rows))
set output "$png"
set datafile separator ","
set key top left
set grid
set logscale x 2
set format x "%.0b%BB"  # binary prefixes: 4B, 64kiB, 4MiB
set xlabel "message size"
collectives = "$collectives"
rank_counts = "$rank_counts"
# Columns of summary.csv: 1 collective, 2 np, 3 size_bytes, 5 libcoll_avg_us,
# 6 mpi_avg_us, 8 libcoll_busbw_gbs, 9 mpi_busbw_gbs (10 and after: memcpy,
# not drawn). Rows of other groups become NaN and are not drawn.
pick(c, np, value) = (strcol(1) eq c && \$2 == np) ? value : NaN
# One panel's curves (plot @both): columns libcoll and mpi of the collective
# name against size, libcoll solid and Open MPI dashed, a colour per rank count.
both = 'for [n = 1:words(rank_counts)] "$summary" skip 1 \
          using 3:(pick(name, word(rank_counts, n) + 0, column(libcoll))) \
          with linespoints lt n dt 1 pt 7 title "libcoll np ".word(rank_counts, n), \
        for [n = 1:words(rank_counts)] "$summary" skip 1 \
          using 3:(pick(name, word(rank_counts, n) + 0, column(mpi))) \
          with linespoints lt n dt 2 pt 6 title "Open MPI np ".word(rank_counts, n)$peer_curves'
set multiplot layout words(collectives), 2
do for [c = 1:words(collectives)] {
  name = word(collectives, c)
  set title name . ": latency (lower is better)"
  set ylabel "latency (us)"
  set logscale y
  libcoll = 5; mpi = 6
  plot @both
  set title name . ": bus bandwidth (higher is better)"
  set ylabel "bus bandwidth (GB/s)"
  unset logscale y
  libcoll = 8; mpi = 9
  plot @both
}
unset multiplot
GNUPLOT
echo "plot.sh: wrote $png" >&2
