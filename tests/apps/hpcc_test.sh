#!/usr/bin/env bash
# HPC Challenge (Debian's hpcc, unmodified) through the PMPI shim: a tiny
# problem (HPL N=200, so the whole run takes seconds), once under plain Open
# MPI and once with libcoll_mpi.so preloaded. Passes when
#  - both runs end well and report Success=1,
#  - every check hpcc reports (HPL's scaled residual verdict, PTRANS,
#    RandomAccess errors, STREAM validation, FFT, ...) is the same in both,
#  - the shim's COLL_MPI_STATS=1 lines show MPI_Allreduce, MPI_Bcast,
#    MPI_Barrier, MPI_Reduce, MPI_Gather and MPI_Alltoall (MPIFFT, PTRANS)
#    calls served by libcoll, none of the last two passed to MPI (launch_expect.sh also checks that
#    every rank's libcoll bootstrapped through PMIx).
#
# usage: hpcc_test.sh LAUNCH_EXPECT SHIM NP -- MPIRUN [ARGS...]
# Exits 77 (skipped) where hpcc is not installed.
set -euo pipefail
launch_expect=$1
shim=$2
np=$3
shift 4
hpcc=$(command -v hpcc || true)
if [ -z "$hpcc" ]; then
  echo "SKIP: hpcc is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/coll-hpcc-XXXXXX")
trap 'rm -rf "$work"' EXIT
case $np in
  4) p=2 q=2 ;;
  *) p=1 q=$np ;;
esac

# hpcc reads hpccinf.txt from its working directory (HPL's input format).
write_input() {
  cat > "$1/hpccinf.txt" << EOF2
HPLinpack benchmark input file
Innovative Computing Laboratory, University of Tennessee
HPL.out      output file name (if any)
8            device out (6=stdout,7=stderr,file)
1            # of problems sizes (N)
200          Ns
1            # of NBs
32           NBs
0            PMAP process mapping (0=Row-,1=Column-major)
1            # of process grids (P x Q)
$p           Ps
$q           Qs
16.0         threshold
1            # of panel fact
2            PFACTs (0=left, 1=Crout, 2=Right)
1            # of recursive stopping criterium
4            NBMINs (>= 1)
1            # of panels in recursion
2            NDIVs
1            # of recursive panel fact.
1            RFACTs (0=left, 1=Crout, 2=Right)
1            # of broadcast
1            BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)
1            # of lookahead depth
1            DEPTHs (>=0)
2            SWAP (0=bin-exch,1=long,2=mix)
64           swapping threshold
0            L1 in (0=transposed,1=no-transposed) form
0            U  in (0=transposed,1=no-transposed) form
1            Equilibration (0=no,1=yes)
8            memory alignment in double (> 0)
##### This line (no. 32) is ignored (it serves as a separator). ######
0                               Number of additional problem sizes for PTRANS
1200 10000 30000                values of N
0                               number of additional blocking sizes for PTRANS
40 9 8 13 13 20 16 32 64        values of NB
EOF2
}

# The verdicts hpcc reports, without the measured numbers. PTRANS repeats
# its run until a minimum time has passed, so how many verdict lines it
# prints depends on the machine's speed: each distinct verdict once.
checks() {
  awk '
    /^(WALL|CPU) / && / (PASSED|FAILED) / {
      v = "PTRANS " $2 " " $3 " " $4 " " $5 " " $6 " " $7 " " $9
      if (!(v in ptrans)) { ptrans[v] = 1; print v }
      next
    }
    /\|\|Ax-b\|\|.*\.\.\.\.\.\. (PASSED|FAILED)/ { print "HPL residual check", $NF; next }
    /tests completed and (passed|failed) residual checks/ { $1 = $1; print; next }
    /tests skipped because of illegal input values/ { $1 = $1; print; next }
    /^Found [0-9]+ errors in [0-9]+ locations/ { print; next }
    /^Node\(s\) with error/ { print; next }
    /Solution Validates/ { print; next }
    /^(Success|HPL_N|HPL_NB|HPL_nprow|HPL_npcol|CommWorldProcs|PTRANS_n|MPIFFT_N|MPIFFT_Procs)=/ { print; next }
    /^[A-Za-z_]*(Errors|ErrorsFraction)=/ { print; next }
  ' "$1"
}

mkdir "$work/plain" "$work/shim"
write_input "$work/plain"
write_input "$work/shim"

echo "== hpcc, plain Open MPI, np $np"
if ! (cd "$work/plain" && timeout --kill-after=10 150 "$@" -np "$np" "$hpcc") > "$work/plain.log" 2>&1; then
  cat "$work/plain.log"
  echo "FAIL: hpcc under plain Open MPI failed" >&2
  exit 1
fi
echo "== hpcc through libcoll_mpi.so, np $np"
(cd "$work/shim" && COLL_MPI_STATS=1 "$launch_expect" --ranks "$np" --timeout 150 \
  --expect '^libcoll_mpi: MPI_Allreduce: [1-9][0-9]* served, 0 passed' \
  --expect '^libcoll_mpi: MPI_Bcast: [1-9][0-9]* served, 0 passed' \
  --expect '^libcoll_mpi: MPI_Barrier: [1-9][0-9]* served, 0 passed' \
  --expect '^libcoll_mpi: MPI_Alltoall: [1-9][0-9]* served, 0 passed' \
  --expect '^libcoll_mpi: MPI_Reduce: [1-9][0-9]* served, 0 passed' \
  --expect '^libcoll_mpi: MPI_Gather: [1-9][0-9]* served, 0 passed' \
  -- "$@" -x LD_PRELOAD="$shim" -x COLL_MPI_STATS -np "$np" "$hpcc") | tee "$work/shim.log" |
  grep -E '^(libcoll_mpi:|launch_expect)' || true
if ! grep -q '^launch_expect: ok' "$work/shim.log"; then
  cat "$work/shim.log"
  echo "FAIL: hpcc through the shim failed" >&2
  exit 1
fi

checks "$work/plain/hpccoutf.txt" > "$work/plain.checks"
checks "$work/shim/hpccoutf.txt" > "$work/shim.checks"
echo "== checks (plain Open MPI | through the shim)"
paste -d '|' "$work/plain.checks" "$work/shim.checks"
failed=0
if ! grep -qx 'Success=1' "$work/shim.checks" || ! grep -qx 'HPL residual check PASSED' "$work/shim.checks"; then
  echo "FAIL: hpcc through the shim did not succeed" >&2
  failed=1
fi
if ! diff -u "$work/plain.checks" "$work/shim.checks"; then
  echo "FAIL: the checks differ from plain Open MPI's" >&2
  failed=1
fi
echo "== HPL scaled residuals"
grep -h '||Ax-b||.*\.\.\.\.\.\.' "$work/plain/hpccoutf.txt" | sed 's/^/plain: /'
grep -h '||Ax-b||.*\.\.\.\.\.\.' "$work/shim/hpccoutf.txt" | sed 's/^/shim:  /'
[ "$failed" -eq 0 ] || exit 1
echo "ok: hpcc np $np: every check unchanged through the shim"
