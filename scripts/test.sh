#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every test;
# then the same suite built with AddressSanitizer + UndefinedBehaviorSanitizer,
# and the threads suite with ThreadSanitizer;
# then the RDMA suite on Soft-RoCE inside a VM (tests/rdma). .ci/run calls
# exactly this script.
#   COLL_TEST_SKIP_SANITIZE=1  skip the sanitizer build
#   COLL_TEST_SKIP_RDMA=1      skip the RDMA VM suite
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh

echo "== build and test (plain)"
./scripts/build.sh build
meson test -C build --print-errorlogs --num-processes 1

if [ "${COLL_TEST_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== build and test (ASan + UBSan)"
  ./scripts/build.sh build-sanitize -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbench=true
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    meson test -C build-sanitize --print-errorlogs --num-processes 1 --timeout-multiplier 3
fi

if [ "${COLL_TEST_SKIP_SANITIZE:-0}" != 1 ]; then
  # Threads meet in the progress engine, the transport lock and the handle
  # tables: the threads suite under ThreadSanitizer.
  echo "== build and test (TSan: threads)"
  ./scripts/build.sh build-tsan -Db_sanitize=thread -Db_lundef=false -Dbench=false
  TSAN_OPTIONS=halt_on_error=1:exitcode=66 \
    meson test -C build-tsan --print-errorlogs --num-processes 1 --timeout-multiplier 3 \
    --suite threads
fi

if [ "${COLL_TEST_SKIP_RDMA:-0}" != 1 ]; then
  echo "== RDMA suite (Soft-RoCE in a VM)"
  tests/rdma/run-rdma-suite.sh build
fi
echo "== all tests passed"
