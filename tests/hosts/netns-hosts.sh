# netns-hosts.sh: pretend hosts made of network namespaces, for
# hosts_test.sh and bench/netns-compare.sh (sourced; POSIX sh; root).
#
#   netns_hosts_up PREFIX X [Y ...]   namespaces PREFIX_X, PREFIX_Y, ... with
#                                     lo and eth0 (10.77.0.1, .2, ... /24),
#                                     the eth0s joined by a bridge in
#                                     PREFIX_br; /etc/netns/PREFIX_X/hosts
#                                     names them all, so that a program run
#                                     in PREFIX_X by `ip netns exec` finds
#                                     the others by name (and PREFIX_X is
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
  prefix=$1
  shift
  netns_run ip netns add "${prefix}_br" || return 1
  netns_run ip -n "${prefix}_br" link add br0 type bridge || return 1
  netns_run ip -n "${prefix}_br" link set br0 up || return 1
  number=1
  names=""
  for host in "$@"; do
    ns=${prefix}_$host
    netns_run ip netns add "$ns" || return 1
    netns_run ip -n "${prefix}_br" link add "port$number" type veth peer name eth0 netns "$ns" ||
      return 1
    netns_run ip -n "${prefix}_br" link set "port$number" master br0 || return 1
    netns_run ip -n "${prefix}_br" link set "port$number" up || return 1
    netns_run ip -n "$ns" link set lo up || return 1
    netns_run ip -n "$ns" addr add "10.77.0.$number/24" dev eth0 || return 1
    netns_run ip -n "$ns" link set eth0 up || return 1
    names="${names}10.77.0.$number $ns
"
    number=$((number + 1))
  done
  [ -d /etc/netns ] || netns_made_etc=yes
  netns_run mkdir -p "/etc/netns/${prefix}_$1" || return 1
  printf '127.0.0.1 localhost\n%s' "$names" >"/etc/netns/${prefix}_$1/hosts" || {
    netns_error="cannot write /etc/netns/${prefix}_$1/hosts"
    return 1
  }
}

netns_hosts_down() {
  prefix=$1
  shift
  for ns in $(for host in "$@"; do echo "${prefix}_$host"; done) "${prefix}_br"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      kill -9 "$pid" 2>/dev/null
    done
    ip netns del "$ns" 2>/dev/null
    rm -rf "/etc/netns/$ns"
  done
  if [ "$netns_made_etc" = yes ]; then rmdir /etc/netns 2>/dev/null; fi
  return 0
}
