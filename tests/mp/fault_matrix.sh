#!/usr/bin/env bash
# The fault matrix (issue 15), a long run outside CI:
#   tests/mp/fault_matrix.sh [BUILD_DIR [TRIALS]]
# For kill -9, SIGSTOP and an early coll_finalize x shm and tcp x collrun
# and Open MPI's mpirun: TRIALS rounds over ten collectives, each a job of
# NP (4) ranks in which a random rank raises the signal (or finalizes and
# exits 0) at a random iteration (1-40) of the collective
# (tests/mp/fault_matrix.c), and counts
#   hangs        jobs that did not end within 90 s (COLL_TIMEOUT is 3 s);
#   wrong status a survivor that reported another status than PEER_LOST
#                (kill, finalize) or TIMEOUT/PEER_LOST (stop), or finished
#                without noticing, or a job that returned 0 (survivors that
#                the launcher ended before they noticed report nothing:
#                fine); finalize: a survivor that noticed only after 1 s;
#   wrong blame  kill: the launcher did not name the victim (collrun's
#                "rank V (...)", mpirun's "rank V with PID"; where Open MPI
#                names a survivor instead, the survivors' messages must
#                name it: counted apart below the table), or collrun named
#                another rank; stop: neither a survivor's message
#                ("from rank V") nor collrun ("rank V (...) is stopped")
#                names the victim; finalize: no survivor's message says
#                "rank V called coll_finalize", or one names another rank
#                so, or collrun named the victim as a failed rank;
#   leaks        coll-* entries in /dev/shm after the job that were not
#                there before.
# And one row more, "launcher": SIGKILL of collrun itself at a random
# moment (0-40 ms) of a job's start-up, NP_LAUNCHER (8) ranks, shm and tcp:
#   hangs        ranks of the job still running 10 s after collrun died;
#   leaks        segments of the job (coll-<collrun pid>x*) in /dev/shm
#                once its ranks are gone.
# FAULTS (kill stop finalize launcher), TRANSPORTS, LAUNCHERS pick rows
# (default: all). Prints a Markdown table; the jobs' output of every
# failure goes to $FAULT_MATRIX_LOG (default /tmp/fault-matrix.log). Run it
# alone: other jobs' segments would count as leaks (the launcher row counts
# only its own jobs').
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
trials=${2:-1}
np=${NP:-4}
collrun=$build/libcoll/launcher/collrun
# Absolute, so that what is killed after a hang is this build's ranks only.
prog=$(realpath "$build/tests/mp/mp_fault_matrix")
log=${FAULT_MATRIX_LOG:-/tmp/fault-matrix.log}
: > "$log"
colls="allreduce bcast barrier reduce allgather gather scatter alltoall reduce_scatter_block scan"
shm_count() { ls /dev/shm 2>/dev/null | grep -c '^coll-'; }

mpirun_named_survivor=0
echo "| fault | transport | launcher | jobs | hangs | wrong status | wrong blame | leaks |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
# The ranks of the job that collrun $1 started (their COLL_JOBID is
# "<collrun pid>x..."): pids.
job_ranks() { grep -lsa "COLL_JOBID=$1x" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3; }

# The launcher row: kill -9 of collrun during start-up.
launcher_row() {
  local transport=$1 jobs=0 hangs=0 leaks=0 t coll
  for ((t = 0; t < trials; ++t)); do
    for coll in $colls; do
      local delay=$((RANDOM % 41)) out pid left waited
      out=$(mktemp)
      "$collrun" -np "${NP_LAUNCHER:-8}" -x COLL_TRANSPORT="$transport" -x COLL_TIMEOUT=3 \
        "$prog" "$coll" -1 0 none >"$out" 2>&1 &
      pid=$!
      sleep "$(printf '0.%03d' "$delay")"
      kill -9 "$pid" 2>/dev/null
      wait "$pid" 2>/dev/null
      jobs=$((jobs + 1))
      why=""
      for ((waited = 0; waited < 100; ++waited)); do
        left=$(job_ranks "$pid")
        [ -z "$left" ] && break
        sleep 0.1
      done
      if [ -n "$left" ]; then
        hangs=$((hangs + 1))
        why="ranks still running: $(echo $left)"
        kill -9 $left 2>/dev/null
      fi
      if ls /dev/shm 2>/dev/null | grep -q "^coll-${pid}x"; then
        leaks=$((leaks + 1))
        why="$why leak: $(ls /dev/shm | grep "^coll-${pid}x" | tr '\n' ' ')"
      fi
      if [ -n "$why" ]; then
        printf '=== launcher %s %s killed at %d ms: %s\n%s\n' "$transport" "$coll" "$delay" \
          "$why" "$(cat "$out")" >> "$log"
      fi
      rm -f "$out"
    done
  done
  echo "| launcher | $transport | collrun | $jobs | $hangs | - | - | $leaks |"
}

for fault in ${FAULTS:-kill stop finalize launcher}; do
  if [ "$fault" = launcher ]; then
    for transport in ${TRANSPORTS:-shm tcp}; do launcher_row "$transport"; done
    continue
  fi
  for transport in ${TRANSPORTS:-shm tcp}; do
    for launcher in ${LAUNCHERS:-collrun mpirun}; do
      jobs=0 hangs=0 bad=0 blame=0 leaks=0
      for ((t = 0; t < trials; ++t)); do
        for coll in $colls; do
          victim=$((RANDOM % np))
          at=$((RANDOM % 40 + 1))
          before=$(shm_count)
          if [ "$launcher" = collrun ]; then
            cmd=("$collrun" -np "$np" --timeout 60 -x COLL_TRANSPORT="$transport"
                 -x COLL_TIMEOUT=3 "$prog" "$coll" "$victim" "$at" "$fault")
          else
            cmd=(mpirun --allow-run-as-root --oversubscribe -np "$np" -x COLL_TRANSPORT="$transport"
                 -x COLL_TIMEOUT=3 "$prog" "$coll" "$victim" "$at" "$fault")
          fi
          out=$(timeout -k 10 90 "${cmd[@]}" 2>&1)
          rc=$?
          jobs=$((jobs + 1))
          why=""
          if [ "$rc" = 124 ] || { [ "$rc" = 137 ] && ! grep -q "killed by signal\|exited on signal\|exited with status\|non-zero exit" <<<"$out"; }; then
            hangs=$((hangs + 1))
            why="hang"
            pkill -9 -f "^$prog " 2>/dev/null
          fi
          lines=$(grep -E "^fault-matrix rank [0-9]+: status=" <<<"$out")
          if [ "$fault" = kill ] || [ "$fault" = finalize ]; then
            wrong=$(grep -vE "status=4 " <<<"$lines" | grep -c . )
          else
            wrong=$(grep -vE "status=(3|4) " <<<"$lines" | grep -c . )
          fi
          # finalize: noticed within the second, not at COLL_TIMEOUT.
          if [ "$fault" = finalize ] && grep -qE "after=[0-9]{4,} ms" <<<"$lines"; then
            wrong=$((wrong + 1))
          fi
          if [ "$rc" = 0 ] || [ "$wrong" != 0 ] || grep -q "without noticing" <<<"$out"; then
            bad=$((bad + 1))
            why="$why status"
          fi
          named=1
          if [ "$fault" = kill ]; then
            if [ "$launcher" = collrun ]; then
              grep -q "^collrun: rank $victim (" <<<"$out" || named=0
              grep -E "^collrun: rank [0-9]+ \(" <<<"$out" | grep -vq "^collrun: rank $victim (" && named=0
            elif ! grep -q "rank $victim with PID" <<<"$out"; then
              # Open MPI names the first process it reaps: a survivor that
              # exited on the lost peer before it noticed the kill (its
              # printout, not ours; counted apart). Then the survivors'
              # messages must name the victim.
              grep -q "lost rank $victim \|rank $victim (pid [0-9]*) is gone" <<<"$lines" || named=0
              [ "$named" = 1 ] && mpirun_named_survivor=$((mpirun_named_survivor + 1))
            fi
          elif [ "$fault" = finalize ]; then
            grep -q "rank $victim called coll_finalize" <<<"$out" || named=0
            grep -E "rank [0-9]+ called coll_finalize" <<<"$out" |
              grep -vq "rank $victim called coll_finalize" && named=0
            grep -q "^collrun: rank $victim (" <<<"$out" && named=0
          else
            grep -q "from rank $victim\|collrun: rank $victim (.*) is stopped" <<<"$out" || named=0
          fi
          if [ "$named" = 0 ]; then
            blame=$((blame + 1))
            why="$why blame"
          fi
          if [ "$(shm_count)" -gt "$before" ]; then
            leaks=$((leaks + 1))
            why="$why leak"
          fi
          if [ -n "$why" ]; then
            printf '=== %s %s %s %s victim %d at %d:%s (rc %d)\n%s\n' "$fault" "$transport" \
              "$launcher" "$coll" "$victim" "$at" "$why" "$rc" "$out" >> "$log"
          fi
        done
      done
      echo "| $fault | $transport | $launcher | $jobs | $hangs | $bad | $blame | $leaks |"
    done
  done
done
if [ "$mpirun_named_survivor" -gt 0 ]; then
  echo
  echo "kill under mpirun: in $mpirun_named_survivor jobs Open MPI named a survivor (the first" \
    "process it reaped), and the survivors' messages named the victim"
fi
