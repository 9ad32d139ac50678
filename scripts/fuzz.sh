#!/usr/bin/env bash
# scripts/fuzz.sh [SECONDS]: builds the libFuzzer targets (tests/fuzz) with
# clang, ASan and UBSan (the parsers under test instrumented for coverage:
# tests/fuzz/meson.build), and runs each for SECONDS (default 20: what .ci/run gives them) from its
# seed corpus. New inputs go to a scratch copy, not into the repository; a
# crash, a leak, a sanitizer report or a hang (over 10 s on one input) fails
# the run and leaves the input in the scratch folder, named in the output:
# add it to tests/fuzz/corpus/<target>/ once fixed, so that every later run
# replays it. For a long run: scripts/fuzz.sh 3600.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
dir=build-fuzz
CC=clang CXX=clang++ ./scripts/build.sh "$dir" -Dfuzz=true -Dtests=false -Dbench=false \
  -Dmpi=disabled -Dtorch=disabled -Db_lundef=false
work=$(mktemp -d /tmp/coll-fuzz.XXXXXX)
status=0
for target in fuzz_rendezvous fuzz_collrun_answer fuzz_tcp_frames fuzz_hostfile fuzz_tuning \
    fuzz_pmi_wire; do
  mkdir -p "$work/$target"
  cp tests/fuzz/corpus/"$target"/* "$work/$target/"
  echo "== $target: $seconds s"
  if ! (cd "$work" &&
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$OLDPWD/$dir/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 \
          -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/$target-" \
          "$work/$target" 2>&1 | tail -15); then
    echo "== $target FAILED: the input is in $work (see above)"
    status=1
  fi
done
[ "$status" = 0 ] && rm -rf "$work"
exit "$status"
