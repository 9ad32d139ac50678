#!/bin/sh
# Runs a job that must fail: a non-zero exit status and an output line that
# matches PATTERN (an extended regular expression), within LIMIT seconds.
# usage: expect_abort.sh LIMIT PATTERN -- COMMAND ARGS...
set -u
limit=$1
pattern=$2
shift 3
output=$(mktemp "${TMPDIR:-/tmp}/coll-abort-XXXXXX")
trap 'rm -f "$output"' EXIT
echo "expect_abort: $*"
timeout --kill-after=10 "$limit" "$@" > "$output" 2>&1
status=$?
cat "$output"
if [ "$status" -eq 0 ]; then
  echo "expect_abort: FAIL: the job succeeded" >&2
  exit 1
fi
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "expect_abort: FAIL: the job did not end within $limit s" >&2
  exit 1
fi
if ! grep -qE -- "$pattern" "$output"; then
  echo "expect_abort: FAIL: no output line matches '$pattern'" >&2
  exit 1
fi
echo "expect_abort: ok: status $status"
