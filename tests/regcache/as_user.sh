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
# Exits 77 (meson's "skipped") when setpriv is missing, or when uid 65534
# cannot execute PROGRAM (a build tree under a directory only root may
# enter, such as /root).
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

if ! as_nobody test -x "$1"; then
  echo "as_user.sh: uid 65534 cannot execute $1 (is every directory above it" \
    "searchable by others?): skipped" >&2
  exit 77
fi
if ! as_nobody test -w /dev/shm; then
  echo "as_user.sh: uid 65534 cannot write to /dev/shm: skipped" >&2
  exit 77
fi
echo "as_user.sh: running as uid 65534, ulimit -l $(as_nobody sh -c 'ulimit -l')" >&2
exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
