#!/usr/bin/env bash
# libcoll across hosts against Open MPI, on hosts made of network
# namespaces of this machine (tests/hosts/netns-hosts.sh: eth0s on a
# bridge, tcp between hosts, shared memory within): bench/compare.sh run
# inside the first host with every contender spread over HOSTS hosts of
# PER_HOST ranks, libcoll hierarchical (its default across hosts) and flat
# (COLL_HIERARCHY=0) in alternate runs (flat only with one rank a host,
# where the hierarchy has nothing to do), each against Open MPI tuned and
# coll/han with --mca btl tcp,self,vader. Prints, per collective and size,
# the median latencies and libcoll / best peer for both forms, on OSU's
# average and on the synchronized-start maximum. Root only.
#
#   bench/netns-compare.sh [--build DIR] [--hosts N] [--per-host K] [--repeats R]
#                          [--sizes MIN:MAX] [--out DIR] [--env "VAR=VALUE ..."]
#                          [-- coll_bench_mpi options]
# --env: variables for libcoll's ranks in every run (mpirun -x), e.g.
# "COLL_TRANSPORT=tcp" for an A/B against the automatic shm+tcp.
#
# Every host's ranks get their own UTS namespace named as the host (Open
# MPI names its shared-memory files by host name) and COLL_HOST_ID (so
# that libcoll sees the hosts too).
#
# Every host also gets CPUs of its own (taskset; this machine's CPUs dealt
# out evenly, hosts sharing them only where there are more hosts than
# CPUs), and Open MPI's host list gives each host as many slots as CPUs.
# Pretend hosts that share all CPUs lie to both libraries: each sees 2
# ranks on 2 CPUs of "its" host and spins while a rank of the other host
# waits for that CPU (session 15: np 4 on 2 hosts x 2 ranks on 2 CPUs,
# every call 2-93 ms, allreduce 4 B 6.0 ms for libcoll and 4.8 ms for
# Open MPI). A real host's ranks share only that host's cores, and a real
# host file gives slots = cores: that is what each library is told here,
# so both yield where ranks outnumber their host's cores.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build
hosts=2
per_host=2
repeats=3
sizes=4:4194304
out=bench-results/netns
lib_env=""
extra=()
usage() { sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "netns-compare.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --hosts) hosts=$2; shift 2 ;;
    --per-host) per_host=$2; shift 2 ;;
    --env) for v in $2; do lib_env+=" -x $v"; done; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[[ $(id -u) == 0 ]] || die "needs root (network namespaces)"
[[ $hosts =~ ^[2-9]$ ]] || die "--hosts: 2 to 9"
[[ $per_host =~ ^[1-9][0-9]*$ ]] || die "--per-host: a positive integer"
build=$(cd "$build" && pwd)
mkdir -p "$out"
out=$(cd "$out" && pwd)

# shellcheck source=../tests/hosts/netns-hosts.sh
. "$here/../tests/hosts/netns-hosts.sh"
prefix=collbench$$
names=()
for ((h = 0; h < hosts; h++)); do names+=("$(printf "\\x$(printf %x $((97 + h)))")"); done
work=$(mktemp -d)
trap 'netns_hosts_down "$prefix" "${names[@]}"; rm -rf "$work"' EXIT
netns_hosts_up "$prefix" "${names[@]}" || die "$netns_error"

# The CPUs this process may use, dealt out to the hosts: host h gets
# cpus[h*k .. h*k+k-1] with k = max(1, ncpus / hosts), wrapping around.
read -r -a cpus <<< "$(taskset -pc $$ | sed 's/.*: //' | tr ',' '\n' |
  awk -F- '{ for (c = $1; c <= ($2 == "" ? $1 : $2); c++) printf "%d ", c }')"
per_cpus=$(( ${#cpus[@]} / hosts ))
((per_cpus >= 1)) || per_cpus=1
((hosts <= ${#cpus[@]})) ||
  echo "netns-compare.sh: $hosts hosts on ${#cpus[@]} CPUs: some hosts share a CPU" >&2
{
  echo '#!/bin/sh'
  echo 'host=$1'
  echo 'shift'
  echo 'case $host in'
  for ((h = 0; h < hosts; h++)); do
    list=""
    for ((c = 0; c < per_cpus; c++)); do
      list+="${list:+,}${cpus[$(( (h * per_cpus + c) % ${#cpus[@]} ))]}"
    done
    echo "  $prefix-${names[h]}) cpus=$list ;;"
    ((h == 0)) && first_cpus=$list
  done
  echo '  *) echo "agent.sh: unknown host $host" >&2; exit 1 ;;'
  echo 'esac'
  # shellcheck disable=SC2016
  echo 'exec ip netns exec "$host" unshare --uts taskset -c "$cpus" /bin/sh -c \'
  echo '  "hostname $host; COLL_HOST_ID=$host; export COLL_HOST_ID; $*"'
} > "$work/agent.sh"
chmod +x "$work/agent.sh"
host_list=""
for h in "${names[@]}"; do host_list+="${host_list:+,}$prefix-$h:$per_cpus"; done
first=$prefix-${names[0]}
# --bind-to none: each host's CPUs are set by taskset above; Open MPI would
# bind a rank of a 1-slot host to "its" first core, the same core on every host.
launch="--host $host_list --bind-to none --mca plm_rsh_agent $work/agent.sh"
launch+=" --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24"
np=$((hosts * per_host))
# With one rank a host the hierarchy has nothing to do: only the flat form.
forms=(hierarchical flat)
((per_host > 1)) || forms=(flat)

for ((repeat = 1; repeat <= repeats; repeat++)); do
  for form in "${forms[@]}"; do
    env=$lib_env
    [[ $form == flat ]] && env+=" -x COLL_HIERARCHY=0"
    echo "netns-compare.sh: run $repeat/$repeats, $form, $hosts hosts x $per_host" >&2
    mkdir -p "$out/$form"
    # mpirun starts the first host's ranks itself: it runs on that host's CPUs.
    ip netns exec "$first" unshare --uts taskset -c "$first_cpus" \
      /bin/sh -c 'hostname "$1"; shift; exec "$@"' sh "$first" \
      env COLL_HOST_ID="$first" "$here/compare.sh" --build "$build" --np "$np" --repeats 1 \
      --sizes "$sizes" --btl tcp,self,vader --peers "tuned han" --mpirun-args "$launch$env" \
      --out "$out/$form/run$repeat" -- "${extra[@]}" > "$out/$form/run$repeat.md" 2>&1 ||
      die "compare.sh failed ($form, run $repeat): see $out/$form/run$repeat.md"
  done
done

# Medians over the runs, per form and peer (compare.sh's summaries of one
# run each, merged from their raw CSVs).
summaries=()
for form in "${forms[@]}"; do
  for peer in tuned han; do
    awk -f "$here/median.awk" -f "$here/summarize.awk" "$out/$form"/run*/raw/"$peer"/*.csv |
      { IFS= read -r header; echo "$header"; sort -t, -k1,1 -k2,2n -k3,3n; } \
      > "$out/summary-$form-$peer.csv"
    summaries+=("$out/summary-$form-$peer.csv")
  done
done
# Columns of a summary (compare.sh): 1 collective, 3 size, 5 libcoll avg,
# 6 MPI avg, 13 libcoll sync max, 14 MPI sync max. Best peer: the lower
# median of tuned and han at that size.
awk -F, -v np="$np" -v hosts="$hosts" -v cpus="$per_cpus" '
  FNR == 1 { split(FILENAME, p, "summary-"); split(p[2], q, "[.]csv"); split(q[1], fp, "-")
             form = fp[1]; peer = fp[2]; next }
  {
    key = $1 "," $3
    if (!(key in seen)) { seen[key] = 1; order[++keys] = key }
    lib[key "," form] = $5; libs[key "," form] = $13
    if (!((key ",best") in mpi) || $6 < mpi[key ",best"]) { mpi[key ",best"] = $6; who[key] = peer }
    if ($14 != "" && (!((key ",sbest") in mpi) || $14 < mpi[key ",sbest"])) mpi[key ",sbest"] = $14
  }
  END {
    printf "np %d on %d namespace hosts of %d CPU(s) each (tcp between, shm within); medians of the runs\n\n", np, hosts, cpus
    print "| collective | size (B) | hierarchical (us) | flat (us) | best Open MPI (us) | peer |" \
          " hierarchical/best | flat/best | SyncMax hierarchical/best | SyncMax flat/best |"
    print "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
    for (k = 1; k <= keys; k++) {
      key = order[k]; split(key, f, ",")
      b = mpi[key ",best"]; s = mpi[key ",sbest"]
      size = f[1] == "barrier" ? "-" : f[2]
      h = (key ",hierarchical") in lib  # not run with one rank a host
      sh = s > 0 && h ? sprintf("%.2f", libs[key ",hierarchical"] / s) : "-"
      sf = s > 0 ? sprintf("%.2f", libs[key ",flat"] / s) : "-"
      printf "| %s | %s | %s | %.2f | %.2f | %s | %s | %.2f | %s | %s |\n", f[1], size,
             h ? sprintf("%.2f", lib[key ",hierarchical"]) : "-", lib[key ",flat"], b, who[key],
             h ? sprintf("%.2f", lib[key ",hierarchical"] / b) : "-", lib[key ",flat"] / b, sh, sf
    }
  }
' "${summaries[@]}" | tee "$out/summary.md"
echo "netns-compare.sh: wrote $out/summary.md, $out/summary-*.csv and the runs in $out/{hierarchical,flat}/" >&2
