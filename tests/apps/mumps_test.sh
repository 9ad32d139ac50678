#!/usr/bin/env bash
# MUMPS (Debian's mumps-test: the simpletest drivers of the sparse direct
# solver, Fortran, unmodified) through the PMPI shim: each solves a 5 x 5
# system whose solution is 1 2 3 4 5, once under plain Open MPI and once with
# libcoll_mpi.so preloaded. MUMPS calls MPI from Fortran (mpi_allreduce_,
# mpi_bcast_, mpi_comm_split_, ...), so this exercises the shim's Fortran
# entry points in a real code. Passes when both runs solve the system (within
# 1e-9) and COLL_MPI_STATS shows MPI_Allreduce and MPI_Bcast served.
#
# usage: mumps_test.sh LAUNCH_EXPECT SHIM NP -- MPIRUN [ARGS...]
# Exits 77 (skipped) where mumps-test is not installed.
set -euo pipefail
launch_expect=$1
shim=$2
np=$3
shift 4
dir=/usr/lib/mumps
if [ ! -x "$dir/dsimpletest" ]; then
  echo "SKIP: mumps-test is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/coll-mumps-XXXXXX")
trap 'rm -rf "$work"' EXIT

# The numbers after "Solution is" must be 1 2 3 4 5 (complex: imaginary 0).
solved() {
  awk -v complex="$2" '
    /Solution is/ { found = 1; line = $0; sub(/.*Solution is/, "", line)
      gsub(/[(),]/, " ", line); n = split(line, v, " ")
      want = complex ? 10 : 5
      if (n != want) { bad = 1; next }
      for (i = 1; i <= n; i++) {
        x = complex ? ((i % 2) ? (i + 1) / 2 : 0) : i
        d = v[i] - x; if (d < 0) d = -d
        if (d > 1e-9) bad = 1
      } }
    END { exit !(found && !bad) }' "$1"
}

failed=0
for t in d z; do
  input=$dir/input_simpletest_real
  complex=0
  if [ "$t" = z ]; then
    input=$dir/input_simpletest_cmplx
    complex=1
  fi
  echo "== ${t}simpletest, plain Open MPI, np $np"
  # MUMPS reads the problem on rank 0's standard input.
  timeout --kill-after=10 120 "$@" -np "$np" "$dir/${t}simpletest" < "$input" > "$work/$t.plain" 2>&1 || true
  grep 'Solution is' "$work/$t.plain" || true
  if ! solved "$work/$t.plain" "$complex"; then
    cat "$work/$t.plain"
    echo "FAIL: ${t}simpletest under plain Open MPI" >&2
    failed=1
    continue
  fi
  echo "== ${t}simpletest through libcoll_mpi.so, np $np"
  # launch_expect runs the job in the background (stdin /dev/null): the
  # input goes through a shell.
  COLL_MPI_STATS=1 "$launch_expect" --ranks "$np" --timeout 120 \
    --expect '^libcoll_mpi: MPI_Allreduce: [1-9][0-9]* served' \
    --expect '^libcoll_mpi: MPI_Bcast: [1-9][0-9]* served' \
    -- sh -c 'input=$1; shift; exec "$@" < "$input"' sh "$input" \
    "$@" -x LD_PRELOAD="$shim" -x COLL_MPI_STATS -np "$np" "$dir/${t}simpletest" > "$work/$t.shim" 2>&1 ||
    { cat "$work/$t.shim"; echo "FAIL: ${t}simpletest through the shim" >&2; failed=1; continue; }
  grep -E 'Solution is|^libcoll_mpi: MPI_(Allreduce|Bcast|Barrier):|launch_expect: ok' "$work/$t.shim"
  if ! solved "$work/$t.shim" "$complex"; then
    echo "FAIL: ${t}simpletest through the shim: wrong solution" >&2
    failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "ok: MUMPS np $np: solved through the shim, collectives served"
