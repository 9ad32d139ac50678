#include "this_host.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace collrun {
namespace {

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

std::string_view short_name(std::string_view name) { return name.substr(0, name.find('.')); }

// The canonical text of an address literal (so "127.000.0.1" and
// "::0001" compare right), or nullopt when `text` is not one.
std::optional<std::string> canonical_address(std::string_view text) {
  std::string literal(text);
  char out[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  if (::inet_pton(AF_INET, literal.c_str(), &v4) == 1)
    return ::inet_ntop(AF_INET, &v4, out, sizeof out);
  in6_addr v6{};
  if (::inet_pton(AF_INET6, literal.c_str(), &v6) == 1)
    return ::inet_ntop(AF_INET6, &v6, out, sizeof out);
  return std::nullopt;
}

bool is_this_machines_address(const std::string& canonical, const ThisHostFacts& facts) {
  if (canonical.starts_with("127.") || canonical == "::1") return true;
  return std::find(facts.addresses.begin(), facts.addresses.end(), canonical) !=
         facts.addresses.end();
}

// The addresses /etc/hosts gives `name`.
std::vector<std::string> etc_hosts_addresses(std::string_view name, const std::string& etc_hosts) {
  std::vector<std::string> found;
  std::istringstream lines(etc_hosts);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line.substr(0, line.find('#')));
    std::string address, alias;
    if (!(words >> address)) continue;
    while (words >> alias)
      if (equal_ignoring_case(alias, name)) {
        if (std::optional<std::string> canonical = canonical_address(address))
          found.push_back(*canonical);
        break;
      }
  }
  return found;
}

std::vector<std::string> interface_addresses() {
  std::vector<std::string> addresses;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return addresses;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (i->ifa_addr->sa_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text,
                  sizeof text);
    else if (i->ifa_addr->sa_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, text,
                  sizeof text);
    else
      continue;
    addresses.emplace_back(text);
  }
  ::freeifaddrs(list);
  return addresses;
}

}  // namespace

ThisHostFacts ThisHostFacts::of_this_machine() {
  ThisHostFacts facts;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0) facts.host_name = name;
  facts.addresses = interface_addresses();
  std::ifstream hosts("/etc/hosts");
  std::ostringstream contents;
  contents << hosts.rdbuf();
  facts.etc_hosts = contents.str();
  return facts;
}

bool is_local_host(std::string_view name, const ThisHostFacts& facts) {
  if (name.empty() || name.find('@') != std::string_view::npos) return false;
  if (equal_ignoring_case(name, "localhost")) return true;
  if (std::optional<std::string> canonical = canonical_address(name))
    return is_this_machines_address(*canonical, facts);
  if (!facts.host_name.empty() &&
      (equal_ignoring_case(name, facts.host_name) ||
       equal_ignoring_case(short_name(name), short_name(facts.host_name))))
    return true;
  for (const std::string& address : etc_hosts_addresses(name, facts.etc_hosts))
    if (is_this_machines_address(address, facts)) return true;
  return false;
}

std::optional<std::string> first_non_loopback_ipv4() {
  std::optional<std::string> found;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return found;
  for (ifaddrs* i = list; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    in_addr address = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    if (ntohl(address.s_addr) >> 24 == 127) continue;
    char text[INET_ADDRSTRLEN] = {};
    found = ::inet_ntop(AF_INET, &address, text, sizeof text);
  }
  ::freeifaddrs(list);
  return found;
}

}  // namespace collrun
