#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test;
# then libcoll installed (meson install --destdir, and the Debian packages
# installed into the system and removed again: scripts/package-test.sh);
# then the libFuzzer targets run (scripts/fuzz.sh); then everything built
# with clang under AddressSanitizer + UndefinedBehaviorSanitizer and the
# suite (less hosts, slurm, bench-mpi, mp-np8) run, and the threads suite
# with ThreadSanitizer (gcc); then the RDMA suite on Soft-RoCE inside a VM
# (tests/rdma). Every build here has -Dwerror=true (scripts/build.sh).
# .ci/run calls exactly this script.
#   COLL_TEST_SKIP_PACKAGE=1   skip the install and package checks
#   COLL_TEST_SKIP_CLANG=1     skip the fuzzers
#   COLL_TEST_SKIP_SANITIZE=1  skip the sanitizer builds (and with them clang)
#   COLL_TEST_SKIP_RDMA=1      skip the RDMA VM suite
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

stage_start=$SECONDS
stage_done() { echo "== $1: $((SECONDS - stage_start)) s"; stage_start=$SECONDS; }

echo "== build and test (plain)"
./scripts/build.sh build
meson test -C build --print-errorlogs --num-processes 1
stage_done "plain"

if [ "${COLL_TEST_SKIP_PACKAGE:-0}" != 1 ]; then
  echo "== install: meson install --destdir, Debian packages"
  ./scripts/package-test.sh build
  stage_done "install"
fi

if [ "${COLL_TEST_SKIP_CLANG:-0}" != 1 ]; then
  # The parsers strangers and careless users reach, 20 s each (a longer
  # run: scripts/fuzz.sh 3600).
  echo "== fuzz (libFuzzer, ASan + UBSan)"
  ./scripts/fuzz.sh 20
  stage_done "fuzz"
fi

if [ "${COLL_TEST_SKIP_SANITIZE:-0}" != 1 ]; then
  # The second compiler and the sanitizers in one build: clang, warning-free
  # with -Werror, its code generation under every suite below. With clang
  # because gcc 12's -fsanitize=undefined makes compiling 3-5x slower
  # (tests/collrun/launcher_test.cpp: 23 s plain, 114 s gcc ASan+UBSan,
  # 29 s clang ASan+UBSan): gcc's sanitizer build and a separate clang build
  # took .ci/run past its 90 minutes (2026-12-03, sanitizer stage 2660 s).
  echo "== build and test (clang, ASan + UBSan)"
  # Without the torch backend (-Dtorch=disabled; its suite says it is
  # skipped): libtorch is not instrumented, and an ASan runtime loaded into
  # python3 under the extension is not a test of libcoll.
  # (build.sh passes options only when it sets a folder up: an older
  # build-sanitize is switched here.)
  [ ! -f build-sanitize/build.ninja ] || meson configure build-sanitize -Dtorch=disabled
  CC=clang CXX=clang++ ./scripts/build.sh build-sanitize -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbench=true -Dtorch=disabled
  # Every suite but those that run a whole launcher or foreign MPI around
  # code the other suites run too (hosts: network namespaces; slurm: the
  # daemons; bench-mpi: the side-by-side benchmarks) and the np 8 runs of
  # the collective suite (mp-np8: 8 ranks on 2 cores; np 1-5 run), for
  # time (above). Also for time (2026-12-06: the stage took 2245 s of
  # .ci/run's 4654 s): the forced-algorithm runs at np 5 and 6 (mp-wide:
  # the same code runs forced at np 3 and 7 and by default at np 5), MPICH's
  # suite (MPICH's own code around the collective suite that runs here
  # anyway) and the plain-Open-MPI references of the shim's tests
  # (reference: no libcoll in them) - about 600 s.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C build-sanitize --print-errorlogs --num-processes 1 --timeout-multiplier 3 \
    --no-suite hosts --no-suite slurm --no-suite bench-mpi --no-suite mp-np8 \
    --no-suite mp-wide --no-suite mpich --no-suite reference
  stage_done "sanitize"
fi

if [ "${COLL_TEST_SKIP_SANITIZE:-0}" != 1 ]; then
  # Threads meet in the progress engine, the transport lock and the handle
  # tables: the threads suite under ThreadSanitizer.
  # Only what the threads suite runs is built (the library, collrun, and
  # the two test programs): the whole tree under TSan took most of this
  # stage's time for six tests. --no-rebuild keeps meson test from building
  # the rest; a new test in the threads suite adds its program here.
  echo "== build and test (TSan: threads)"
  [ -f build-tsan/build.ninja ] ||
    meson setup build-tsan -Dwerror=true -Db_sanitize=thread -Db_lundef=false -Dbench=false \
      -Dtorch=disabled > /dev/null
  ninja -C build-tsan tests/unit/unit_regcache_test tests/mp/mp_threads libcoll/launcher/collrun \
    > /dev/null
  TSAN_OPTIONS=halt_on_error=1:exitcode=66 \
    meson test -C build-tsan --no-rebuild --print-errorlogs --num-processes 1 \
    --timeout-multiplier 3 --suite threads
  stage_done "tsan"
fi

if [ "${COLL_TEST_SKIP_RDMA:-0}" != 1 ]; then
  echo "== RDMA suite (Soft-RoCE in a VM)"
  tests/rdma/run-rdma-suite.sh build
  stage_done "rdma"
fi
echo "== all tests passed"
