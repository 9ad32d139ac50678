#!/bin/sh
# netns-agent.sh HOST COMMAND: collrun's launch agent for the network
# namespace test (hosts_test.sh). "Host" HOST is the network namespace of
# that name; COMMAND is a /bin/sh command line, run as ssh would run it on
# a remote host. With NETNS_AGENT_LOG set, each call appends HOST to that
# file, so that the test can tell which hosts went through the agent.
set -eu
host=$1
shift
if [ -n "${NETNS_AGENT_LOG:-}" ]; then
  echo "$host" >>"$NETNS_AGENT_LOG"
fi
exec ip netns exec "$host" /bin/sh -c "$*"
