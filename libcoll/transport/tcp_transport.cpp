// TCP backend: the transport contract over one TCP stream per pair of
// ranks, for nodes without RDMA.
//
// Setup. Each rank listens on an ephemeral port, publishes {token, address,
// port, host} through the bootstrap, connects to every higher rank (its
// listen backlog completes the handshake, so the connects never wait for
// the peer to call accept) and then accepts one connection from every lower
// rank. The first bytes on a connection are a Hello naming the connecting
// rank and quoting the accepting rank's token; a connection that does not
// say exactly that is closed and ignored. The listener is closed once every
// peer is connected: nothing can connect afterwards.
//
// Knobs:
//   COLL_TCP_ADDR=a[,b...]  listen on the first of these IPv4 addresses that
//                           this host has (one list serves every host of a
//                           job), and publish it.
//   COLL_TCP_IFACE=name     listen on that interface's IPv4 address.
//   (neither)               listen on every address; publish the first
//                           non-loopback IPv4 address of the host (or
//                           127.0.0.1 when it has none). Peers on the same
//                           host, in the same network namespace, connect
//                           to 127.0.0.1.
//
// A write is a frame, tcp_wire::FrameHeader plus payload. The TARGET applies
// it, from its progress engine (poll(), run by every wait loop), after
// checking the rkey and the range against its own region table: a bad rkey,
// a range outside the region, or a malformed frame fails the target's
// transport with a message naming the sender and the problem; the target
// tells the sender (an abort frame) and writes nothing. A connection that
// closes, or resets, is a lost peer. Every failure is sticky: poll() reports
// it in an error completion, check_peer() throws it with its message.
//
// Ordering promise: one stream per pair, and the target applies frames in
// stream order, each completely before the next; an 8-byte write to an
// 8-byte aligned address is one release store. So a flag lands after the
// data posted before it.
//
// Sends. post_write hands the whole frame to the kernel before it returns
// (so the source may change at once, and a signaled write is complete at
// return). When the socket is full it waits for room - bounded by the
// timeout - and meanwhile applies incoming frames from every peer, so two
// ranks that send to each other both make progress. Queueing the rest in
// user space instead would leave bytes that only the next library call on
// this rank moves: a peer waiting for them would time out while this rank
// computes between collectives. Only a peer that is not in the library
// holds a sender up, and only until the timeout.
//
// No threads: everything runs in the caller's thread.
#include "transport/tcp_transport.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <string>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/unique_fd.hpp"
#include "env.hpp"
#include "error.hpp"
#include "transport/anonymous_windows.hpp"
#include "transport/host_identity.hpp"

namespace coll {
namespace {

using Clock = std::chrono::steady_clock;
using tcp_wire::Address;
using tcp_wire::FrameHeader;
using tcp_wire::Hello;

// Payloads up to this size are gathered whole before they are applied (an
// 8-byte flag must land as one store, and a frame cut short by a lost peer
// must write nothing); larger ones are copied to their region as they come.
constexpr size_t kWholePayload = 64;
// Received bytes are staged here, so that many small frames cost one recv.
constexpr size_t kStageBytes = 64 * 1024;
// A payload with at least this much still to come skips the stage and is
// received straight into its region.
constexpr size_t kDirectReceive = 16 * 1024;
// recv calls per peer and progress pass: the other peers get their turn.
constexpr int kReceivesPerPass = 16;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int millis_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return int(std::clamp<long long>(left.count(), 0, 100));
}

std::string ip_string(const in_addr& a) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

// Every IPv4 address of an interface that is up, as {interface, address}.
std::vector<std::pair<std::string, in_addr>> interface_addresses() {
  std::vector<std::pair<std::string, in_addr>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    out.emplace_back(i->ifa_name, reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr);
  }
  freeifaddrs(list);
  return out;
}

void set_int_option(int fd, int level, int name, int value) {
  // Tuning only: a kernel without the option still carries the stream.
  (void)setsockopt(fd, level, name, &value, sizeof value);
}

void tune_connection(int fd) {
  // Flags and credits are tiny and latency-bound: no Nagle delay.
  set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  // A peer host that vanishes without a FIN (power, cable) is found by
  // keepalive probes within ~25 s of silence, and reported as lost.
  set_int_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, 10);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, 5);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
}

uint64_t random_token() {
  uint64_t token = 0;
  while (token == 0) {
    if (getrandom(&token, sizeof token, 0) != sizeof token) {
      // No entropy source: the token only keeps strangers out.
      token = uint64_t(Clock::now().time_since_epoch().count()) ^ (uint64_t(getpid()) << 32);
    }
  }
  return token;
}

// Where the bytes of the frame being received go.
enum class Sink { kNone, kWhole, kRegion, kText };

struct Receiver {
  std::unique_ptr<char[]> stage{new char[kStageBytes]};
  size_t begin = 0, end = 0;  // staged, not yet consumed
  FrameHeader header{};
  size_t header_got = 0;
  bool in_payload = false;
  uint64_t payload_got = 0;
  Sink sink = Sink::kNone;
  char whole[kWholePayload];
  std::string text;
};

struct Peer {
  UniqueFd fd;
  bool reach = false;    // connected (this rank's other transport serves it otherwise)
  bool reading = false;  // registered in epoll; false once its stream is broken
  Receiver rx;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(Bootstrap& boot, const TransportOptions& opts, std::vector<bool> reach,
               const RegionEntry* external_regions)
      : rank_(boot.rank()), size_(boot.size()), timeout_s_(opts.timeout_s) {
    if (external_regions) {
      regions_ = external_regions;
    } else {
      own_entries_.reset(new RegionEntry[kMaxRegions]);
      table_ = std::make_unique<RegionTable>(own_entries_.get(), "tcp");
      regions_ = table_->entries();
    }
    peers_.resize(size_t(size_));
    for (int r = 0; r < size_; ++r)
      peers_[size_t(r)].reach = r != rank_ && (reach.empty() || reach[size_t(r)]);
    epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: epoll_create1");
    connect_all(boot);
  }

  const char* name() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool needs_local_registration() const override { return false; }

  // The target applies every write itself, into its own memory: windows
  // are private anonymous memory. A write that arrives for a window after
  // its dereg is refused by the rkey check (and fails the transport), so
  // nothing ever lands in memory that free_window gave back.
  void* alloc_window(size_t bytes) override {
    if (!table_) fail(COLL_ERR_INTERNAL, "tcp transport: windows belong to the shm half of shm+tcp");
    return windows_.alloc(bytes);
  }

  void free_window(void* addr, size_t bytes) override {
    if (!table_ || !windows_.owns(addr, bytes))
      fail(COLL_ERR_INVALID_ARG,
           "tcp transport: free_window(%p, %zu): not a window that alloc_window handed out "
           "(or freed already)",
           addr, bytes);
    const auto a = reinterpret_cast<uintptr_t>(addr);
    const size_t length = AnonymousWindows::page_round(bytes);
    for (uint32_t i = 0; i < kMaxRegions; ++i) {
      const RegionEntry& e = regions_[i];
      const uint32_t rkey = e.rkey.load(std::memory_order_relaxed);
      if (rkey != 0 && e.addr < a + length && a < e.addr + e.length)
        fail(COLL_ERR_INVALID_ARG,
             "tcp transport: free_window(%p, %zu): the window is still registered (rkey 0x%x: "
             "%llu bytes at 0x%llx); dereg it first",
             addr, bytes, rkey, static_cast<unsigned long long>(e.length),
             static_cast<unsigned long long>(e.addr));
    }
    windows_.release(addr);
  }

  MemoryRegion* reg_write(void* addr, size_t length) override {
    if (!table_)
      fail(COLL_ERR_INTERNAL, "tcp transport: registration belongs to the shm half of shm+tcp");
    return table_->add(addr, length, kRegionProcessMemory);
  }

  int dereg(MemoryRegion* mr) override {
    if (!table_) {
      errno = EINVAL;
      return -1;
    }
    return table_->remove(mr);
  }
  void set_writable(MemoryRegion* mr, bool writable) override {
    if (table_) table_->set_open(mr, writable);
  }

  int post_write(int peer, uint64_t context, const void* local_addr, size_t length,
                 MemoryRegion* /*mr: not needed, the bytes are sent before return*/, int flags,
                 uint64_t remote_addr, uint32_t rkey) override {
    if (peer < 0 || peer >= size_ || (length > 0 && local_addr == nullptr) ||
        (peer != rank_ && !peers_[size_t(peer)].reach)) {
      errno = EINVAL;
      return -1;
    }
    // As on a verbs queue pair in the error state, a write to a failed
    // transport is accepted and never lands; poll() reports the failure
    // (with its own status: a lost peer is COLL_ERR_PEER_LOST).
    if (!failed_) {
      if (peer == rank_)
        write_to_self(local_addr, length, remote_addr, rkey);
      else
        send_frame(peer, tcp_wire::kWriteFrame, rkey, remote_addr, local_addr, length);
    }
    if (flags & kWriteSignaled)
      completions_.push_back({context, peer, failed_ ? failure_status_ : 0});
    return 0;
  }

  int poll(Completion* out, int max) override {
    receive_progress();
    int n = 0;
    while (n < max && !completions_.empty()) {
      out[n++] = completions_.front();
      completions_.pop_front();
    }
    // Sticky: once failed, every poll reports it.
    if (n == 0 && max > 0 && failed_) out[n++] = Completion{0, failure_peer_, failure_status_};
    return n;
  }

  void check_peer(int /*peer*/) override {
    // Any failure - a lost peer included - fails the whole transport, and
    // every waiter hears of it: its message names the peer and the cause.
    if (!failed_) receive_progress();
    if (failed_) throw Error(failure_status_, failure_message_);
  }

 private:
  // --- setup ---------------------------------------------------------

  void connect_all(Bootstrap& boot) {
    UniqueFd listener = listen_socket();
    const auto all = boot.allgather(
        std::string(reinterpret_cast<const char*>(&published_), sizeof published_), timeout_s_);
    if (all.size() != size_t(size_))
      fail(COLL_ERR_INTERNAL, "tcp transport: bootstrap returned %zu addresses for %d ranks",
           all.size(), size_);
    std::vector<Address> addresses(all.size());
    for (int r = 0; r < size_; ++r) {
      if (all[size_t(r)].size() != sizeof(Address))
        fail(COLL_ERR_INTERNAL, "tcp transport: rank %d published %zu bytes, expected %zu", r,
             all[size_t(r)].size(), sizeof(Address));
      std::memcpy(&addresses[size_t(r)], all[size_t(r)].data(), sizeof(Address));
      addresses[size_t(r)].ip[sizeof Address::ip - 1] = 0;
      addresses[size_t(r)].host[sizeof Address::host - 1] = 0;
      addresses[size_t(r)].netns[sizeof Address::netns - 1] = 0;
    }
    const auto deadline = deadline_after(timeout_s_);
    for (int q = rank_ + 1; q < size_; ++q)
      if (peers_[size_t(q)].reach) connect_to(q, addresses[size_t(q)], deadline);
    accept_lower_ranks(listener.get(), deadline);
    for (int q = 0; q < size_; ++q) {
      Peer& p = peers_[size_t(q)];
      if (!p.reach) continue;
      tune_connection(p.fd.get());
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = uint32_t(q);
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p.fd.get(), &ev) != 0)
        fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: epoll_ctl");
      p.reading = true;
    }
  }

  // Binds the listening socket as the knobs say and fills published_.
  UniqueFd listen_socket() {
    std::memset(&published_, 0, sizeof published_);  // padding too: it is sent
    published_.token = random_token();
    std::snprintf(published_.host, sizeof published_.host, "%s", host_identity().c_str());
    // "net:[4026531992]": names the network namespace ("" where unreadable).
    (void)readlink("/proc/self/ns/net", published_.netns, sizeof published_.netns - 1);
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: socket");
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    const std::string addr_knob = env_string("COLL_TCP_ADDR");
    const std::string iface_knob = env_string("COLL_TCP_IFACE");
    if (!addr_knob.empty()) {
      bool bound = false;
      for (const std::string& a : env_list("COLL_TCP_ADDR")) {
        if (inet_pton(AF_INET, a.c_str(), &sa.sin_addr) != 1)
          fail(COLL_ERR_INVALID_ARG, "COLL_TCP_ADDR=%s: %s is not an IPv4 address",
               addr_knob.c_str(), a.c_str());
        if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
          bound = true;
          break;
        }
        if (errno != EADDRNOTAVAIL)
          fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: bind to %s", a.c_str());
      }
      if (!bound)
        fail(COLL_ERR_INVALID_ARG, "COLL_TCP_ADDR=%s: rank %d's host has none of these addresses",
             addr_knob.c_str(), rank_);
    } else if (!iface_knob.empty()) {
      std::string known;
      bool found = false;
      for (const auto& [name, a] : interface_addresses()) {
        known += (known.empty() ? "" : ", ") + name;
        if (name == iface_knob && !found) {
          sa.sin_addr = a;
          found = true;
        }
      }
      if (!found)
        fail(COLL_ERR_INVALID_ARG,
             "COLL_TCP_IFACE=%s: no such interface with an IPv4 address on rank %d's host "
             "(there are: %s)",
             iface_knob.c_str(), rank_, known.c_str());
      if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
        fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: bind to %s (COLL_TCP_IFACE=%s)",
                   ip_string(sa.sin_addr).c_str(), iface_knob.c_str());
    } else {
      // The address it announces (the first that is not loopback, else
      // 127.0.0.1), and only that: not every address of the host (issue
      // 15), so that the port is not offered on interfaces the job does not
      // use. Peers on this host reach it there too. Should that bind fail,
      // every address, as before (same-namespace peers then use 127.0.0.1).
      inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
      for (const auto& [name, a] : interface_addresses()) {
        if (ntohl(a.s_addr) >> 24 == 127) continue;  // loopback
        sa.sin_addr = a;
        break;
      }
      if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        const in_addr announced = sa.sin_addr;
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
          fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: bind");
        published_.bound_any = 1;
        sa.sin_addr = announced;
      }
    }
    if (listen(fd.get(), SOMAXCONN) != 0)
      fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: listen");
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0)
      fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: getsockname");
    published_.port = ntohs(bound.sin_port);
    std::snprintf(published_.ip, sizeof published_.ip, "%s", ip_string(sa.sin_addr).c_str());
    return fd;
  }

  void connect_to(int q, const Address& a, Clock::time_point deadline) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(a.port);
    // 127.0.0.1 reaches the peer only from its own network namespace (ranks
    // of one machine in several namespaces pose as several hosts).
    const bool same_netns =
        std::strcmp(a.host, published_.host) == 0 && std::strcmp(a.netns, published_.netns) == 0;
    const char* ip = same_netns && a.bound_any ? "127.0.0.1" : a.ip;
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
      fail(COLL_ERR_INTERNAL, "tcp transport: rank %d published address '%s'", q, ip);
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd) fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: socket");
    int err = 0;
    if (connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        pollfd pfd{fd.get(), POLLOUT, 0};
        for (;;) {
          const int ready = ::poll(&pfd, 1, millis_until(deadline));
          if (ready > 0) break;
          if (ready < 0 && errno != EINTR)
            fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: poll during connect");
          if (Clock::now() >= deadline) break;
        }
        socklen_t len = sizeof err;
        err = ETIMEDOUT;
        if (pfd.revents) getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err != 0)
      fail_errno(err == ETIMEDOUT ? COLL_ERR_TIMEOUT : COLL_ERR_TRANSPORT, err,
                 "tcp transport: rank %d cannot connect to rank %d at %s:%u (firewall? choose "
                 "the network with COLL_TCP_IFACE or COLL_TCP_ADDR)",
                 rank_, q, ip, unsigned(a.port));
    const Hello hello{tcp_wire::kHelloMagic, uint32_t(rank_), uint32_t(size_), a.token};
    size_t sent = 0;
    while (sent < sizeof hello) {
      ssize_t n = send(fd.get(), reinterpret_cast<const char*>(&hello) + sent, sizeof hello - sent,
                       MSG_NOSIGNAL);
      if (n > 0) {
        sent += size_t(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR) && Clock::now() < deadline) {
        pollfd pfd{fd.get(), POLLOUT, 0};
        ::poll(&pfd, 1, millis_until(deadline));
      } else {
        fail_errno(COLL_ERR_PEER_LOST, n < 0 ? errno : EPIPE,
                   "tcp transport: rank %d cannot greet rank %d at %s:%u", rank_, q, ip,
                   unsigned(a.port));
      }
    }
    peers_[size_t(q)].fd = std::move(fd);
  }

  // Accepts until every reachable lower rank has connected and said hello.
  // Connections that do not greet correctly are closed: a port scanner or a
  // stranger must not be able to end the job, nor to pose as a rank.
  void accept_lower_ranks(int listener, Clock::time_point deadline) {
    struct Pending {
      UniqueFd fd;
      Hello hello{};
      size_t got = 0;
    };
    std::vector<Pending> pending;
    int missing = 0;
    for (int q = 0; q < rank_; ++q) missing += peers_[size_t(q)].reach;
    std::string ignored;  // for the timeout message
    while (missing > 0) {
      if (Clock::now() > deadline) {
        std::string ranks;
        for (int q = 0; q < rank_; ++q)
          if (peers_[size_t(q)].reach && !peers_[size_t(q)].fd) {
            // append(), not "x" + std::to_string(): GCC 12 at -O3 warns
            // (-Wrestrict, a false positive) inside that operator+.
            if (!ranks.empty()) ranks += ' ';
            ranks.append(std::to_string(q));
          }
        fail(COLL_ERR_TIMEOUT,
             "tcp transport: rank %d waited %.0f s for connections from rank(s) %s on port %u "
             "(firewall? COLL_TCP_IFACE / COLL_TCP_ADDR)%s%s",
             rank_, timeout_s_, ranks.c_str(), unsigned(published_.port),
             ignored.empty() ? "" : "; ignored: ", ignored.c_str());
      }
      std::vector<pollfd> fds{{listener, POLLIN, 0}};
      for (const Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), millis_until(deadline)) < 0 && errno != EINTR)
        fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: poll while accepting");
      // Greetings first (indices of `fds` match `pending` until it changes).
      for (size_t i = pending.size(); i-- > 0;) {
        if (!fds[i + 1].revents) continue;
        Pending& p = pending[i];
        ssize_t n = recv(p.fd.get(), reinterpret_cast<char*>(&p.hello) + p.got,
                         sizeof(Hello) - p.got, MSG_DONTWAIT);
        std::string why;
        if (n > 0) {
          p.got += size_t(n);
          if (p.got < sizeof(Hello)) continue;
          why = check_hello(p.hello);
          if (why.empty()) {
            peers_[p.hello.rank].fd = std::move(p.fd);
            --missing;
          }
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
          continue;
        } else {
          why = "closed before its hello";
        }
        if (!why.empty()) ignored += (ignored.empty() ? "" : "; ") + why;
        pending.erase(pending.begin() + std::ptrdiff_t(i));
      }
      if (fds[0].revents) {
        int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
          pending.push_back(Pending{UniqueFd(fd)});
        } else if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          fail_errno(COLL_ERR_NO_RESOURCES, errno,
                     "tcp transport: rank %d cannot accept connections (one socket per peer: "
                     "ulimit -n?)",
                     rank_);
        }  // else the connection went away before accept (ECONNABORTED, ...)
      }
    }
  }

  // Empty when the hello comes from a lower rank of this job that has not
  // connected yet; otherwise why it is refused.
  std::string check_hello(const Hello& h) const {
    if (h.magic != tcp_wire::kHelloMagic) return "a connection that is not a libcoll rank";
    if (h.token != published_.token || h.size != uint32_t(size_))
      return strfmt("a connection claiming rank %u with a wrong token (another job?)", h.rank);
    if (h.rank >= uint32_t(rank_) || !peers_[h.rank].reach)
      return strfmt("a connection claiming rank %u, which does not connect to rank %d", h.rank,
                    rank_);
    if (peers_[h.rank].fd) return strfmt("a second connection claiming rank %u", h.rank);
    return "";
  }

  // --- sending -------------------------------------------------------

  // Hands header and payload to the kernel (see "Sends" at the top).
  void send_frame(int peer, uint32_t type, uint32_t rkey, uint64_t remote_addr, const void* payload,
                  size_t length) {
    const FrameHeader header{tcp_wire::kFrameMagic, type, rkey, 0, remote_addr, length};
    iovec iov[2] = {{const_cast<FrameHeader*>(&header), sizeof header},
                    {const_cast<void*>(payload), length}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = length > 0 ? 2 : 1;
    Peer& p = peers_[size_t(peer)];
    Clock::time_point deadline{};
    bool waited = false;
    for (;;) {
      ssize_t n = sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) {
        size_t done = size_t(n);
        while (msg.msg_iovlen > 0 && done >= msg.msg_iov[0].iov_len) {
          done -= msg.msg_iov[0].iov_len;
          ++msg.msg_iov;
          --msg.msg_iovlen;
        }
        if (msg.msg_iovlen == 0) return;
        msg.msg_iov[0].iov_base = static_cast<char*>(msg.msg_iov[0].iov_base) + done;
        msg.msg_iov[0].iov_len -= done;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        lose_peer(peer, strfmt("sending to it failed: %s", std::strerror(errno)));
        return;
      }
      // The socket is full: apply what arrives while the peer drains it.
      if (!waited) {
        deadline = deadline_after(timeout_s_);
        waited = true;
      }
      receive_progress();
      if (failed_) return;
      if (Clock::now() > deadline) {
        mark_failed(COLL_ERR_TIMEOUT, peer,
                    strfmt("rank %d timed out after %.1f s sending to rank %d over tcp: the peer "
                           "does not read (COLL_TIMEOUT=%g): is every rank calling the same "
                           "collective?",
                           rank_, timeout_s_, peer, timeout_s_));
        return;
      }
      pollfd fds[2] = {{p.fd.get(), POLLOUT, 0}, {epoll_.get(), POLLIN, 0}};
      ::poll(fds, 2, 1);
    }
  }

  // A rank writing into its own memory: checked like any incoming write.
  void write_to_self(const void* src, size_t length, uint64_t remote_addr, uint32_t rkey) {
    std::string why = refuse_write(rkey, remote_addr, length);
    if (!why.empty()) {
      mark_failed(COLL_ERR_TRANSPORT, rank_,
                  strfmt("rank %d refused a tcp write from itself: %s", rank_, why.c_str()));
      return;
    }
    apply_write(reinterpret_cast<void*>(remote_addr), src, length);
  }

  // Best effort, never waits: the failed stream may be full or gone.
  void send_abort(int peer, const std::string& text) {
    Peer& p = peers_[size_t(peer)];
    if (!p.fd) return;
    const size_t len = std::min<size_t>(text.size(), tcp_wire::kMaxAbortText);
    const FrameHeader header{tcp_wire::kFrameMagic, tcp_wire::kAbortFrame, 0, 0, 0, len};
    iovec iov[2] = {{const_cast<FrameHeader*>(&header), sizeof header},
                    {const_cast<char*>(text.data()), len}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    (void)sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // --- receiving -----------------------------------------------------

  void receive_progress() {
    if (failed_) return;
    epoll_event events[64];
    int n = epoll_wait(epoll_.get(), events, 64, 0);
    for (int i = 0; i < n && !failed_; ++i) receive_from(int(events[i].data.u32));
  }

  void receive_from(int peer) {
    Peer& p = peers_[size_t(peer)];
    Receiver& rx = p.rx;
    for (int round = 0; round < kReceivesPerPass && p.reading && !failed_; ++round) {
      ssize_t n;
      const uint64_t left = rx.in_payload ? rx.header.length - rx.payload_got : 0;
      if (rx.sink == Sink::kRegion && rx.begin == rx.end && left >= kDirectReceive) {
        // A large payload goes straight into its region.
        if (!still_registered(peer)) return;
        char* dst = reinterpret_cast<char*>(rx.header.remote_addr) + rx.payload_got;
        n = recv(p.fd.get(), dst, size_t(std::min<uint64_t>(left, 1u << 30)), MSG_DONTWAIT);
        if (n > 0) {
          rx.payload_got += uint64_t(n);
          if (rx.payload_got == rx.header.length) end_frame(rx);
          continue;
        }
      } else {
        if (rx.begin == rx.end) rx.begin = rx.end = 0;
        n = recv(p.fd.get(), rx.stage.get() + rx.end, kStageBytes - rx.end, MSG_DONTWAIT);
        if (n > 0) {
          rx.end += size_t(n);
          consume_staged(peer);
          continue;
        }
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0 && (rx.header_got > 0 || rx.in_payload)) {
        const uint64_t got = rx.in_payload ? sizeof(FrameHeader) + rx.payload_got : rx.header_got;
        const uint64_t want =
            rx.in_payload ? sizeof(FrameHeader) + rx.header.length : sizeof(FrameHeader);
        lose_peer(peer, strfmt("its connection closed in the middle of a frame (%llu of %llu "
                               "bytes: truncated)",
                               static_cast<unsigned long long>(got),
                               static_cast<unsigned long long>(want)));
      } else {
        lose_peer(peer, n == 0 ? std::string("its connection closed")
                               : strfmt("its connection failed: %s", std::strerror(errno)));
      }
      return;
    }
  }

  // Parses and applies staged bytes. The stage always ends at a point the
  // parser can resume from: a partial header or payload is kept in rx.
  void consume_staged(int peer) {
    Peer& p = peers_[size_t(peer)];
    Receiver& rx = p.rx;
    while (rx.begin < rx.end && p.reading && !failed_) {
      const size_t avail = rx.end - rx.begin;
      const char* data = rx.stage.get() + rx.begin;
      if (!rx.in_payload) {
        const size_t take = std::min(avail, sizeof(FrameHeader) - rx.header_got);
        std::memcpy(reinterpret_cast<char*>(&rx.header) + rx.header_got, data, take);
        rx.header_got += take;
        rx.begin += take;
        if (rx.header_got == sizeof(FrameHeader)) begin_frame(peer);
        continue;
      }
      const size_t take = size_t(std::min<uint64_t>(avail, rx.header.length - rx.payload_got));
      switch (rx.sink) {
        case Sink::kWhole:
          std::memcpy(rx.whole + rx.payload_got, data, take);
          break;
        case Sink::kText:
          rx.text.append(data, take);
          break;
        case Sink::kRegion:
          if (!still_registered(peer)) return;
          std::memcpy(reinterpret_cast<char*>(rx.header.remote_addr) + rx.payload_got, data, take);
          break;
        case Sink::kNone:
          break;
      }
      rx.payload_got += take;
      rx.begin += take;
      if (rx.payload_got == rx.header.length) finish_frame(peer);
    }
  }

  // A whole header has arrived: check it before a byte of payload lands.
  void begin_frame(int peer) {
    Receiver& rx = peers_[size_t(peer)].rx;
    const FrameHeader& h = rx.header;
    rx.header_got = 0;
    if (h.magic != tcp_wire::kFrameMagic || h.reserved != 0) {
      refuse_frame(peer, strfmt("a malformed frame (magic 0x%08x, reserved %u: not a libcoll "
                                "tcp frame, the stream is corrupt)",
                                h.magic, h.reserved));
      return;
    }
    if (h.type == tcp_wire::kAbortFrame) {
      if (h.length > tcp_wire::kMaxAbortText) {
        refuse_frame(peer, strfmt("a malformed abort frame of %llu bytes",
                                  static_cast<unsigned long long>(h.length)));
        return;
      }
      rx.sink = Sink::kText;
      rx.text.clear();
    } else if (h.type == tcp_wire::kWriteFrame) {
      std::string why = refuse_write(h.rkey, h.remote_addr, h.length);
      if (!why.empty()) {
        refuse_frame(peer, why);
        return;
      }
      rx.sink = h.length <= kWholePayload ? Sink::kWhole : Sink::kRegion;
    } else {
      refuse_frame(peer, strfmt("a malformed frame (unknown type %u)", h.type));
      return;
    }
    rx.in_payload = true;
    rx.payload_got = 0;
    if (h.length == 0) finish_frame(peer);
  }

  void finish_frame(int peer) {
    Receiver& rx = peers_[size_t(peer)].rx;
    const FrameHeader& h = rx.header;
    if (rx.sink == Sink::kWhole) {
      if (!still_registered(peer)) return;
      apply_write(reinterpret_cast<void*>(h.remote_addr), rx.whole, size_t(h.length));
    } else if (rx.sink == Sink::kText) {
      mark_failed(
          COLL_ERR_TRANSPORT, peer,
          strfmt("rank %d refused a tcp write from rank %d: %s", peer, rank_, rx.text.c_str()));
    }
    end_frame(rx);
  }

  static void end_frame(Receiver& rx) {
    rx.in_payload = false;
    rx.payload_got = 0;
    rx.sink = Sink::kNone;
  }

  // A write is applied over several progress calls, and dereg() may come
  // between them: false (and the frame refused) when its region is gone.
  bool still_registered(int peer) {
    const FrameHeader& h = peers_[size_t(peer)].rx.header;
    if (region_alive(regions_, h.rkey)) return true;
    refuse_frame(peer, strfmt("rkey 0x%x was deregistered or closed while its write of %llu "
                              "bytes was arriving",
                              h.rkey, static_cast<unsigned long long>(h.length)));
    return false;
  }

  // Empty when rkey names a live region of ours that covers the range.
  std::string refuse_write(uint32_t rkey, uint64_t remote_addr, uint64_t length) const {
    RegionGrant grant;
    const std::string write =
        strfmt("a write of %llu bytes to 0x%llx with rkey 0x%x",
               static_cast<unsigned long long>(length),
               static_cast<unsigned long long>(remote_addr), rkey);
    switch (check_region(regions_, rkey, remote_addr, length, &grant)) {
      case RegionCheck::kOk:
        return "";
      case RegionCheck::kUnknownRkey:
        return write + ", which names no registered region (never registered, or deregistered)";
      case RegionCheck::kClosed:
        return write + ", whose exposure is over (the operation that exposed that buffer has "
                       "ended: a late or replayed write)";
      case RegionCheck::kOutOfRange:
        return strfmt(
            "a write of %llu bytes to 0x%llx outside its region (rkey 0x%x: %llu bytes "
            "at 0x%llx)",
            static_cast<unsigned long long>(length), static_cast<unsigned long long>(remote_addr),
            rkey, static_cast<unsigned long long>(grant.length),
            static_cast<unsigned long long>(grant.addr));
    }
    return "unknown check result";
  }

  // --- failure -------------------------------------------------------

  // A frame from peer that we will not apply: the stream cannot be trusted
  // any more, so we stop reading it, tell the sender, and fail.
  void refuse_frame(int peer, const std::string& why) {
    stop_reading(peer);
    send_abort(peer, why);
    mark_failed(COLL_ERR_TRANSPORT, peer,
                strfmt("rank %d refused a tcp frame from rank %d: %s", rank_, peer, why.c_str()));
  }

  void lose_peer(int peer, const std::string& why) {
    stop_reading(peer);
    mark_failed(COLL_ERR_PEER_LOST, peer,
                strfmt("rank %d lost rank %d over tcp: %s (the peer exited, or closed its "
                       "communicator)",
                       rank_, peer, why.c_str()));
  }

  void stop_reading(int peer) {
    Peer& p = peers_[size_t(peer)];
    if (!p.reading) return;
    p.reading = false;
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
  }

  void mark_failed(int status, int peer, std::string message) {
    if (failed_) return;  // the first failure is the cause; keep it
    failed_ = true;
    failure_status_ = status;
    failure_peer_ = peer;
    failure_message_ = std::move(message);
  }

  int rank_;
  int size_;
  double timeout_s_;
  std::unique_ptr<RegionEntry[]> own_entries_;  // tcp alone: the table's storage
  std::unique_ptr<RegionTable> table_;          // tcp alone; null in shm+tcp
  const RegionEntry* regions_ = nullptr;        // what incoming writes are checked against
  AnonymousWindows windows_{"tcp"};             // tcp alone; unused in shm+tcp
  Address published_{};
  UniqueFd epoll_;
  std::vector<Peer> peers_;
  std::deque<Completion> completions_;
  bool failed_ = false;
  int failure_status_ = 0;
  int failure_peer_ = -1;
  std::string failure_message_;
};

}  // namespace

std::unique_ptr<Transport> make_tcp_transport(Bootstrap& boot, const TransportOptions& opts) {
  return std::make_unique<TcpTransport>(boot, opts, std::vector<bool>(), nullptr);
}

std::unique_ptr<Transport> make_tcp_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<bool>& reach,
                                                   const RegionEntry* regions) {
  if (reach.size() != size_t(boot.size()) || regions == nullptr)
    fail(COLL_ERR_INTERNAL, "tcp part: %zu reach flags for %d ranks", reach.size(), boot.size());
  return std::make_unique<TcpTransport>(boot, opts, reach, regions);
}

}  // namespace coll
