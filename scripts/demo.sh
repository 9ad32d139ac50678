#!/usr/bin/env bash
# The demo: install what is missing, build, and print the allreduce and
# broadcast benchmark tables at 4 local ranks. Extra arguments go to the
# benchmark (e.g. -m 4:65536).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh build
exec ./build/libcoll/launcher/collrun -np 4 ./build/bench/coll_bench "$@"
