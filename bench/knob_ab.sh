#!/usr/bin/env bash
# bench/knob_ab.sh NAME=VAR=VALUE[ VAR=VALUE...] ...: libcoll's knobs against
# each other, each run beside Open MPI tuned in the same job (coll_bench_mpi,
# MPI_Barrier for both, rotating root), the variants alternating within each
# repeat; prints per variant, collective and size the ratio libcoll / Open
# MPI of every repeat (OSU average). NAME=none runs with no knob set.
#   NP=4 REPS=3 SIZES=262144:4194304 COLLS=allreduce,bcast BUSY=1 ITERS=200
# (ITERS: coll_bench_mpi -i, a tenth of it above 8 KiB)
# BUSY=1 (the default) runs one stress-ng --cpu 1 beside every run: the
# busy node of issue 17 (bench/busy.sh); BUSY=0 refuses to run while a
# competitor of an earlier run is still there. Example (the slot size at
# np 4 beside a busy process):
#   bench/knob_ab.sh def=none slot128k=COLL_SLOT_SIZE=128K
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
out=$(mktemp -d /tmp/coll-knob-ab.XXXXXX)
source bench/busy.sh
trap 'busy_stop; rm -rf "$out"' EXIT
if [ "${BUSY:-1}" = 1 ]; then
  busy_start 1 || exit 1
else
  busy_check_quiet || exit 1
fi
for r in $(seq "${REPS:-3}"); do
  for v in "$@"; do
    name=${v%%=*}
    xs=()
    for e in ${v#*=}; do [ "$e" = none ] || xs+=(-x "$e"); done
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np "${NP:-4}" --mca btl self,vader \
      "${xs[@]}" "$build/bench/coll_bench_mpi" -m "${SIZES:-262144:4194304}" \
      -i "${ITERS:-200}" --rotate-root -b "${COLLS:-allreduce,bcast}" --csv "$out/$name-$r.csv" \
      > /dev/null 2>&1 ||
      echo "run $name $r failed"
  done
done
for v in "$@"; do
  name=${v%%=*}
  cat "$out/$name"-*.csv | awk -F, -v n="$name" '
    $1 != "collective" { k = $1 " " $7
      if ($2 == "libcoll") L[k, ++nl[k]] = $10; else O[k, ++no[k]] = $10 }
    END { for (k in nl) { s = ""
            for (i = 1; i <= nl[k]; i++) s = s sprintf(" %.2f", L[k, i] / O[k, i])
            print n, k, s } }' | sort -k2,2 -k3n
done
