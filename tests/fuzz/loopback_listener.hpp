// The fuzz harnesses' own end: one listening socket on 127.0.0.1 for the
// whole run (an ephemeral port), made on first use.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>

namespace fuzz {

struct Listener {
  int fd = -1;
  uint16_t port = 0;
};

inline const Listener& loopback_listener() {
  static const Listener listener = [] {
    Listener l;
    l.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof a;
    ::bind(l.fd, reinterpret_cast<sockaddr*>(&a), n);
    ::listen(l.fd, 16);
    ::getsockname(l.fd, reinterpret_cast<sockaddr*>(&a), &n);
    l.port = ntohs(a.sin_port);
    return l;
  }();
  return listener;
}

}  // namespace fuzz
