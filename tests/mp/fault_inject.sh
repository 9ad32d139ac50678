#!/usr/bin/env bash
# COLL_FAULT_INJECT and the flight recorder (issue 33 item 5):
#   tests/mp/fault_inject.sh COLLRUN FAULT_MATRIX [TRANSPORT]
# FAULT_MATRIX is tests/mp/fault_matrix.c's program, run with no victim of
# its own (rank 99): the knob makes the fault, at a call chosen here, every
# run alike. Under collrun --enable-recovery, so that the survivors report.
#  1. kill inside a call: rank 2 dies after its first message of call 5 of
#     an allreduce loop: its line says so, every survivor fails with
#     COLL_ERR_PEER_LOST (4) at iteration 5 or 6 (a survivor that needed
#     nothing more of rank 2 completes call 5, as ULFM allows) and none
#     earlier, and collrun names rank 2 and signal 9.
#  2. exit at a call's start (call 0 of a barrier loop): collrun reports rank
#     2's exit status 3 before coll_finalize; survivors fail at iteration 0
#     or 1.
#  3. stop (a silent peer) with COLL_DEBUG_DUMP: every survivor prints a
#     flight-recorder line naming its call and the rank it waits for (rank
#     2, or a survivor that itself waits for rank 2), and SIGUSR1 to one
#     survivor prints a second line of its.
#  4. SIGUSR1 to a rank that is not waiting inside libcoll (between calls)
#     answers "no wait inside libcoll" and lives on.
#  5. Malformed values fail coll_init naming the knob.
set -uo pipefail
collrun=$1
prog=$2
transport=${3:-shm}
fails=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
bad() { echo "FAIL: $*"; echo "--- output:"; cat "$log"; fails=$((fails + 1)); }
run() { "$collrun" -np 4 --enable-recovery -x COLL_TRANSPORT="$transport" "$@" > "$log" 2>&1; }

# 1. kill after one message of call 5.
run --timeout 60 -x COLL_TIMEOUT=20 -x COLL_FAULT_INJECT=rank=2,call=5,after_sends=1 \
  "$prog" allreduce 99 0 kill 1000
grep -q "COLL_FAULT_INJECT: rank 2 killed (SIGKILL) at call 5 of communicator 1 after 1 message" "$log" ||
  bad "1: no injection line"
# Over tcp a survivor still inside call 4 (descheduled: 4 ranks on 2
# cores) used to fail it too: its 10 ms peer check (Context::check_stalled)
# reads rank 2's stream to its end - the call-4 message that completes the
# call, then the close - and reported the loss before the wait looked at
# the message it had just applied (1 run in 6 under load at a8f7455). The
# check now looks once more, so iteration 5 or 6 is the rule on tcp too.
iterations="5|6"
for r in 0 1 3; do
  grep -Eq "fault-matrix rank $r: status=4 iteration=($iterations) " "$log" ||
    bad "1: rank $r did not fail with PEER_LOST at iteration ${iterations//|/, }"
done
grep -q "collrun: rank 2 (pid [0-9]*) died: killed by signal 9" "$log" || bad "1: collrun did not name rank 2"
grep -q "finished without noticing" "$log" && bad "1: a survivor did not notice"

# 2. exit at the start of call 0.
run --timeout 60 -x COLL_TIMEOUT=20 -x COLL_FAULT_INJECT=rank=2,call=0,action=exit \
  "$prog" barrier 99 0 kill
grep -q "COLL_FAULT_INJECT: rank 2 _exit(3) at call 0" "$log" || bad "2: no injection line"
grep -q "collrun: rank 2 (pid [0-9]*) died: exited with status 3" "$log" || bad "2: collrun's exit status"
for r in 0 1 3; do
  grep -Eq "fault-matrix rank $r: status=4 iteration=(0|1) " "$log" ||
    bad "2: rank $r did not fail with PEER_LOST at iteration 0 or 1"
done

# 3. a stopped peer, the dump after 0.5 s and one on SIGUSR1. The job's
# timeout ends the stopped rank (and the test) once the survivors timed out
# (a survivor that waits for another survivor may see it exit first).
"$collrun" -np 4 --enable-recovery --timeout 12 -x COLL_TRANSPORT="$transport" -x COLL_TIMEOUT=6 \
  -x COLL_DEBUG_DUMP=0.5 -x COLL_FAULT_INJECT=rank=2,call=3,action=stop \
  "$prog" allreduce 99 0 kill > "$log" 2>&1 &
job=$!
pid=""
for _ in $(seq 100); do
  pid=$(sed -n 's/^libcoll: rank 0 (pid \([0-9]*\)): waiting.*/\1/p' "$log" | head -1)
  [[ -n $pid ]] && break
  sleep 0.1
done
if [[ -z $pid ]]; then
  bad "3: no dump line from rank 0 within 10 s"
else
  kill -USR1 "$pid"
  for _ in $(seq 50); do
    (($(grep -c "^libcoll: rank 0 (pid $pid): waiting" "$log") >= 2)) && break
    sleep 0.1
  done
  (($(grep -c "^libcoll: rank 0 (pid $pid): waiting" "$log") >= 2)) || bad "3: SIGUSR1 printed nothing"
fi
wait "$job"
for r in 0 1 3; do
  grep -Eq "^libcoll: rank $r \(pid [0-9]+\): waiting [0-9.]+ s without progress in coll_allreduce, call [0-9]+ on communicator 1 \(rank $r of 4\), for .* \(world rank [0-3]\)" "$log" ||
    bad "3: rank $r's dump does not name its call and the rank it waits for"
  # Or its peer timed out a moment before it and exited: PEER_LOST, once
  # it too had waited nearly COLL_TIMEOUT or more (drive()'s note says how
  # long: 5 s at least, longer where a loaded machine descheduled it).
  grep -Eq "fault-matrix rank $r: status=(3 |4 .*meanwhile rank $r had waited ([5-9]|[1-9][0-9]+)\.[0-9] s)" "$log" ||
    bad "3: rank $r did not time out"
done

# 4. SIGUSR1 between calls: fault_matrix's idle mode sleeps 50 ms between
# barriers, so the signal lands outside libcoll and the handler answers.
"$collrun" -np 2 --timeout 60 -x COLL_TRANSPORT="$transport" "$prog" idle > "$log" 2>&1 &
job=$!
pid1=""
for _ in $(seq 50); do
  pid1=$(pgrep -P "$job" -x "$(basename "$prog" | cut -c1-15)" | head -1)
  [[ -n $pid1 ]] && break
  sleep 0.1
done
sleep 0.5  # past coll_init: the handler is installed there
[[ -n $pid1 ]] && kill -USR1 "$pid1"
wait "$job" || bad "4: the job failed"
[[ -n $pid1 ]] || bad "4: no rank process found"
grep -Eq "^libcoll: rank [01] \(pid $pid1\): SIGUSR1: no wait inside libcoll" "$log" ||
  bad "4: SIGUSR1 to a rank between calls did not answer"

# 5. malformed values.
for v in "rank=x,call=1" "rank=1" "call=2" "rank=1,call=2,action=explode" "rank=1,call=2,when=now" "rank=1;call=2"; do
  "$collrun" -np 1 --timeout 60 -x COLL_FAULT_INJECT="$v" "$prog" barrier 99 0 kill > "$log" 2>&1 &&
    bad "5: COLL_FAULT_INJECT=$v accepted"
  grep -q "COLL_FAULT_INJECT=" "$log" || bad "5: COLL_FAULT_INJECT=$v: the error does not name the knob"
done
for v in -1 x; do
  "$collrun" -np 1 --timeout 60 -x COLL_DEBUG_DUMP="$v" "$prog" barrier 99 0 kill > "$log" 2>&1 &&
    bad "5: COLL_DEBUG_DUMP=$v accepted"
done

((fails == 0)) && echo "fault_inject ($transport): all passed"
exit $((fails > 0))
