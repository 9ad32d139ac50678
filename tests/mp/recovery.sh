#!/usr/bin/env bash
# The kill matrix of fault recovery (issue 33), under collrun
# --enable-recovery: tests/mp/recovery_test.c's survivors revoke, shrink,
# agree and run exact collectives on the shrunk communicator and a split
# of it.
#   tests/mp/recovery.sh COLLRUN RECOVERY_TEST [TRANSPORT]
# Rows: np 4 and 5 x a victim at rank 0 (the root of the first rooted
# call), a middle rank and the last x killed at the start of an iteration
# (before the call) and, by COLL_FAULT_INJECT, after its first messages of
# a call (inside it) x allreduce, bcast, allgather, alltoall, reduce and
# barrier; then two victims at once, a death during the shrink, and a
# SIGSTOPped peer (the launcher kills it when it does not join the
# survivors' round within COLL_TIMEOUT); and ranks that finalize early
# (clean leaves), which coll_comm_get_failed must not list. Each job must exit 0 (every
# survivor recovered), print one "recovered" line per survivor, and leave
# no coll-* entry in /dev/shm. Prints a table (runs, recovered, failed,
# hangs: jobs that the launcher's --timeout ended) and the median and worst
# time a survivor took from the failure to its error (detection), from the
# survivors' "after=" figures.
set -uo pipefail
collrun=$1
prog=$2
transport=${3:-shm}
runs=0 recovered=0 failed=0 hangs=0
log=$(mktemp)
times=$(mktemp)
trap 'rm -f "$log" "$times"' EXIT

job() {  # job KIND NP SURVIVORS [collrun options] -- program arguments
  local kind=$1 np=$2 survivors=$3
  shift 3
  local opts=()
  while [[ $1 != -- ]]; do opts+=("$1"); shift; done
  shift
  runs=$((runs + 1))
  "$collrun" -np "$np" --enable-recovery --timeout 60 -x COLL_TRANSPORT="$transport" \
    -x COLL_TIMEOUT=5 "${opts[@]}" "$prog" "$@" > "$log" 2>&1 &
  local pid=$!
  wait "$pid"
  local rc=$? got
  got=$(grep -c "recovered, $survivors ranks" "$log")
  if ((rc == 0 && got == survivors)); then
    recovered=$((recovered + 1))
    # Detection: only where the victim was killed before the call (at the
    # start of an iteration), so that the call's time is the time to notice.
    [[ $kind == kill ]] && sed -n 's/.*the failed call took \([0-9.]*\) ms/\1/p' "$log" >> "$times"
  else
    grep -q "job timed out" "$log" && hangs=$((hangs + 1))
    failed=$((failed + 1))
    echo "FAILED (rc $rc, $got of $survivors recovered): np $np ${opts[*]} $*"
    sed 's/^/    /' "$log"
  fi
  # The job's segments are named after collrun's pid (coll-<pid>x...).
  local left
  left=$(ls /dev/shm 2> /dev/null | grep "^coll-${pid}x" || true)
  if [[ -n $left ]]; then
    echo "LEAK: /dev/shm after np $np $*: $left"
    failed=$((failed + 1))
  fi
}

for np in 4 5; do
  for victim in 0 2 $((np - 1)); do
    for c in allreduce bcast allgather alltoall reduce barrier; do
      job kill "$np" $((np - 1)) -- "$c" "$victim" 3
      # Inside the call: after the victim's first two messages of its
      # call 4 (or at the next message after, where the call sends fewer).
      job inside "$np" $((np - 1)) -x COLL_FAULT_INJECT=rank=$victim,call=4,after_sends=2 -- \
        "$c" "$victim" -1
    done
  done
done
job two 5 3 -- allreduce 1,3 4              # two at once
job late 5 3 -- bcast 4 2 1                  # rank 1 dies during the shrink
job late 5 2 -- allgather 0,4 3 2            # two, and one during the shrink
job stop 4 3 -- allreduce 2 -2               # a silent (stopped) peer
job leave 4 3 -- allreduce 3 -3              # the last rank finalizes early: not failed
job leave 5 3 -- allreduce 0,2 -3            # two, rank 0 among them

detection=$(sort -n "$times" | awk '{v[NR] = $1} END {
  if (NR) printf "%.2f | %.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR];
  else printf "- | -" }')
echo "| transport | runs | recovered | failed | hangs | detection median (ms) | worst (ms) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
echo "| $transport | $runs | $recovered | $failed | $hangs | $detection |"
((failed == 0))
