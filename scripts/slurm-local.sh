#!/usr/bin/env bash
# A one-machine Slurm cluster for tests: a private munged, slurmctld and
# slurmd, all configured and logging under one directory, on free ports, so
# that it touches no system-wide Slurm or munge and several can run on one
# machine side by side.
#
#   slurm-local.sh start DIR   set up DIR (created; must be empty), start the
#                              daemons, wait until the node is idle; prints
#                              SLURM_CONF=DIR/slurm.conf on stdout (export it
#                              for srun, sinfo, ...). On failure it stops what
#                              it started, shows the logs and exits 1.
#   slurm-local.sh stop DIR    cancel every job, stop every daemon started for
#                              DIR (and any process they left), bounded waits.
#   slurm-local.sh available   exit 0 when the programs are installed, 77 when
#                              not (the exit status meson reads as "skipped").
#
# Packages (Debian 12): slurmctld slurmd slurm-client munge; srun's PMIx
# plugin (mpi_pmix_v4.so, in slurm-wlm-basic-plugins) dlopens libpmix2's
# /usr/lib/x86_64-linux-gnu/pmix2/lib/libpmix.so.
#
# Environment:
#   SLURM_LOCAL_CPUS       CPUs the node announces (default 8, whatever the
#                          machine has: tests run 3-4 tasks on 2 cores)
#   SLURM_LOCAL_WAIT_S     bound on waiting for the node to become idle (60)
set -euo pipefail

readonly NODE=localhost
readonly PARTITION=coll
# Every process started here carries this variable, so that stop can find
# leftovers (a slurmstepd that outlived slurmd) by it, and only them.
readonly MARKER_VAR=COLL_SLURM_LOCAL_DIR

die() {
  echo "slurm-local: $*" >&2
  exit 1
}
note() { echo "slurm-local: $*" >&2; }

programs_present() {
  local program
  for program in munged slurmctld slurmd srun sinfo scancel squeue; do
    if ! command -v "$program" > /dev/null 2>&1 && ! [ -x "/usr/sbin/$program" ]; then
      note "$program is not installed (Debian: apt-get install slurmctld slurmd slurm-client munge)"
      return 1
    fi
  done
}

# Daemons live in /usr/sbin, which a non-login root shell may lack in PATH.
export PATH="$PATH:/usr/sbin:/sbin"

# True when something listens on TCP port $1 (IPv4 or IPv6), read from
# /proc so that no tool is needed.
port_in_use() {
  local hex
  hex=$(printf '%04X' "$1")
  awk -v port=":$hex" '$4 == "0A" && substr($2, length($2) - 4) == port { found = 1 }
                        END { exit found ? 0 : 1 }' /proc/net/tcp /proc/net/tcp6 2> /dev/null
}

# A free port in [20000, 60000), different from $1 (if given).
pick_port() {
  local port tries
  for ((tries = 0; tries < 200; ++tries)); do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
    [ "$port" != "${1:-}" ] || continue
    port_in_use "$port" || {
      echo "$port"
      return 0
    }
  done
  die "no free TCP port found"
}

# The PMIx plugin, when this Slurm has one that can load: MpiDefault=pmix.
mpi_default() {
  local plugin_dir
  for plugin_dir in /usr/lib/x86_64-linux-gnu/slurm-wlm /usr/lib/slurm /usr/lib64/slurm \
    /usr/lib/"$(uname -m)"-linux-gnu/slurm-wlm; do
    if [ -e "$plugin_dir/mpi_pmix.so" ]; then
      echo pmix
      return
    fi
  done
  echo none
}

write_config() {
  local dir=$1 ctld_port=$2 slurmd_port=$3 cpus=$4 host
  host=$(hostname -s)
  # slurmctld runs only where SlurmctldHost names this machine's short
  # hostname; the address in parentheses keeps everything on loopback.
  # SlurmdParameters=config_overrides lets the node announce more CPUs
  # than the machine has (OverSubscribe=FORCE alone does not place 4
  # tasks on 2 CPUs). No accounting, no cgroups: proctrack/linuxproc
  # tracks a job's processes by parentage.
  cat > "$dir/slurm.conf" << EOF
ClusterName=colllocal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
SelectType=select/linear
SchedulerType=sched/builtin
MpiDefault=$(mpi_default)
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
InactiveLimit=0
KillWait=5
MinJobAge=5
SlurmdTimeout=60
SlurmctldTimeout=60
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$host CPUs=$cpus State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=30 State=UP OverSubscribe=FORCE
EOF
}

# Starts "$@" in the background, in its own session, with the marker set,
# and records its pid in $dir/run/$name.pid.started.
start_daemon() {
  local dir=$1 name=$2
  shift 2
  # setsid execs (a background child is not a group leader), so $! is
  # the daemon's own pid.
  env "$MARKER_VAR=$dir" SLURM_CONF="$dir/slurm.conf" \
    setsid "$@" < /dev/null >> "$dir/log/$name.out" 2>&1 &
  echo $! > "$dir/run/$name.pid.started"
}

show_logs() {
  local dir=$1 log
  for log in "$dir"/log/*; do
    [ -f "$log" ] || continue
    echo "----- $log (last 40 lines)" >&2
    tail -n 40 "$log" >&2 || true
  done
}

# The node's state, or nothing while slurmctld does not answer yet.
node_state() {
  { SLURM_CONF="$1/slurm.conf" timeout 10 sinfo -h -n "$NODE" -o '%t' 2> /dev/null || true; } |
    head -n 1
}

start() {
  local dir=$1 cpus=${SLURM_LOCAL_CPUS:-8} wait_s=${SLURM_LOCAL_WAIT_S:-60}
  programs_present || exit 77
  mkdir -p "$dir"
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
  dir=$(cd "$dir" && pwd)
  # munged wants the key's and socket's directories writable by their
  # owner only, and searchable by all (so any user can reach the socket);
  # the key itself is readable by its owner only.
  chmod 0711 "$dir"
  mkdir -p "$dir"/{munge,state,spool,run,log}
  chmod 0711 "$dir/munge"

  trap 'note "start failed; stopping"; show_logs "$dir"; stop "$dir"; exit 1' ERR

  # A private key and socket: the machine's own munge (if any) is left
  # alone, and the key never leaves this directory.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0600 "$dir/munge/munge.key"
  start_daemon "$dir" munged munged --foreground --force \
    --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --seed-file="$dir/munge/munged.seed" \
    --log-file="$dir/log/munged.log"
  wait_for "munged socket" 20 test -S "$dir/munge/munge.socket"

  local ctld_port slurmd_port
  ctld_port=$(pick_port)
  slurmd_port=$(pick_port "$ctld_port")
  write_config "$dir" "$ctld_port" "$slurmd_port" "$cpus"
  start_daemon "$dir" slurmctld slurmctld -D -c -f "$dir/slurm.conf"
  start_daemon "$dir" slurmd slurmd -D -c -N "$NODE" -f "$dir/slurm.conf"

  # The node is "unknown" or "down" until slurmd registers (then, with
  # ReturnToService=2, "idle"); one that never gets there says why in
  # the logs shown on failure.
  local deadline=$((SECONDS + wait_s)) state="" name
  while ((SECONDS < deadline)); do
    state=$(node_state "$dir")
    [ "$state" != idle ] || break
    for name in munged slurmctld slurmd; do
      kill -0 "$(cat "$dir/run/$name.pid.started")" 2> /dev/null || {
        note "$name exited during startup"
        false
      }
    done
    sleep 0.5
  done
  if [ "$state" != idle ]; then
    note "node $NODE not idle after $wait_s s (state '${state:-unknown}')"
    false
  fi
  trap - ERR
  note "up: node $NODE idle, slurmctld port $ctld_port, slurmd port $slurmd_port, MpiDefault=$(mpi_default)"
  echo "SLURM_CONF=$dir/slurm.conf"
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every 0.2 s.
wait_for() {
  local what=$1 limit=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@"; do
    if ((SECONDS >= deadline)); then
      note "$what: not ready after $limit s"
      return 1
    fi
    sleep 0.2
  done
}

# Pids of live processes whose environment carries the marker for $1.
marked_pids() {
  local dir=$1 environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    [ "$pid" != $$ ] || continue
    # Kernel threads and processes that just ended have no readable environ.
    if { tr '\0' '\n' < "$environ"; } 2> /dev/null | grep -qxF "$MARKER_VAR=$dir"; then
      echo "$pid"
    fi
  done
}

# Sends $1 to each pid in the rest, then waits (bounded) for them to go.
signal_and_wait() {
  local signal=$1 pid alive deadline
  shift
  [ $# -gt 0 ] || return 0
  kill "-$signal" "$@" 2> /dev/null || true
  deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    alive=0
    for pid in "$@"; do
      kill -0 "$pid" 2> /dev/null && alive=1
    done
    [ $alive = 1 ] || return 0
    sleep 0.2
  done
  return 1
}

stop() {
  local dir=$1
  [ -d "$dir" ] || return 0
  dir=$(cd "$dir" && pwd)
  local conf="$dir/slurm.conf" name pid pids=()

  # Jobs first, through Slurm, so that slurmstepd ends their tasks.
  if [ -f "$conf" ] && [ -f "$dir/run/slurmctld.pid.started" ] &&
    kill -0 "$(cat "$dir/run/slurmctld.pid.started")" 2> /dev/null; then
    SLURM_CONF=$conf timeout 10 scancel --full --quiet --partition="$PARTITION" 2> /dev/null || true
    local deadline=$((SECONDS + 15))
    while ((SECONDS < deadline)); do
      [ -z "$(SLURM_CONF=$conf timeout 10 squeue -h -o %i 2> /dev/null || echo unknown)" ] && break
      sleep 0.5
    done
  fi

  for name in slurmd slurmctld munged; do
    [ -f "$dir/run/$name.pid.started" ] || continue
    pid=$(cat "$dir/run/$name.pid.started")
    kill -0 "$pid" 2> /dev/null && pids+=("$pid")
  done
  signal_and_wait TERM "${pids[@]}" || signal_and_wait KILL "${pids[@]}" || true

  # Whatever the daemons left (slurmstepd, a task it could not end).
  mapfile -t pids < <(marked_pids "$dir")
  if [ ${#pids[@]} -gt 0 ]; then
    note "ending leftover processes ${pids[*]}"
    signal_and_wait TERM "${pids[@]}" || signal_and_wait KILL "${pids[@]}" || true
  fi
  mapfile -t pids < <(marked_pids "$dir")
  if [ ${#pids[@]} -gt 0 ]; then
    note "still running after SIGKILL: ${pids[*]}"
    return 1
  fi
  rm -f "$dir"/run/*.pid.started
}

case ${1:-} in
  start)
    [ $# -eq 2 ] || die "usage: $0 start DIR"
    start "$2"
    ;;
  stop)
    [ $# -eq 2 ] || die "usage: $0 stop DIR"
    stop "$2"
    ;;
  available)
    programs_present || exit 77
    ;;
  *)
    die "usage: $0 start DIR | stop DIR | available"
    ;;
esac
