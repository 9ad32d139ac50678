#!/usr/bin/env bash
# libcoll against its peers, side by side: runs coll_bench_mpi under mpirun
# for every rank count and peer configuration of Open MPI, and
# coll_bench_mpich under mpirun.mpich for MPICH, REPEATS times
# (rank counts and peers alternating within each repeat, the libraries
# within each run), and prints per collective and size the median latency
# ratio libcoll / the best peer, on OSU's average and on the synchronized-
# start figure (--sync-start), as a markdown table; for allreduce also
# libcoll's bus bandwidth as a fraction of this machine's memcpy (other
# collectives with -- -b LIST, e.g. -- -b all; the collectives are taken
# from the CSV, whatever they are). Peers: tuned (Open MPI's
# default coll/tuned), han (--mca coll_han_priority 100), mpich (MPICH's
# own collectives; in the default list when build/bench/coll_bench_mpich
# exists). In every run both libraries wait in that run's MPI_Barrier and
# read its clock, so each ratio is libcoll against that peer under one
# barrier. MPICH busy-polls, so it runs only where the ranks fit the
# cores; a run that does not finish within --run-limit seconds is left out
# and said.
# Writes OUTDIR/raw/PEER/*.csv (every run), OUTDIR/summary-PEER.csv,
# OUTDIR/summary.csv (the first peer's, for plot.sh) and OUTDIR/summary.md;
# with --plot also OUTDIR/compare.png (bench/plot.sh).
#
#   bench/compare.sh [--build DIR] [--np "2 4"] [--repeats N] [--sizes MIN:MAX]
#                    [--type TYPE] [--peers "tuned han"] [--out DIR] [--plot]
#                    [--btl LIST] [--mpirun-args "ARGS"] [--busy N] [--run-limit S]
#                    [--summarize] [-- coll_bench_mpi options]
# --btl: Open MPI's BTLs (default self,vader: one node); --mpirun-args: more
# mpirun arguments, split at spaces (hosts, an rsh agent, -x VAR=VALUE for
# libcoll: bench/netns-compare.sh runs it across namespace hosts so; not
# passed to mpirun.mpich). --busy N: N competing CPU-bound processes
# (stress-ng --cpu N, or shell loops where stress-ng is missing) run for
# the whole comparison, beside every contender alike: the busy node.
# --summarize: no runs, the summaries and the table made again from
# OUTDIR/raw (after a change of the summary's rules).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build
rank_counts="2 4"
repeats=5
sizes=4:4194304
datatype=float
out=bench-results
peers=""
plot=0
busy=0
run_limit=1800
summarize_only=0
btl=self,vader
mpirun_args=""
extra=()

usage() { sed -n '2,34s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "compare.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) rank_counts=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --type) datatype=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --peers) peers=$2; shift 2 ;;
    --plot) plot=1; shift ;;
    --btl) btl=$2; shift 2 ;;
    --mpirun-args) mpirun_args=$2; shift 2 ;;
    --busy) busy=$2; shift 2 ;;
    --run-limit) run_limit=$2; shift 2 ;;
    --summarize) summarize_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done

bench=$build/bench/coll_bench_mpi
bench_mpich=$build/bench/coll_bench_mpich
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats: '$repeats' is not a positive integer"
[[ $busy =~ ^[0-9]+$ ]] || die "--busy: '$busy' is not a count"
[[ $run_limit =~ ^[1-9][0-9]*$ ]] || die "--run-limit: '$run_limit' is not a positive integer"
if [[ -z $peers ]]; then
  peers="tuned han"
  [[ -x $bench_mpich ]] && command -v mpirun.mpich > /dev/null && peers+=" mpich"
fi

# The mpirun options that make an Open MPI peer; mpich runs its own program.
peer_args() {
  case $1 in
    tuned) ;;
    han) echo "--mca coll_han_priority 100" ;;
    mpich) ;;
    *) die "unknown peer '$1' (tuned, han, mpich)" ;;
  esac
}
for peer in $peers; do
  if [[ $peer == mpich ]]; then
    [[ -x $bench_mpich ]] || die "no $bench_mpich: install libmpich-dev (scripts/install-deps.sh) and rebuild"
    command -v mpirun.mpich > /dev/null || die "mpirun.mpich not found (Debian: mpich)"
  else
    [[ -x $bench ]] || die "no $bench: configure with Open MPI found (meson setup -Dmpi=enabled) and build"
    command -v mpirun > /dev/null || die "mpirun not found (Debian: openmpi-bin)"
  fi
done

read -r -a peer_list <<< "$peers"
((${#peer_list[@]})) || die "--peers: none given"
for peer in "${peer_list[@]}"; do peer_args "$peer" > /dev/null; done

# --summarize: the runs of an earlier comparison in OUTDIR/raw, summed up
# again (after a change of the summary's rules), nothing run.
if ((summarize_only == 0)); then
  # The busy node: competitors started once, stopped however this script
  # ends (bench/busy.sh); a quiet comparison refuses to run beside a
  # competitor an earlier run left.
  source "$here/busy.sh"
  trap busy_stop EXIT
  if ((busy > 0)); then
    busy_start "$busy" || die "could not start the competing processes"
    echo "compare.sh: $busy competing CPU-bound process(es) running" >&2
  else
    busy_check_quiet || die "stop it first (a quiet comparison)"
  fi
  for peer in "${peer_list[@]}"; do
    mkdir -p "$out/raw/$peer"
    rm -f "$out/raw/$peer"/*.csv "$out/raw/$peer"/*.txt
  done
  rm -f "$out/left-out.txt"

  for ((repeat = 1; repeat <= repeats; repeat++)); do
    for np in $rank_counts; do
      # The peers take turns, the first one changing from repeat to repeat.
      for ((turn = 0; turn < ${#peer_list[@]}; turn++)); do
        peer=${peer_list[(repeat + turn) % ${#peer_list[@]}]}
        # MPICH busy-polls in every wait, its barrier too: with more ranks
        # than cores the spinning ranks starve the one each waits for, and
        # both libraries' figures become MPICH's barrier (np 4 on 2 cores:
        # 7-28 ms a call for both). It is no peer there.
        if [[ $peer == mpich ]] && ((np > $(nproc))); then
          ((repeat == 1)) && echo "compare.sh: np $np, peer mpich: left out (more ranks than the $(nproc) cores: MPICH busy-polls)" | tee -a "$out/left-out.txt" >&2
          continue
        fi
        read -r -a mca <<< "$(peer_args "$peer")"
        run=$out/raw/$peer/np$np-run$repeat
        echo "compare.sh: run $repeat/$repeats, np $np, peer $peer" >&2
        # Root may run mpirun only with --allow-run-as-root; by default
        # shared memory only (btl self,vader), the transport libcoll uses on
        # one node.
        read -r -a launch <<< "$mpirun_args"
        if [[ $peer == mpich ]]; then
          launcher=(mpirun.mpich -np "$np")
          program=$bench_mpich
        else
          launcher=(mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl "$btl" "${launch[@]}" "${mca[@]}")
          program=$bench
        fi
        status=0
        timeout --kill-after=10 "$run_limit" "${launcher[@]}" \
          "$program" -m "$sizes" -T "$datatype" --sync-start --rotate-root --csv "$run.csv" "${extra[@]}" \
          > "$run.txt" 2>&1 || status=$?
        if ((status == 124 || status == 137)); then
          echo "compare.sh: np $np, peer $peer: no result within $run_limit s (left out)" | tee -a "$out/left-out.txt" >&2
          rm -f "$run.csv"
        elif ((status != 0)); then
          die "$(basename "$program") failed at np $np, peer $peer (output in $run.txt)"
        fi
      done
    done
  done
fi

# A peer none of whose runs finished has no summary and no say in the table.
finished=()
for peer in "${peer_list[@]}"; do
  if ! compgen -G "$out/raw/$peer/*.csv" > /dev/null; then
    echo "compare.sh: peer $peer: no run finished (see $out/left-out.txt)" >&2
    rm -f "$out/summary-$peer.csv"
    continue
  fi
  finished+=("$peer")
  awk -f "$here/median.awk" -f "$here/summarize.awk" "$out/raw/$peer"/*.csv |
    { IFS= read -r header; echo "$header"; sort -t, -k1,1 -k2,2n -k3,3n; } \
    > "$out/summary-$peer.csv"
done
((${#finished[@]})) || die "no run of any peer finished"
peer_list=("${finished[@]}")
cp "$out/summary-${peer_list[0]}.csv" "$out/summary.csv"

# The markdown table, to paste into a report. Columns of summary-PEER.csv:
# 1 collective, 2 np, 3 size_bytes, 4 runs, 5 libcoll_avg_us, 6 mpi_avg_us,
# 7 ratio, 11 libcoll_busbw_memcpy (allreduce only), 13 libcoll_sync_max_us,
# 14 mpi_sync_max_us, 15 sync_ratio. The best peer at a size is the one
# against which libcoll's median ratio is highest (the fastest peer);
# likewise, separately, for the synchronized-start ratio. A barrier has no
# size.
awk -F, '
  function peer_of(file,   n, parts) {
    n = split(file, parts, "/")
    sub(/^summary-/, "", parts[n]); sub(/[.]csv$/, "", parts[n])
    return parts[n]
  }
  function shown(value, format) { return value == "" ? "-" : sprintf(format, value) }
  FNR == 1 { peer = peer_of(FILENAME); next }
  {
    key = $1 "," $2 "," $3
    if (!(key in seen)) { seen[key] = 1; order[++keys] = key; libcoll[key] = $5
                          fraction[key] = $11; runs[key] = $4 }
    if (!(key in best) || $7 > ratio[key]) { best[key] = peer; ratio[key] = $7; peer_us[key] = $6 }
    if ($15 != "" && (!(key in sync_best) || $15 > sync_ratio[key])) {
      sync_best[key] = peer; sync_ratio[key] = $15
    }
  }
  END {
    print "| collective | np | size (B) | libcoll (us) | best peer (us) | best peer |" \
          " libcoll/best | SyncMax libcoll/best (peer) | libcoll busbw/memcpy | runs |"
    print "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: |"
    for (k = 1; k <= keys; k++) {
      key = order[k]
      split(key, f, ",")
      size = f[1] == "barrier" ? "-" : f[3]
      sync = key in sync_best ? sprintf("%.2f (%s)", sync_ratio[key], sync_best[key]) : "-"
      printf "| %s | %s | %s | %.2f | %.2f | %s | %.2f | %s | %s | %s |\n", f[1], f[2], size,
             libcoll[key], peer_us[key], best[key], ratio[key], sync, shown(fraction[key], "%.3f"),
             runs[key]
    }
  }
' $(for peer in "${peer_list[@]}"; do echo "$out/summary-$peer.csv"; done) | tee "$out/summary.md"
echo "compare.sh: wrote $out/summary-*.csv, $out/summary.csv, $out/summary.md and $out/raw/" >&2

if [[ $plot == 1 ]]; then
  others=()
  for peer in "${peer_list[@]:1}"; do others+=("$out/summary-$peer.csv"); done
  "$here/plot.sh" "$out/summary.csv" "$out/compare.png" "${others[@]}"
fi
