#!/bin/sh
# as_user.sh PROGRAM [ARGS...]: runs PROGRAM as an unprivileged user, the
# way a cluster's users run libcoll (no CAP_SYS_ADMIN, no CAP_SYS_PTRACE,
# no CAP_IPC_LOCK): the registration cache must then find its memory
# monitor (userfaultfd with UFFD_USER_MODE_ONLY) without privileges.
#
#  - run as root: raises the locked-memory limit first, as a cluster's
#    /etc/security/limits.conf does for its users (a process without
#    CAP_SYS_RESOURCE cannot raise its hard limit itself), then runs PROGRAM
#    as uid/gid 65534 ("nobody") with no supplementary groups:
#      setpriv --reuid=65534 --regid=65534 --clear-groups
#    AS_USER_MEMLOCK is the limit, in KiB as `ulimit -l` takes it
#    (default: unlimited).
#  - run as another user: that is unprivileged already; execs PROGRAM.
# Exits 77 (meson's "skipped") when setpriv is missing. A build tree uid
# 65534 cannot enter (under /root, say) is run from copies in /tmp.
set -eu

if [ "$#" -lt 1 ]; then
  echo "usage: as_user.sh PROGRAM [ARGS...]" >&2
  exit 2
fi
if ! uid=$(id -u); then
  echo "as_user.sh: id -u failed: skipped" >&2
  exit 77
fi
if [ "$uid" != 0 ]; then
  exec "$@"
fi
if ! command -v setpriv >/dev/null 2>&1; then
  echo "as_user.sh: setpriv (util-linux) not found: skipped" >&2
  exit 77
fi
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

memlock=${AS_USER_MEMLOCK:-unlimited}
# Soft and hard, in the root shell: setpriv and PROGRAM inherit them. A
# root without CAP_SYS_RESOURCE (a container's) cannot raise the hard
# limit either: the user then gets the limits as they are.
if ! (ulimit -l "$memlock") 2>/dev/null; then
  echo "as_user.sh: cannot set ulimit -l $memlock here (no CAP_SYS_RESOURCE?):" \
    "keeping $(ulimit -l) (soft) / $(ulimit -H -l) (hard)" >&2
else
  ulimit -l "$memlock"
fi

# A build tree the user cannot reach (a clone under /root, say): run copies
# instead. Every argument that names a file is copied to a directory the
# user can read, with the shared libraries of the build tree they load
# (found by ldd; LD_LIBRARY_PATH points the copies at them).
if ! as_nobody test -x "$1"; then
  stage=$(mktemp -d /tmp/coll-as-user.XXXXXX)
  chmod 755 "$stage"
  trap 'rm -rf "$stage"' EXIT
  n=0
  for arg in "$@"; do
    if [ -f "$arg" ]; then
      n=$((n + 1))
      mkdir -p "$stage/$n"
      cp -p "$arg" "$stage/$n/"
      for lib in $(ldd "$arg" 2>/dev/null | awk '$3 ~ /^\// {print $3}'); do
        case "$lib" in /usr/* | /lib/* | /lib64/*) ;; *) cp -pL "$lib" "$stage/" ;; esac
      done
      arg="$stage/$n/$(basename "$arg")"
    fi
    set -- "$@" "$arg"
    shift
  done
  chmod -R a+rX "$stage"
  export LD_LIBRARY_PATH="$stage${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "as_user.sh: uid 65534 cannot reach the build tree: running copies from $stage" >&2
  if ! as_nobody test -x "$1"; then
    echo "as_user.sh: uid 65534 cannot execute $1 even from /tmp: skipped" >&2
    exit 77
  fi
fi
if ! as_nobody test -w /dev/shm; then
  echo "as_user.sh: uid 65534 cannot write to /dev/shm: skipped" >&2
  exit 77
fi
echo "as_user.sh: running as uid 65534, ulimit -l $(as_nobody sh -c 'ulimit -l')" >&2
if [ -n "${stage:-}" ]; then
  as_nobody "$@"  # not exec: the trap removes the copies
else
  exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
fi
