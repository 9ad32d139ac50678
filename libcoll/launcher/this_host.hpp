// What collrun knows of the machine it runs on: which host names of a -H
// or hostfile list are this machine (their ranks are forked, not started
// through the launch agent), and which address remote ranks can reach it
// at.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace collrun {

struct ThisHostFacts {
  std::string host_name;               // gethostname()
  std::vector<std::string> addresses;  // of every interface that is up, canonical text
  std::string etc_hosts;               // the contents of /etc/hosts

  static ThisHostFacts of_this_machine();
};

// True for "localhost", a loopback address (127.x.y.z, ::1), this
// machine's host name (also its short or full form), one of its interface
// addresses, or a name that /etc/hosts maps to one of those. Names are
// not looked up in DNS: the answer never waits on the network. A name
// with "user@" is never local (it asks for another login).
bool is_local_host(std::string_view name, const ThisHostFacts& facts);

// The first IPv4 address of an interface that is up and not loopback, in
// getifaddrs order (the choice the tcp transport makes too), or nullopt.
std::optional<std::string> first_non_loopback_ipv4();

}  // namespace collrun
