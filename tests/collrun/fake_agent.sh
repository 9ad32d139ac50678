#!/bin/sh
# fake_agent.sh HOST COMMAND: a launch agent for collrun's tests that runs
# COMMAND (a /bin/sh command line) on this machine, as if HOST were another
# host reached by ssh: the environment is emptied first (ssh passes none
# on), so that a rank sees only what collrun put on the command line. With
# FAKE_AGENT_LOG set, each call appends HOST to that file.
if [ -n "${FAKE_AGENT_LOG:-}" ]; then
  echo "$1" >>"$FAKE_AGENT_LOG"
fi
shift
cd /  # as ssh starts in the home directory
exec env -i PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c "$*"
