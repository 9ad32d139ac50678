#!/bin/sh
# fake_hosts.sh PER_HOST PROGRAM [ARGS...]: runs PROGRAM as if rank r (of
# collrun's COLL_RANK) lived on host r / PER_HOST. libcoll takes ranks with
# equal COLL_HOST_ID for one host: shared memory within a pretend host, tcp
# between them (the shm+tcp transport), as across real ones.
per=$1
shift
case $per in '' | *[!0-9]* | 0) echo "fake_hosts.sh: PER_HOST '$per'" >&2; exit 2 ;; esac
COLL_HOST_ID=fake-host-$((COLL_RANK / per)) exec "$@"
