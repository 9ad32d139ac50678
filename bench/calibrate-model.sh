#!/usr/bin/env bash
# bench/calibrate-model.sh [BUILD_DIR [OUT_DIR]]: fits the cost model's
# shared-memory parameters (alpha_intra, beta_intra, gamma:
# algorithms/cost_model.hpp) to this machine. Runs coll_bench at np 2 and 4
# with each algorithm of allreduce, allgather and barrier forced in turn
# (COLL_<NAME>_ALGO; one job forces one algorithm of each), 4 B - 4 MiB,
# and fits by least squares on the relative error (coll_model --fit) to
# the np 2 rows: a core per rank, as the model assumes; the np 4 rows (two
# ranks per core on a 2-core machine) are the out-of-sample check of
# tests/unit/cost_model_test.cpp. Not bcast, reduce, gather or scatter:
# coll_bench's latency is the mean over ranks after a barrier that lets
# rank 0 go first, so a root that only writes finishes at once and its
# receivers find the data already there; the model's latency is the last
# rank's completion from a common start, which the exchanges (every rank
# waits for the others) come close to. (--sync-start measures that, but on
# a loaded 2-core machine most of its rounds start late.)
# Writes OUT_DIR/model-calibration-DATE.csv (coll_bench's CSV rows, every
# job's) and OUT_DIR/model-params-DATE.txt. About a minute on 2 cores; the
# machine's load shows in the numbers: run it when it is quiet.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-bench/results}
date=$(date +%F)
iters=${CALIBRATE_ITERS:-1000}
collrun=$build/libcoll/launcher/collrun
bench=$build/bench/coll_bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

allreduce=(recursive_doubling ring rabenseifner binomial tree)
allgather=(ring bruck ring bruck ring)
barrier=(tree dissemination tree dissemination tree)
for np in 2 4; do
  for i in 0 1 2 3 4; do
    # Barrier and allgather have two algorithms: measured in jobs 0 and 1 only.
    list=allreduce
    [ "$i" -lt 2 ] && list=$list,allgather,barrier
    "$collrun" -np "$np" \
      -x COLL_ALLREDUCE_ALGO="${allreduce[$i]}" \
      -x COLL_ALLGATHER_ALGO="${allgather[$i]}" -x COLL_BARRIER_ALGO="${barrier[$i]}" \
      "$bench" -b "$list" -m 4:4194304 -i "$iters" -x $((iters / 10)) \
      --csv "$tmp/np$np-$i.csv" >/dev/null
  done
done
mkdir -p "$out"
csv=$out/model-calibration-$date.csv
params=$out/model-params-$date.txt
head -1 "$tmp/np2-0.csv" >"$csv"
for f in "$tmp"/np*.csv; do tail -n +2 "$f"; done >>"$csv"
"$build/bench/coll_model" --fit "$csv" --fit-np 2 --out "$params"
echo "wrote $csv and $params" >&2
