#!/bin/sh
# fake_ssh_agent.sh HOST COMMAND: like fake_agent.sh, but closer to ssh in
# what signals do: the "remote" command runs in a session of its own, so a
# signal to this agent (collrun ending the job) does not reach it; it only
# learns from its stdin, collrun's lifeline, that the job is over. The agent
# ends when the command ends, as ssh does.
shift
cd /  # as ssh starts in the home directory
exec 4<&0
setsid env -i PATH=/usr/local/bin:/usr/bin:/bin /bin/sh -c "$*" <&4 4<&- &
wait $!
