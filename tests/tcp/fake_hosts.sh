#!/bin/sh
# fake_hosts.sh K PROGRAM [ARGS...]: runs PROGRAM as a rank that pretends to
# live on host "fake<COLL_RANK / K>", so that a job on one machine spans
# several hosts as libcoll sees them (COLL_HOST_ID): K ranks a host.
set -eu
per_host=$1
shift
: "${COLL_RANK:?fake_hosts.sh runs under collrun, which sets COLL_RANK}"
COLL_HOST_ID="fake$((COLL_RANK / per_host))"
export COLL_HOST_ID
exec "$@"
