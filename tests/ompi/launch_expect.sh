#!/bin/sh
# Runs a job through a launcher (mpirun, srun) and checks, besides its exit
# status, that libcoll bootstrapped every rank the way it should: with
# COLL_BOOTSTRAP_DEBUG=1 each rank's coll_init prints
#   "libcoll: bootstrap NAME: rank R of N, job id ..."
# and every R in 0..N-1 must appear with the expected NAME, no other
# bootstrap at all.
#
# usage: launch_expect.sh [--ranks N] [--bootstrap NAME] [--timeout S]
#                         [--expect ERE]... -- LAUNCHER ARGS...
#   --expect  an extended regular expression that some output line must
#             match (e.g. GoogleTest's "PASSED" line); may repeat.
#   --timeout bound on the whole job (default 240 s): the launcher gets
#             SIGTERM, then SIGKILL 10 s later.
set -eu

ranks=1
bootstrap=pmix
limit=240
expects=""
while [ $# -gt 0 ]; do
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --bootstrap) bootstrap=$2; shift 2 ;;
    --timeout) limit=$2; shift 2 ;;
    # One pattern a line, so that patterns may hold spaces.
    --expect) expects="$expects$2
"; shift 2 ;;
    --) shift; break ;;
    *) echo "launch_expect: unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -gt 0 ] || { echo "launch_expect: no command" >&2; exit 2; }

# The bootstrap must be chosen on its own merit: not through collrun
# variables inherited from whatever ran this test.
unset COLL_BOOTSTRAP COLL_RANK COLL_SIZE COLL_LOCAL_RANK COLL_LOCAL_SIZE COLL_JOBID
COLL_BOOTSTRAP_DEBUG=1
export COLL_BOOTSTRAP_DEBUG

output=$(mktemp "${TMPDIR:-/tmp}/coll-launch-XXXXXX")
trap 'rm -f "$output"' EXIT

echo "launch_expect: $*"
# timeout puts itself in a process group of its own, where a signal to
# this script's group (meson's timeout) does not reach: pass it on.
timeout --kill-after=10 "$limit" "$@" > "$output" 2>&1 &
job=$!
trap 'kill -TERM "$job" 2> /dev/null; exit 1' INT TERM
set +e
wait "$job"
status=$?
set -e
trap - INT TERM
cat "$output"

failed=0
fail() {
  echo "launch_expect: FAIL: $*" >&2
  failed=1
}

if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  fail "the job did not end within $limit s (status $status)"
elif [ "$status" -ne 0 ]; then
  fail "the job exited with status $status"
fi

rank=0
while [ "$rank" -lt "$ranks" ]; do
  if ! grep -qF "libcoll: bootstrap $bootstrap: rank $rank of $ranks, " "$output"; then
    fail "no line 'libcoll: bootstrap $bootstrap: rank $rank of $ranks' (rank $rank bootstrapped otherwise, or not at all)"
  fi
  rank=$((rank + 1))
done
others=$(grep "libcoll: bootstrap " "$output" | grep -vF "libcoll: bootstrap $bootstrap: " || true)
[ -z "$others" ] || fail "a rank chose another bootstrap: $others"

if [ -n "$expects" ]; then
  # Read from a here-document, not a pipe: fail must set failed in this shell.
  while IFS= read -r pattern; do
    [ -n "$pattern" ] || continue
    grep -qE -- "$pattern" "$output" || fail "no output line matches '$pattern'"
  done << EOF
$expects
EOF
fi

if [ "$failed" -ne 0 ]; then
  exit 1
fi
echo "launch_expect: ok: $ranks ranks, bootstrap $bootstrap"
