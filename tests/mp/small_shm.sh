#!/usr/bin/env bash
# Runs COMMAND... with /dev/shm replaced by a tmpfs of SIZE, in a mount
# namespace of its own (the machine's /dev/shm is untouched): the small
# /dev/shm of a container. Needs root (or CAP_SYS_ADMIN) for unshare -m and
# mount; exits 77 (skipped) where it cannot have them.
#
#   small_shm.sh SIZE COMMAND [ARGS...]      e.g. small_shm.sh 64m collrun -np 8 prog
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: small_shm.sh SIZE COMMAND [ARGS...]" >&2; exit 2; }
size=$1
shift
if ! unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm' 2> /dev/null; then
  echo "small_shm.sh: cannot mount a tmpfs on /dev/shm in a mount namespace here (needs root): skipped" >&2
  exit 77
fi
# shellcheck disable=SC2016  # $1 and $@ are the inner shell's
exec unshare -m bash -c 'mount -t tmpfs -o "size=$1" tmpfs /dev/shm && shift && exec "$@"' \
  _ "$size" "$@"
