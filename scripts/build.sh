#!/usr/bin/env bash
# scripts/build.sh [BUILD_DIR [meson options...]]: configure (once) and build.
# A developer's build: warnings are errors (-Dwerror=true; the project's
# defaults, which users and packagers get, leave them warnings). CC and CXX
# pick the compilers when the folder is first configured.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" -Dwerror=true "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
