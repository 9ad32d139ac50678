#!/usr/bin/env bash
# Installs, from Debian's packages, what libcoll needs to build, test and
# benchmark; installs only what is missing (a no-op on a ready machine).
set -euo pipefail

PKGS=(
  meson ninja-build g++ pkg-config
  clang                                              # the clang build (scripts/test.sh)
  libclang-rt-dev                                    # libFuzzer and the sanitizer runtimes (scripts/fuzz.sh)
  valgrind                                           # memcheck of a job (tests/mp: mp_valgrind_*)
  cmake build-essential dpkg-dev debhelper lintian   # scripts/package-test.sh
  dh-python                                          # the .deb of torch_libcoll (dh-sequence-python3)
  man-db groff-base                                  # man, groff: man/check-man.sh
  libgtest-dev libgmock-dev
  libibverbs-dev librdmacm-dev ibverbs-providers rdma-core
  libhwloc-dev libpmix-dev libpmix2 openmpi-bin libopenmpi-dev
  # MPICH: a second launcher (mpirun.mpich, tests/mpich) and a peer in the
  # benchmark (coll_bench_mpich). Open MPI stays the default mpirun/mpicc:
  # Debian's alternatives rank it higher.
  mpich libmpich-dev
  stress-ng                                          # bench/compare.sh --busy
  slurmctld slurmd slurm-client slurm-wlm-basic-plugins munge
  gnuplot-nox
  # gfortran: the PMPI shim's Fortran tests; hpcc, mumps-test: unmodified MPI
  # applications run through the shim (tests/apps, suite mpi-apps)
  gfortran hpcc mumps-test
  lammps python3-mpi4py                              # LAMMPS, mpi4py through the shim (tests/apps)
  # The torch.distributed backend (torch_libcoll, suite torch): Debian's
  # torch 1.13, its C++ headers and libraries, pybind11 and Python's headers.
  python3-torch libtorch-dev pybind11-dev python3-dev
  qemu-system-x86 busybox-static ibverbs-utils rdmacm-utils perftest iproute2 kmod cpio
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}" >&2
SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
# A machine whose image was made while dpkg ran (an interrupted unattended
# upgrade) refuses every install until the pending packages are configured:
# finish them first (a no-op when nothing is pending).
$SUDO dpkg --configure -a >&2
# apt's lock may be held a while by a periodic apt job: try again a few times.
for attempt in 1 2 3; do
  if $SUDO apt-get update -qq &&
     $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; then
    exit 0
  fi
  echo "install-deps: apt-get failed (attempt $attempt); configuring dpkg and retrying" >&2
  $SUDO dpkg --configure -a >&2 || true
  sleep $((attempt * 10))
done
echo "install-deps: could not install ${missing[*]}" >&2
exit 1
