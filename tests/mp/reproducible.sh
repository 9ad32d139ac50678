#!/usr/bin/env bash
# COLL_REPRODUCIBLE=order across runs (reproducible_test.c says what one
# run checks): the same result hashes with every allreduce algorithm forced,
# with small slots (more chunks), with the synchronous path off, over tcp,
# and with reduce / reduce_scatter algorithms forced; and, without the knob,
# hashes that differ between algorithms - the data is sensitive to the
# order, so a mode that did not fix it would fail here.
#
#   reproducible.sh [--quick] [--mode exact] COLLRUN PROGRAM NP COUNT
#   reproducible.sh [--quick] [--mode exact] --launcher "MPIRUN ARGS..." PROGRAM NP COUNT
# The second form runs PROGRAM under another launcher that takes -np N and
# -x VAR=VALUE as collrun does (Open MPI's mpirun, with the PMPI shim
# preloaded: tests/pmpi/pmpi_reproducible.c). --quick runs two of the
# configurations and not the runs without the knob: for sanitizer builds,
# where a run of the shim's program takes ~10 s and what is looked for is a
# memory error on these paths (the plain build runs the whole). --mode
# exact: the same with COLL_REPRODUCIBLE=exact (its sums run exact-sum's
# algorithms, the rest order's; tests/mp/exact_sum_check.py is its test
# across numbers of ranks).
set -euo pipefail
quick=0
mode=order
if [ "$1" = --quick ]; then
  quick=1
  shift
fi
if [ "$1" = --mode ]; then
  mode=$2
  shift 2
fi
if [ "$1" = --launcher ]; then
  read -r -a launcher <<< "$2"
  shift 2
else
  launcher=("$1" --timeout 120)
  shift
fi
prog=$1 np=$2 count=$3
run() {  # env assignments...; prints the hash lines
  "${launcher[@]}" -np "$np" $(printf -- '-x %s ' "$@") "$prog" "$count" | grep '^hash '
}
# Under a launcher other than collrun the program is an MPI one: libcoll
# must serve its calls (the shim loaded), or the test proves nothing.
if [ "${launcher[0]##*/}" != collrun ]; then
  served=$("${launcher[@]}" -np "$np" -x COLL_REPRODUCIBLE=$mode -x COLL_MPI_STATS=1 \
    "$prog" "$count" 2>&1 | grep -c '^libcoll_mpi: MPI_Allreduce: [1-9][0-9]* served' || true)
  [ "$served" -ge 1 ] || { echo "the shim served no MPI_Allreduce: not loaded?"; exit 1; }
fi
reference=$(run COLL_REPRODUCIBLE=$mode)
[ -n "$reference" ] || { echo "no hash lines"; exit 1; }
configs=(
  "COLL_ALLREDUCE_ALGO=ring"
  "COLL_ALLREDUCE_ALGO=rabenseifner"
  "COLL_ALLREDUCE_ALGO=tree"
  "COLL_SLOT_SIZE=4096"
  "COLL_FAST_PATH=0"
  "COLL_TRANSPORT=tcp"
  "COLL_REDUCE_ALGO=binomial COLL_REDUCE_SCATTER_BLOCK_ALGO=ring"
)
[ "$quick" = 0 ] || configs=("COLL_ALLREDUCE_ALGO=ring" "COLL_TRANSPORT=tcp")
for c in "${configs[@]}"; do
  # shellcheck disable=SC2086  # a config is several assignments
  got=$(run COLL_REPRODUCIBLE=$mode $c)
  if [ "$got" != "$reference" ]; then
    echo "COLL_REPRODUCIBLE=$mode with $c: other bits than the reference run"
    diff <(echo "$reference") <(echo "$got") || true
    exit 1
  fi
done
if [ "$quick" = 1 ]; then
  echo "reproducible.sh --quick ($mode): np $np, count $count: the same bits in ${#configs[@]} + 1 configurations"
  exit 0
fi
# Without the knob the algorithms disagree somewhere (np >= 3).
declare -A seen=()
for a in ring recursive_doubling rabenseifner tree; do
  seen["$(run COLL_ALLREDUCE_ALGO=$a | md5sum)"]=1
done
if [ "${#seen[@]}" -lt 2 ]; then
  echo "without COLL_REPRODUCIBLE every algorithm gave the same bits: the data does not test the order"
  exit 1
fi
echo "reproducible.sh ($mode): np $np, count $count: the same bits in ${#configs[@]} + 1 configurations; ${#seen[@]} different results of 4 algorithms without the knob"
