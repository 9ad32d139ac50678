#!/bin/sh
# flood.sh COLLRUN HARDENING_TEST CONNECTIONS: a job of 2 ranks whose rank 0
# opens CONNECTIONS connections to collrun's rendezvous port, each sending a
# frame no rank sends first (hardening_test.c, mode flood). collrun refuses
# every one, but prints at most a few lines about them and then one line
# with the count of the rest ("N more refused connections not shown"): the
# lines shown plus those counted must be the connections, the lines shown
# few, and the job must succeed.
set -u
collrun=$1 program=$2 connections=$3
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$collrun" -np 2 --timeout 120 "$program" flood "$connections" 2>"$log"; then
  cat "$log" >&2
  echo "flood.sh: the job failed" >&2
  exit 1
fi
shown=$(grep -c '^collrun: a new connection sent a frame of type 99' "$log")
summaries=$(grep -c '^collrun: [0-9]* more refused connections not shown' "$log")
counted=$(sed -n 's/^collrun: \([0-9]*\) more refused connections not shown.*/\1/p' "$log" |
          awk '{ n += $1 } END { print n + 0 }')
lines=$(wc -l <"$log")
echo "flood.sh: $connections connections: $shown lines shown, $counted counted in $summaries" \
     "summary lines; collrun's stderr: $lines lines"
sed -n '1,40p' "$log"
status=0
if [ $((shown + counted)) -ne "$connections" ]; then
  echo "flood.sh: $shown shown + $counted counted != $connections connections" >&2
  status=1
fi
# 10 lines per 10 s, plus a summary per interval: a flood that spans a few
# intervals on a busy machine still stays far below one line a connection.
if [ "$shown" -gt 40 ] || [ "$summaries" -lt 1 ] || [ "$lines" -gt 60 ]; then
  echo "flood.sh: expected at most 40 lines about the connections and a summary" >&2
  status=1
fi
exit $status
