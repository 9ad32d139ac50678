#!/bin/sh
# hosts_test.sh COLLRUN MP_COLLECTIVES HOST_CHECK AGENT [HIERARCHY_TEST]: a job on three
# "hosts" made of network namespaces, started by collrun -H through a launch
# agent (AGENT, netns-agent.sh), as on a real cluster:
#
#   namespaces P-a .. P-d (P unique per run; netns-hosts.sh makes them:
#   eth0s 10.77.0.1 .. .4 on a bridge, nothing in the root namespace's
#   network), /etc/netns/P-a/hosts naming them, so that collrun, run
#   inside P-a by `ip netns exec`, finds P-a to be its own host: its ranks
#   are forked, the others go through the agent. The first jobs use P-a,
#   P-b and P-c.
#
# Checks: the transport is shm+tcp on every rank and collectives across the
# hosts are right (HOST_CHECK), the ranks ran in the namespaces collrun
# placed them in, the agent was used for P-b and P-c only (2 ranks and 1
# /dev/shm cleanup each), the multi-process collective suite passes
# (MP_COLLECTIVES; HOSTS_GTEST_FILTER narrows it), and a rank killed on P-c
# ends the whole job with 137, leaving no process in any namespace. With
# HIERARCHY_TEST (tests/mp/hierarchy_test.c): the hierarchical collectives
# on four hosts of 2 ranks (P-d joins for that job),
# then the same job flat (COLL_HIERARCHY=0); each host's eth0 bytes sent
# are printed beside the bytes libcoll counted.
#
# Needs root and iproute2 with network namespaces; exit 77 (skip) without
# them. The namespaces and /etc/netns entries are removed on every exit.
set -u

if [ $# -ne 4 ] && [ $# -ne 5 ]; then
  echo "usage: $0 COLLRUN MP_COLLECTIVES HOST_CHECK AGENT [HIERARCHY_TEST]" >&2
  exit 2
fi
collrun=$1
mp_collectives=$2
host_check=$3
agent=$4
hierarchy_test=${5:-}

skip() {
  echo "SKIP: $*"
  exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
command -v ip >/dev/null 2>&1 || skip "needs ip (iproute2)"

. "$(dirname "$0")/netns-hosts.sh"

prefix="collhosts$$"
ns_a=${prefix}-a
ns_b=${prefix}-b
ns_c=${prefix}-c
ns_d=${prefix}-d
work=$(mktemp -d) || exit 1

cleanup() {
  netns_hosts_down "$prefix" a b c d
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
  echo "FAIL: $*"
  exit 1
}

if ! ip netns add "${prefix}-probe" 2>"$work/setup.err"; then
  skip "ip netns add failed: $(cat "$work/setup.err")"
fi
ip netns del "${prefix}-probe"
netns_hosts_up "$prefix" a b c d || fail "$netns_error"

hosts="$ns_a:2,$ns_b:2,$ns_c:2"
echo "hosts: $hosts"

# collrun inside host a, as a user on host a would start it. In the
# background, so that a signal to this script (meson's timeout) runs the
# clean-up at once rather than after collrun ends; collrun's output goes to
# the file named first.
run_collrun() {
  output=$1
  shift
  ip netns exec "$ns_a" "$collrun" -H "${job_hosts:-$hosts}" --launch-agent "$agent" "$@" \
    >"$output" 2>&1 &
  wait $!
}

# 1. Transport, placement, results; which hosts went through the agent.
export NETNS_AGENT_LOG="$work/agent.log"
: >"$NETNS_AGENT_LOG"
run_collrun "$work/check.out" --timeout 60 "$host_check" shm+tcp
status=$?
cat "$work/check.out"
[ "$status" -eq 0 ] || fail "host check: collrun exited with $status"
unset NETNS_AGENT_LOG

netns_of() {
  ip netns exec "$1" readlink /proc/self/ns/net
}
rank=0
for ns in "$ns_a" "$ns_a" "$ns_b" "$ns_b" "$ns_c" "$ns_c"; do
  want="host-check rank $rank of 6 host $ns netns $(netns_of "$ns") transport shm+tcp ok"
  grep -qxF "$want" "$work/check.out" || fail "no line '$want'"
  rank=$((rank + 1))
done
[ "$(grep -c '^host-check rank' "$work/check.out")" -eq 6 ] || fail "not exactly 6 ranks reported"
[ "$(netns_of "$ns_a")" != "$(netns_of "$ns_b")" ] || fail "the namespaces are not distinct"

echo "agent calls: $(sort "$work/agent.log" | uniq -c | tr -s ' \n' ' ')"
grep -qxF "$ns_a" "$work/agent.log" && fail "collrun used the agent for its own host $ns_a"
for ns in "$ns_b" "$ns_c"; do
  calls=$(grep -cxF "$ns" "$work/agent.log")
  [ "$calls" -eq 3 ] || fail "$calls agent calls for $ns, expected 3 (2 ranks, 1 cleanup)"
done

# 2. The multi-process collective suite across the three hosts.
set -- "$mp_collectives"
if [ -n "${HOSTS_GTEST_FILTER:-}" ]; then set -- "$@" "--gtest_filter=$HOSTS_GTEST_FILTER"; fi
run_collrun "$work/mp.out" --timeout 300 "$@"
status=$?
tail -n 40 "$work/mp.out"
[ "$status" -eq 0 ] || fail "mp_collectives on 3 hosts: collrun exited with $status"
grep -q '^\[  PASSED  \]' "$work/mp.out" || fail "mp_collectives did not report PASSED"

# 3. A rank killed on host c ends the job at once, everywhere.
run_collrun "$work/kill.out" --timeout 60 /bin/sh -c \
  'if [ "$COLL_RANK" = 5 ]; then kill -9 $$; fi; exec sleep 300'
status=$?
cat "$work/kill.out"
[ "$status" -eq 137 ] || fail "a rank killed by SIGKILL: collrun exited with $status, expected 137"
grep -q "rank 5 (host $ns_c, agent pid [0-9]*) exited with status 137" "$work/kill.out" ||
  fail "collrun did not name rank 5 on $ns_c"
# The other ranks end as collrun ends them; bounded wait for the last.
tries=0
while :; do
  left=""
  for ns in "$ns_a" "$ns_b" "$ns_c"; do left="$left$(ip netns pids "$ns")"; done
  [ -z "$left" ] && break
  tries=$((tries + 1))
  [ "$tries" -le 100 ] || fail "processes left in the namespaces: $left"
  sleep 0.1
done

# 4. Hierarchical collectives on four hosts: every result, the algorithm,
# and only leaders sending across hosts (the program checks); then flat.
if [ -n "$hierarchy_test" ]; then
  tx_bytes() {
    for ns in "$ns_a" "$ns_b" "$ns_c" "$ns_d"; do
      ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes
    done | tr '\n' ' '
  }
  job_hosts="$ns_a:2,$ns_b:2,$ns_c:2,$ns_d:2"
  for mode in hierarchical flat; do
    set -- "$hierarchy_test" 2
    env=""
    if [ "$mode" = flat ]; then set -- "$@" flat; env="-x COLL_HIERARCHY=0"; fi
    before=$(tx_bytes)
    # shellcheck disable=SC2086 # $env is one option and its value, or nothing
    run_collrun "$work/hier.out" --timeout 300 $env "$@"
    status=$?
    after=$(tx_bytes)
    cat "$work/hier.out"
    [ "$status" -eq 0 ] || fail "hierarchy_test ($mode) on 4 hosts: collrun exited with $status"
    grep -q '^hierarchy_test: all checks passed at np 8, 4 hosts' "$work/hier.out" ||
      fail "hierarchy_test ($mode) did not pass"
    echo "eth0 bytes sent, hosts a b c d ($mode): before $before, after $after"
  done
  unset job_hosts
fi

echo "PASS: 3 hosts (network namespaces) under collrun -H"
