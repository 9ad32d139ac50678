#!/usr/bin/env bash
# Runs COMMAND... (a collrun job of mem_alloc_test) with COLL_DEBUG=1 and
# checks, from the account every rank prints at finalize ("N messages
# received placed"), that at least MIN messages of the world communicator
# landed in place: with coll_mem_alloc'd receive buffers the ring bcast and
# allgather must place their chunks, not merely give the right bytes.
#
#   mem_alloc.sh MIN COMMAND [ARGS...]
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: mem_alloc.sh MIN COMMAND [ARGS...]" >&2; exit 2; }
min=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
COLL_DEBUG=1 "$@" 2> "$log" || status=$?
grep -v '^libcoll: ' "$log" >&2 || true
if [[ $status -ne 0 ]]; then
  echo "mem_alloc.sh: the job failed (status $status)" >&2
  exit "$status"
fi
# Summed over the ranks' communicators (the test uses only the world).
placed=$(grep -o '[0-9]* messages received placed' "$log" | awk '{ s += $1 } END { print s + 0 }')
echo "mem_alloc.sh: $placed messages received placed (at least $min wanted)"
if (( placed < min )); then
  echo "mem_alloc.sh: too few messages were placed" >&2
  grep 'messages received placed' "$log" >&2 || true
  exit 1
fi
