#!/usr/bin/env bash
# LAMMPS (Debian's lmp, unmodified) through the PMPI shim: the classic
# Lennard-Jones melt (4000 atoms, 250 steps), once under plain Open MPI and
# once with libcoll_mpi.so preloaded. LAMMPS sums its thermodynamics with
# MPI_Allreduce every 50 steps, spreads the input with MPI_Bcast and numbers
# atoms with MPI_Scan. Passes when the thermo table (step, temperature,
# energies, pressure) is the same to the printed digits in both runs and
# COLL_MPI_STATS shows those functions served, none passed to MPI.
#
# usage: lammps_test.sh LAUNCH_EXPECT SHIM NP -- MPIRUN [ARGS...]
# Exits 77 (skipped) where lammps is not installed.
set -euo pipefail
launch_expect=$1
shim=$2
np=$3
shift 4
lmp=$(command -v lmp || true)
if [ -z "$lmp" ]; then
  echo "SKIP: lammps is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/coll-lammps-XXXXXX")
trap 'rm -rf "$work"' EXIT
cat > "$work/in.lj" << 'EOF2'
units           lj
atom_style      atomic
lattice         fcc 0.8442
region          box block 0 10 0 10 0 10
create_box      1 box
create_atoms    1 box
mass            1 1.0
velocity        all create 3.0 87287 loop geom
pair_style      lj/cut 2.5
pair_coeff      1 1 1.0 1.0 2.5
neighbor        0.3 bin
neigh_modify    every 20 delay 0 check no
fix             1 all nve
thermo          50
run             250
EOF2

# The thermo table: the header line and the 6 rows after it.
thermo() { grep -A6 '^ *Step ' "$1"; }

echo "== LAMMPS LJ melt, plain Open MPI, np $np"
(cd "$work" && timeout --kill-after=10 120 "$@" -np "$np" "$lmp" -in in.lj -log plain.log \
  -screen none) > "$work/plain.out" 2>&1 ||
  { cat "$work/plain.out"; echo "FAIL: lmp under plain Open MPI" >&2; exit 1; }
echo "== LAMMPS LJ melt through libcoll_mpi.so, np $np"
(cd "$work" && COLL_MPI_STATS=1 "$launch_expect" --ranks "$np" --timeout 120 \
  --expect '^libcoll_mpi: MPI_Allreduce: [1-9][0-9]* served, 0 passed' \
  --expect '^libcoll_mpi: MPI_Bcast: [1-9][0-9]* served, 0 passed' \
  --expect '^libcoll_mpi: MPI_Scan: [1-9][0-9]* served, 0 passed' \
  -- "$@" -x LD_PRELOAD="$shim" -x COLL_MPI_STATS -np "$np" "$lmp" -in in.lj -log shim.log \
  -screen none) > "$work/shim.out" 2>&1 ||
  { cat "$work/shim.out"; echo "FAIL: lmp through the shim" >&2; exit 1; }
grep -E '^libcoll_mpi: MPI_(Allreduce|Bcast|Barrier|Reduce|Scan):|launch_expect: ok' "$work/shim.out"
thermo "$work/plain.log" > "$work/plain.thermo"
thermo "$work/shim.log" > "$work/shim.thermo"
if [ "$(wc -l < "$work/plain.thermo")" -ne 7 ]; then
  cat "$work/plain.log"
  echo "FAIL: no thermo table in the plain run's log" >&2
  exit 1
fi
cat "$work/shim.thermo"
if ! diff -u "$work/plain.thermo" "$work/shim.thermo"; then
  echo "FAIL: the thermodynamics differ from plain Open MPI's" >&2
  exit 1
fi
echo "ok: LAMMPS np $np: the same thermodynamics through the shim, collectives served"
