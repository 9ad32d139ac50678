#!/usr/bin/env bash
# scripts/build.sh [BUILD_DIR [meson options...]]: configure (once) and build.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null
