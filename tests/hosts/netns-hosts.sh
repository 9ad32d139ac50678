# netns-hosts.sh: pretend hosts made of network namespaces, for
# hosts_test.sh and bench/netns-compare.sh (sourced; POSIX sh; root). Its
# variables are all netns_*, so that it sets none of the caller's.
#
#   netns_hosts_up PREFIX X [Y ...]   namespaces PREFIX-X, PREFIX-Y, ... with
#                                     lo and eth0 (10.77.0.1, .2, ... /24),
#                                     the eth0s joined by a bridge in
#                                     PREFIX-br; /etc/netns/PREFIX-X/hosts
#                                     names them all, so that a program run
#                                     in PREFIX-X by `ip netns exec` finds
#                                     the others by name (and PREFIX-X is
#                                     its own host). Nothing is added to the
#                                     root namespace's network. Returns 1
#                                     with the failing command and its words
#                                     in $netns_error.
#   netns_hosts_down PREFIX X [Y ...] kills what runs in them and removes
#                                     them and their /etc/netns entries.
netns_made_etc=no

netns_run() {
  netns_error=$("$@" 2>&1) || {
    netns_error="$* : $netns_error"
    return 1
  }
}

netns_hosts_up() {
  netns_prefix=$1
  shift
  netns_run ip netns add "${netns_prefix}-br" || return 1
  netns_run ip -n "${netns_prefix}-br" link add br0 type bridge || return 1
  netns_run ip -n "${netns_prefix}-br" link set br0 up || return 1
  netns_number=1
  netns_names=""
  for netns_host in "$@"; do
    netns_ns=${netns_prefix}-$netns_host
    netns_run ip netns add "$netns_ns" || return 1
    netns_run ip -n "${netns_prefix}-br" link add "port$netns_number" type veth \
      peer name eth0 netns "$netns_ns" || return 1
    netns_run ip -n "${netns_prefix}-br" link set "port$netns_number" master br0 || return 1
    netns_run ip -n "${netns_prefix}-br" link set "port$netns_number" up || return 1
    netns_run ip -n "$netns_ns" link set lo up || return 1
    netns_run ip -n "$netns_ns" addr add "10.77.0.$netns_number/24" dev eth0 || return 1
    netns_run ip -n "$netns_ns" link set eth0 up || return 1
    netns_names="${netns_names}10.77.0.$netns_number $netns_ns
"
    netns_number=$((netns_number + 1))
  done
  [ -d /etc/netns ] || netns_made_etc=yes
  netns_run mkdir -p "/etc/netns/${netns_prefix}-$1" || return 1
  printf '127.0.0.1 localhost\n%s' "$netns_names" >"/etc/netns/${netns_prefix}-$1/hosts" || {
    netns_error="cannot write /etc/netns/${netns_prefix}-$1/hosts"
    return 1
  }
}

netns_hosts_down() {
  netns_prefix=$1
  shift
  for netns_ns in $(for netns_host in "$@"; do echo "${netns_prefix}-$netns_host"; done) \
    "${netns_prefix}-br"; do
    for netns_pid in $(ip netns pids "$netns_ns" 2>/dev/null); do
      kill -9 "$netns_pid" 2>/dev/null
    done
    ip netns del "$netns_ns" 2>/dev/null
    rm -rf "/etc/netns/$netns_ns"
  done
  if [ "$netns_made_etc" = yes ]; then rmdir /etc/netns 2>/dev/null; fi
  return 0
}
