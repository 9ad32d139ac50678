#!/usr/bin/env bash
# Tuning mode: writes a tuning table (the format of algorithms/selection.hpp,
# read through COLL_TUNING_FILE) from a sweep of coll_bench on this machine.
# For every rank count and collective it runs every algorithm forced in turn,
# and the automatic choice, ROUNDS times (the algorithms alternating within
# each round, so that a slow spell of the machine hits all of them); per
# message size the algorithm with the least median latency wins, except that
# the winner of the size below is kept while it is within KEEP percent (fewer
# switches on noise). Prints the medians as a markdown table, with the
# automatic choice's ratio to the best forced algorithm.
#
#   algorithms/tune.sh [--build DIR] [--np "2 4"] [--rounds N] [--sizes MIN:MAX]
#                      [--collectives LIST] [--keep PCT] [--out FILE]
#                      [--raw DIR] [-- coll_bench options]
#
# Defaults: build, "2 4", 5 rounds, 4:4194304, allreduce,bcast, 3 percent,
# tuning.txt; raw CSVs in a temporary directory unless --raw. LIST: any of
# the collectives below, or all; not gatherv, scatterv, alltoallv, which
# libcoll selects without a size. Then:
#   COLL_TUNING_FILE=tuning.txt collrun -np 4 ./app
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build
rank_counts="2 4"
rounds=5
sizes=4:4194304
collectives=allreduce,bcast
keep=3
out=tuning.txt
raw=
extra=()
# The names registered in algorithms/registry.cpp, per collective. Not
# here: gatherv and scatterv (one algorithm) and alltoallv, whose selection
# key is 0 (no rank knows the others' counts), so no rule by size applies.
declare -A algos=(
  [allreduce]="ring tree binomial recursive_doubling rabenseifner"
  [bcast]="ring binomial tree scatter_allgather linear"
  [barrier]="tree dissemination"
  [reduce]="binomial reduce_scatter_gather"
  [allgather]="ring bruck"
  [allgatherv]="ring bruck"
  [reduce_scatter_block]="ring recursive_halving"
  [reduce_scatter]="ring recursive_halving"
  [gather]="binomial linear"
  [scatter]="binomial linear"
  [alltoall]="pairwise bruck linear"
  [scan]="recursive_doubling linear"
  [exscan]="recursive_doubling linear"
)
all_collectives="allreduce bcast barrier reduce allgather allgatherv reduce_scatter_block
  reduce_scatter gather scatter alltoall scan exscan"

usage() { sed -n '2,19s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "tune.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) rank_counts=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --collectives) collectives=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --raw) raw=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

bench=$build/bench/coll_bench
collrun=$build/libcoll/launcher/collrun
[[ -x $bench ]] || die "no $bench: configure with -Dbench=true and build"
[[ -x $collrun ]] || die "no $collrun: build first"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds: '$rounds' is not a positive integer"
[[ $keep =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--keep: '$keep' is not a percentage"
for np in $rank_counts; do
  [[ $np =~ ^[1-9][0-9]*$ ]] || die "--np: '$np' is not a rank count"
done
[[ $collectives == all ]] && collectives=$(echo $all_collectives | tr ' ' ,)
for coll in ${collectives//,/ }; do
  [[ -n ${algos[$coll]:-} ]] ||
    die "--collectives: '$coll' is not one of: $(echo $all_collectives), all"
done

if [[ -z $raw ]]; then
  raw=$(mktemp -d)
  trap 'rm -rf "$raw"' EXIT
fi
mkdir -p "$raw"
rm -f "$raw"/*.csv

# The automatic choice is measured as the library would make it here: with
# the compiled-in table, or with COLL_TUNING_FILE when that is set.
# COLL_<NAME>_ALGO, the knob that forces an algorithm of the collective.
knob_of() { echo "COLL_${1^^}_ALGO"; }
for coll in $all_collectives; do unset "$(knob_of "$coll")"; done
for ((round = 1; round <= rounds; round++)); do
  for np in $rank_counts; do
    for coll in ${collectives//,/ }; do
      knob=$(knob_of "$coll")
      echo "tune.sh: round $round/$rounds, np $np, $coll" >&2
      for algo in ${algos[$coll]} auto; do
        csv=$raw/$coll-np$np-$algo-round$round.csv
        env "$knob=$algo" "$collrun" -np "$np" "$bench" -b "$coll" -m "$sizes" \
          --csv "$csv" "${extra[@]}" > "$raw/last.txt" 2>&1 ||
          die "coll_bench failed: $knob=$algo, np $np (output: $raw/last.txt)"
      done
    done
  done
done

awk -v keep="$keep" -v table="$out" -f "$here/../bench/median.awk" -f "$here/tune.awk" \
  "$raw"/*.csv
echo "tune.sh: wrote $out" >&2
