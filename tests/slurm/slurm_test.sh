#!/usr/bin/env bash
# libcoll under Slurm's srun --mpi=pmix (and --mpi=pmi2, through the PMI-1
# bootstrap), on a one-machine Slurm that this
# test starts and always stops (scripts/slurm-local.sh): each job's ranks
# must bootstrap through PMIx (launch_expect.sh checks every rank) and get
# correct results.
#
# usage: slurm_test.sh SLURM_LOCAL LAUNCH_EXPECT LAUNCH_CHECK MP_COLLECTIVES
#                      C_RANDOM [COMPARE_TEST [COMM_TEST [PMPI_TEST SHIM]]]
# Exits 77 (skipped) only when Slurm or munge is not installed.
set -euo pipefail

slurm_local=$1
launch_expect=$2
launch_check=$3
mp_collectives=$4
c_random=$5
compare_test=${6:-}
comm_test=${7:-}
pmpi_test=${8:-}
shim=${9:-}

status=0
"$slurm_local" available || status=$?
if [ "$status" -eq 77 ]; then
  echo "SKIP: Slurm is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
[ "$status" -eq 0 ] || exit "$status"

work=$(mktemp -d "${TMPDIR:-/tmp}/coll-slurm-XXXXXX")
cleanup() {
  "$slurm_local" stop "$work/slurm" || echo "FAIL: slurm-local.sh stop left processes" >&2
  rm -rf "$work"
}
# meson ends a test that runs too long with SIGTERM and, half a second
# later, SIGKILL to its process group: the daemons (in sessions of their
# own) are then stopped by a detached stop that outlives this script.
interrupted() {
  trap - EXIT
  # shellcheck disable=SC2016  # expanded by the inner bash, from its arguments
  setsid bash -c '"$0" stop "$1/slurm"; rm -rf "$1"' "$slurm_local" "$work" \
    < /dev/null > /dev/null 2>&1 &
  exit 1
}
trap cleanup EXIT
trap interrupted INT TERM

echo "== starting Slurm in $work/slurm"
conf=$("$slurm_local" start "$work/slurm")
export "${conf?}"  # SLURM_CONF=...
echo "$conf"

echo "== srun --mpi=list"
srun --mpi=list 2>&1 | tee "$work/mpi-list"
if ! grep -qw pmix "$work/mpi-list"; then
  echo "FAIL: this Slurm has no PMIx plugin (Debian: slurm-wlm-basic-plugins' mpi_pmix_v4.so, with libpmix2)" >&2
  exit 1
fi

# Bounded twice: srun's --time (minutes) ends the job in Slurm, and
# launch_expect's --timeout ends srun.
srun_pmix=(srun --mpi=pmix --nodes=1 --time=3 --kill-on-bad-exit=1)
# srun passes the whole environment to the tasks; GoogleTest gets no
# terminal under srun, but say so anyway.
export GTEST_COLOR=no

failed=0
run() {
  echo "== $*"
  if ! "$launch_expect" --timeout 150 "$@"; then
    failed=1
  fi
}

run --ranks 3 --expect '^launch_check rank 0 of 3: bootstrap pmix, transport [a-z]+: ok$' \
  -- "${srun_pmix[@]}" -n 3 "$launch_check" pmix 3
run --ranks 3 --expect '^\[  PASSED  \] [0-9]+ tests' \
  -- "${srun_pmix[@]}" -n 3 "$mp_collectives"
# The tcp transport under srun: its connections prove the job secret that
# rank 0 made and PMIx's key-value store carried (a rank without it could
# not connect, and the job would time out).
COLL_TRANSPORT=tcp run --ranks 3 \
  --expect '^launch_check rank 0 of 3: bootstrap pmix, transport tcp: ok$' \
  -- "${srun_pmix[@]}" -n 3 "$launch_check" pmix 3
run --ranks 3 --expect '^c_random rank 0 of 3: .* 0 errors$' \
  -- "${srun_pmix[@]}" -n 3 "$c_random"
if [ -n "$comm_test" ]; then
  run --ranks 3 --expect '^comm_test: all checks passed at np 3$' \
    -- "${srun_pmix[@]}" -n 3 "$comm_test" 100
fi
if [ -n "$compare_test" ]; then
  # Open MPI launched directly by srun (its PMIx client, like libcoll's),
  # set up as mpirun sets it up in tests/ompi: the AVX op component left
  # out, on-node transports only. Slurm's node announces more CPUs than
  # the machine has, so Open MPI would not know it is oversubscribed and
  # would spin without yielding (4 ranks on 2 cores: 10x slower).
  run --ranks 4 --expect '^\[  PASSED  \] [0-9]+ tests' \
    -- env OMPI_MCA_op='^avx' OMPI_MCA_btl='self,vader' OMPI_MCA_btl_vader_single_copy_mechanism=none \
    OMPI_MCA_mpi_yield_when_idle=1 "${srun_pmix[@]}" -n 4 "$compare_test"
fi
# Slurm's pmi2 plugin also serves the PMI-1 wire protocol that MPICH's
# Hydra speaks: libcoll's PMI-1 bootstrap joins the job there (and says
# finalize at exit, or Slurm would end the job as it ends a task that
# vanished).
if grep -qw pmi2 "$work/mpi-list"; then
  srun_pmi2=(srun --mpi=pmi2 --nodes=1 --time=3 --kill-on-bad-exit=1)
  run --ranks 3 --bootstrap pmi --expect '^launch_check rank 0 of 3: bootstrap pmi, transport [a-z]+: ok$' \
    -- "${srun_pmi2[@]}" -n 3 "$launch_check" pmi 3
  run --ranks 3 --bootstrap pmi --expect '^\[  PASSED  \] [0-9]+ tests' \
    -- "${srun_pmi2[@]}" -n 3 "$mp_collectives"
fi
if [ -n "$pmpi_test" ] && [ -n "$shim" ]; then
  # The PMPI shim in an srun job: an MPI program (Open MPI's PMIx client)
  # with libcoll_mpi.so preloaded into the tasks, libcoll bootstrapping from
  # the same PMIx server; set up as above for Open MPI.
  run --ranks 3 --expect '^pmpi_test: np 3, shim loaded, active$' \
    --expect '^pmpi_test: all checks passed at np 3$' \
    --expect '^libcoll_mpi: MPI_Allreduce: [1-9][0-9]* served' \
    --expect '^libcoll_mpi: MPI_Ibcast: [1-9][0-9]* served' \
    -- env OMPI_MCA_op='^avx' OMPI_MCA_btl='self,vader' OMPI_MCA_btl_vader_single_copy_mechanism=none \
    OMPI_MCA_mpi_yield_when_idle=1 COLL_MPI_STATS=1 PMPI_TEST_EXPECT_SHIM=1 \
    "${srun_pmix[@]}" --export="ALL,LD_PRELOAD=$shim" -n 3 "$pmpi_test"
fi

if [ "$failed" -ne 0 ]; then
  echo "FAIL: a job under srun failed (see above); Slurm logs:" >&2
  tail -n 30 "$work"/slurm/log/slurmd.log >&2 || true
  exit 1
fi
echo "ok: every job under srun --mpi=pmix (and --mpi=pmi2) passed"
