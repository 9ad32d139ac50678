#!/usr/bin/env bash
# The fault matrix (issue 15), a long run outside CI:
#   tests/mp/fault_matrix.sh [BUILD_DIR [TRIALS]]
# For kill -9 and SIGSTOP x shm and tcp x collrun and Open MPI's mpirun:
# TRIALS rounds over ten collectives, each a job of NP (4) ranks in which a
# random rank raises the signal at a random iteration (1-40) of the
# collective (tests/mp/fault_matrix.c), and counts
#   hangs        jobs that did not end within 90 s (COLL_TIMEOUT is 3 s);
#   wrong status a survivor that reported another status than PEER_LOST
#                (kill) or TIMEOUT/PEER_LOST (stop), or finished without
#                noticing, or a job that returned 0 (survivors that the
#                launcher ended before they noticed report nothing: fine);
#   wrong blame  kill: the launcher did not name the victim (collrun's
#                "rank V (...)", mpirun's "rank V with PID"), or collrun
#                named another rank; stop: neither a survivor's message
#                ("from rank V") nor collrun ("rank V (...) is stopped")
#                names the victim;
#   leaks        coll-* entries in /dev/shm after the job that were not
#                there before.
# FAULTS, TRANSPORTS, LAUNCHERS pick rows (default: all). Prints a
# Markdown table; the jobs' output of every failure goes to
# $FAULT_MATRIX_LOG (default /tmp/fault-matrix.log). Run it alone: other
# jobs' segments would count as leaks.
set -uo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
trials=${2:-1}
np=${NP:-4}
collrun=$build/libcoll/launcher/collrun
prog=$build/tests/mp/mp_fault_matrix
log=${FAULT_MATRIX_LOG:-/tmp/fault-matrix.log}
: > "$log"
colls="allreduce bcast barrier reduce allgather gather scatter alltoall reduce_scatter_block scan"
shm_count() { ls /dev/shm 2>/dev/null | grep -c '^coll-'; }

echo "| fault | transport | launcher | jobs | hangs | wrong status | wrong blame | leaks |"
echo "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
for fault in ${FAULTS:-kill stop}; do
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
            pkill -9 -f "$prog" 2>/dev/null
          fi
          lines=$(grep -E "^fault-matrix rank [0-9]+: status=" <<<"$out")
          if [ "$fault" = kill ]; then
            wrong=$(grep -vE "status=4 " <<<"$lines" | grep -c . )
          else
            wrong=$(grep -vE "status=(3|4) " <<<"$lines" | grep -c . )
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
            else
              grep -q "rank $victim with PID" <<<"$out" || named=0
            fi
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
