#!/usr/bin/env bash
# libcoll as MPI users meet it: the MPI collectives of coll_bench_mpi
# (OSU's loop: an MPI_Barrier, then one timed MPI_X) served by libcoll
# through the PMPI shim (LD_PRELOAD=libcoll_mpi.so), against the same
# program on plain Open MPI - coll/tuned (its default) and coll/han
# (--mca coll_han_priority 100). compare.sh times libcoll's native calls
# beside MPI's in one process; this one times only the MPI column, whose
# calls the shim serves in the "shim" runs, so what it measures is what an
# unmodified MPI program sees, the shim's own cost and libcoll's barrier
# between calls included.
#
# REPEATS times, for every rank count, one run per contender (shim, tuned,
# han), the contenders taking turns in an order that rotates from repeat to
# repeat, so that a change of the machine's load falls on all of them. Per
# collective, rank count and size it prints a markdown table: each
# contender's median latency (us), the best peer (the faster of tuned and
# han by median), and the ratio shim / best peer: the median over the
# repeats of (shim's run / the faster peer's run of the same repeat), with
# the least and the greatest such ratio (the spread), and the median of
# libcoll's native call in the shim runs (libcoll's own column of the
# same program: the schedules without the shim). A change is tried in the
# same alternation as contender shim-new: the shim with the knobs of
# --env (COLL_REDUCE_ALGO=linear ...), its ratio in a column of its own.
# Writes OUTDIR/raw/CONTENDER/npN-runR.{csv,txt}, OUTDIR/summary.csv and
# OUTDIR/summary.md.
#
#   bench/shim-compare.sh [--build DIR] [--np "4 3"] [--repeats N]
#                         [--sizes MIN:MAX] [--iters N] [--out DIR]
#                         [--contenders "shim tuned han"] [--env VAR=VALUE]...
#                         [--transport shm|tcp] [--summarize]
#                         [-- coll_bench_mpi options]
# Defaults: build, np 4, 5 repeats, 4:4096, 1000 iterations, -b all -c
# (every collective, every result checked), OUTDIR
# bench/results/shim-YYYY-MM-DD. --env VAR=VALUE is exported to the ranks
# of shim-new only (a libcoll knob: COLL_SCATTERV_ALGO=..., to try a
# change against the shim as it is).
# --summarize: no runs; the table made again from OUTDIR/raw.
# --transport tcp: every pair over tcp loopback, libcoll's
# (COLL_TRANSPORT=tcp in the shim runs) and Open MPI's (--mca btl
# self,tcp, in every run: the shim runs' MPI_Init and what the shim hands
# to MPI use it too); the default, shm, is --mca btl self,vader.
# mpirun gets --oversubscribe (and, as root, --allow-run-as-root).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=build
rank_counts=4
repeats=5
sizes=4:4096
iters=1000
out=""
contenders="shim tuned han"
transport=shm
summarize_only=0
envs=()
extra=(-b all -c)

usage() { sed -n '2,43s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"; }
die() { echo "shim-compare.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --np) rank_counts=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --iters) iters=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --contenders) contenders=$2; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --summarize) summarize_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[[ -n $out ]] || out=$here/results/shim-$(date -u +%F)
[[ $contenders != *shim-new* || ${#envs[@]} -gt 0 || $summarize_only == 1 ]] ||
  die "shim-new needs --env"
[[ $repeats =~ ^[1-9][0-9]*$ ]] || die "--repeats: '$repeats' is not a positive integer"
# libcoll's transport in the shim runs (nothing: its default, shm here).
shim_transport=""
case $transport in
  shm) btl=self,vader ;;
  tcp) btl=self,tcp shim_transport="-x COLL_TRANSPORT=tcp" ;;
  *) die "--transport: '$transport' is not shm or tcp" ;;
esac
read -r -a contender_list <<< "$contenders"
((${#contender_list[@]})) || die "--contenders: none given"

bench=$build/bench/coll_bench_mpi
shim=$(cd "$build/libcoll_mpi" 2> /dev/null && pwd)/libcoll_mpi.so
run_as_root=()
((EUID == 0)) && run_as_root=(--allow-run-as-root)

# The mpirun arguments that make a contender.
contender_args() {
  case $1 in
    shim) echo "-x LD_PRELOAD=$shim $shim_transport" ;;
    shim-new)
      echo "-x LD_PRELOAD=$shim $shim_transport"
      for e in "${envs[@]}"; do echo "-x $e"; done
      ;;
    tuned) ;;
    han) echo "--mca coll_han_priority 100" ;;
    *) die "unknown contender '$1' (shim, shim-new, tuned, han)" ;;
  esac
}

if ((summarize_only == 0)); then
  [[ -x $bench ]] || die "no $bench: configure with Open MPI found and build"
  [[ -e $shim ]] || die "no $shim: build libcoll_mpi"
  command -v mpirun > /dev/null || die "mpirun not found (Debian: openmpi-bin)"
  for c in "${contender_list[@]}"; do
    contender_args "$c" > /dev/null
    mkdir -p "$out/raw/$c"
    rm -f "$out/raw/$c"/*.csv "$out/raw/$c"/*.txt
  done
  for ((repeat = 1; repeat <= repeats; repeat++)); do
    for np in $rank_counts; do
      for ((turn = 0; turn < ${#contender_list[@]}; turn++)); do
        c=${contender_list[(repeat + turn) % ${#contender_list[@]}]}
        read -r -a args <<< "$(contender_args "$c" | tr '\n' ' ')"
        run=$out/raw/$c/np$np-run$repeat
        echo "shim-compare.sh: run $repeat/$repeats, np $np, $c" >&2
        mpirun "${run_as_root[@]}" --oversubscribe -np "$np" --mca btl "$btl" "${args[@]}" \
          "$bench" -m "$sizes" -i "$iters" --csv "$run.csv" "${extra[@]}" > "$run.txt" 2>&1 ||
          die "coll_bench_mpi failed at np $np, $c (output in $run.txt)"
      done
    done
  done
fi

# The MPI column (library "mpi") of every run: contender from the folder,
# repeat from the name. The native libcoll column of the shim runs too.
for c in "${contender_list[@]}"; do
  compgen -G "$out/raw/$c/*.csv" > /dev/null || die "no run of $c in $out/raw/$c"
done
awk -F, -f "$here/median.awk" -f "$here/shim-summary.awk" -v contenders="$contenders" -v summary="$out/summary.csv" \
  $(for c in "${contender_list[@]}"; do ls "$out/raw/$c"/*.csv; done) | tee "$out/summary.md"
echo "shim-compare.sh: wrote $out/summary.md, $out/summary.csv and $out/raw/" >&2
