# Sourced by the benchmark scripts (compare.sh, knob_ab.sh): the busy node
# of issue 17, N competing CPU-bound processes, and its end.
#
# Why a process group: stress-ng's parent forks its workers, and a SIGTERM
# to the parent alone has left a worker ("stress-ng-cpu [run]") spinning
# after the script ended (seen twice in session 14 after np 4 runs: the
# parent a zombie, the worker running), so that every "quiet" run after it
# was in fact busy. The competitors therefore start in a session of their
# own (setsid) and the whole group is stopped, SIGKILL after 5 s, and a
# quiet run refuses to start while such a process is still running.
#
#   busy_start N    start N competitors (stress-ng --cpu N, else shell loops)
#   busy_stop       stop them all; safe to call twice (e.g. from an EXIT trap)
#   busy_check_quiet  fail (return 1, saying what runs) if a competitor of an
#                   earlier run is still there

busy_pgid=""

busy_start() {
  local n=$1
  ((n > 0)) || return 0
  local idfile
  idfile=$(mktemp /tmp/coll-busy.XXXXXX)
  # The session's first process writes its pid, which is the session's id
  # (setsid may or may not fork before it, depending on job control).
  # shellcheck disable=SC2016
  setsid sh -c 'echo $$ > "$1"; shift
    if command -v stress-ng > /dev/null; then exec stress-ng --cpu "$1" --quiet; fi
    i=0; while [ "$i" -lt "$1" ]; do (while :; do :; done) & i=$((i + 1)); done; wait' \
    coll-busy-loop "$idfile" "$n" > /dev/null 2>&1 < /dev/null &
  local i
  for ((i = 0; i < 50; i++)); do
    busy_pgid=$(cat "$idfile")
    [[ -n $busy_pgid ]] && break
    sleep 0.1
  done
  rm -f "$idfile"
  [[ -n $busy_pgid ]] || { echo "busy.sh: the competitors did not start" >&2; return 1; }
}

busy_stop() {
  [[ -n $busy_pgid ]] || return 0
  kill -TERM -- "-$busy_pgid" 2> /dev/null || true
  local i
  for ((i = 0; i < 50; i++)); do
    pgrep -s "$busy_pgid" > /dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$busy_pgid" 2> /dev/null || true
  busy_pgid=""
}

# stress-ng by its name, the shell loops by their arguments (sh -c ...
# coll-busy-loop IDFILE N).
busy_check_quiet() {
  local left
  left=$( (pgrep -a 'stress-ng'; pgrep -af 'coll-busy-loop /tmp/coll-busy[.]') | grep -v defunct || true)
  if [[ -n $left ]]; then
    echo "a competing process of an earlier run is still running (a quiet run would be busy):" >&2
    echo "$left" >&2
    return 1
  fi
}
