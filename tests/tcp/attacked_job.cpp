// Another user attacks a starting job's tcp transport (issue 15), and the
// job still runs exactly.
//
//   tcp_attacked_job victim   a rank of a job of 3 (collrun, COLL_TRANSPORT=
//                             tcp, as root); exit 77 (skipped) when not root
//   tcp_attacked_job attack   the attacker, started by rank 0 under setpriv
//                             (uid 65534, none of the job's environment)
//
// The tcp listeners are open only while the job sets up, so rank 0 holds
// the job there: this program's connect() wraps libc's (an executable's
// definition wins over the shared library's for every caller), and rank
// 0's second tcp dial - to rank 2, after the one to rank 1 - waits until
// the attacker has attacked both ranks' ports. Ranks 1 and 2 meanwhile sit
// in their setup loops with their listeners open, waiting for rank 0; the
// attacker floods them (rank 0's own first connection may be dropped in
// the flood, and then it dials again).
//
// The attacker, on each port: garbage, a well-formed hello without the
// secret; on rank 1's: a replayed hello (rank 0 makes a genuine one for a
// challenge the attacker got on one connection; the attacker sends it on
// another); then 150 idle connections each, held until the job is over.
// Each attack must end in a closed connection with no welcome. Prints
// "attacker: ..." lines; exits 0 when every attack failed as it should.
// Rank 0 prints "ok attacked tcp" when the job ran exactly and the
// attacker saw no attack succeed.
#include <arpa/inet.h>
#include <coll/coll.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/other_user.hpp"
#include "job_secret.hpp"
#include "transport/tcp_transport.hpp"

namespace {

using coll::tcp_wire::Challenge;
using coll::tcp_wire::Hello;
using Clock = std::chrono::steady_clock;

int g_failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  ++g_failures;
  std::printf("FAIL %s\n", what.c_str());
  std::fflush(stdout);
}

std::string to_hex(const void* data, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<const uint8_t*>(data)[i];
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

bool from_hex(const std::string& hex, void* out, size_t n) {
  if (hex.size() != 2 * n) return false;
  for (size_t i = 0; i < n; ++i) {
    unsigned v = 0;
    if (std::sscanf(hex.c_str() + 2 * i, "%2x", &v) != 1) return false;
    static_cast<uint8_t*>(out)[i] = uint8_t(v);
  }
  return true;
}

// One line from fd (bounded by the read; the peer closing ends it).
std::string read_line(int fd) {
  std::string line;
  char c;
  while (::read(fd, &c, 1) == 1 && c != '\n') line += c;
  return line;
}

void write_line(int fd, const std::string& line) {
  const std::string s = line + "\n";
  if (::write(fd, s.data(), s.size()) != ssize_t(s.size())) check(false, "write_line");
}

// --- the attacker ---------------------------------------------------

// A rank's listener: where rank 0 dialled it.
struct Target {
  in_addr ip{};
  uint16_t port = 0;
};

int dial(const Target& t) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(t.port);
  sa.sin_addr = t.ip;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool recv_exactly(int fd, void* out, size_t n) {
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (got < n && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    const ssize_t r = ::recv(fd, static_cast<char*>(out) + got, n - got, 0);
    if (r <= 0) return false;
    got += size_t(r);
  }
  return got == n;
}

bool send_all(int fd, const void* data, size_t n) {
  return ::send(fd, data, n, MSG_NOSIGNAL) == ssize_t(n);
}

// The rank closed the connection having sent at most its challenge: no
// welcome, nothing else (bounded).
bool dropped(int fd) {
  size_t got = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r <= 0) return got <= sizeof(Challenge);
    got += size_t(r);
  }
  return false;
}

// Whether /proc/net/tcp lists a socket listening on port (anyone can read
// it: how an attacker finds the ports).
bool listed_listening(uint16_t port) {
  std::ifstream in("/proc/net/tcp");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    const auto colon = local.find(':');
    if (colon == std::string::npos || state != "0A") continue;
    if (std::strtoul(local.c_str() + colon + 1, nullptr, 16) == port) return true;
  }
  return false;
}

Hello hello_without_secret(const Challenge& c, uint32_t target) {
  Hello h{coll::tcp_wire::kHelloMagic, 0, target, 3, 0, {}, {}};
  const std::string guess(coll::job_secret::kSecretBytes, '\0');
  const auto proof = coll::tcp_wire::hello_proof(guess, h, c);
  std::memcpy(h.proof, proof.data(), sizeof h.proof);
  return h;
}

int run_attack() {
  Target ports[2];
  const std::string said = read_line(0);
  char ip1[32] = "", ip2[32] = "";
  unsigned p1 = 0, p2 = 0;
  if (std::sscanf(said.c_str(), "targets %31s %u %31s %u", ip1, &p1, ip2, &p2) != 4 ||
      inet_pton(AF_INET, ip1, &ports[0].ip) != 1 || inet_pton(AF_INET, ip2, &ports[1].ip) != 1) {
    std::printf("attacker: no targets given ('%s')\n", said.c_str());
    return 1;
  }
  ports[0].port = uint16_t(p1);
  ports[1].port = uint16_t(p2);
  for (int i = 0; i < 2; ++i) {
    const uint16_t port = ports[i].port;
    const uint32_t target = uint32_t(i + 1);
    const bool listed = listed_listening(port);
    check(listed, "port " + std::to_string(port) + " not in /proc/net/tcp");
    std::printf("attacker: rank %u's port %u listed in /proc/net/tcp: %s\n", target, port,
                listed ? "yes" : "no");
    // Garbage, longer than a hello.
    int fd = dial(ports[i]);
    char junk[200];
    for (size_t k = 0; k < sizeof junk; ++k) junk[k] = char(k * 37 + 11);
    const bool garbage_dropped = fd >= 0 && send_all(fd, junk, sizeof junk) && dropped(fd);
    check(garbage_dropped, "garbage was not dropped");
    std::printf("attacker: rank %u: garbage: %s\n", target, garbage_dropped ? "dropped" : "KEPT");
    if (fd >= 0) ::close(fd);
    // A well-formed hello, proved with a guessed secret.
    fd = dial(ports[i]);
    Challenge c{};
    bool refused = fd >= 0 && recv_exactly(fd, &c, sizeof c);
    const Hello guessed = hello_without_secret(c, target);
    refused = refused && send_all(fd, &guessed, sizeof guessed) && dropped(fd);
    check(refused, "a hello without the secret was not refused");
    std::printf("attacker: rank %u: hello without the secret: %s\n", target,
                refused ? "refused" : "ACCEPTED");
    if (fd >= 0) ::close(fd);
  }
  // A replayed hello: genuine (rank 0 made it), for the challenge of
  // connection `first`, sent on connection `second`.
  int first = dial(ports[0]), second = dial(ports[0]);
  Challenge c1{}, c2{};
  bool replay_refused = first >= 0 && second >= 0 && recv_exactly(first, &c1, sizeof c1) &&
                        recv_exactly(second, &c2, sizeof c2);
  if (replay_refused) {
    std::printf("challenge %s\n", to_hex(&c1, sizeof c1).c_str());
    std::fflush(stdout);
    Hello genuine{};
    const std::string answer = read_line(0);
    replay_refused = answer.starts_with("hello ") &&
                     from_hex(answer.substr(6), &genuine, sizeof genuine) &&
                     send_all(second, &genuine, sizeof genuine) && dropped(second);
  }
  check(replay_refused, "a replayed hello was not refused");
  std::printf("attacker: rank 1: replayed hello: %s\n", replay_refused ? "refused" : "ACCEPTED");
  if (first >= 0) ::close(first);
  if (second >= 0) ::close(second);
  // The flood, held while the job sets up and runs.
  std::vector<int> flood;
  for (int i = 0; i < 300; ++i) {
    const int fd = dial(ports[i % 2]);
    if (fd >= 0) flood.push_back(fd);
  }
  std::printf("attacker: holding %zu idle connections\n", flood.size());
  std::fflush(stdout);
  while (!read_line(0).empty()) {
  }
  for (int fd : flood) ::close(fd);
  return g_failures == 0 ? 0 : 1;
}

// --- the victim's rank 0 --------------------------------------------

struct AttackerLink {
  pid_t pid = -1;
  int to = -1, from = -1;  // its stdin, its stdout
  std::string staged;
  std::string said;  // its lines, printed by rank 0 at the end
};
AttackerLink g_attacker;
bool g_hook_armed = false;
sockaddr_in g_ports[2];
int g_ports_seen = 0;

uint16_t rendezvous_port() {
  const char* address = std::getenv("COLL_BOOTSTRAP");
  const char* colon = address ? std::strrchr(address, ':') : nullptr;
  return colon ? uint16_t(std::atoi(colon + 1)) : 0;
}

// Rank 0's side of the attack, inside its second tcp dial: gives the
// attacker the ports, makes the replay's genuine hello, and waits until
// the attacker holds its flood.
void converse_with_attacker() {
  std::string targets = "targets";
  for (const sockaddr_in& a : g_ports) {
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
    targets += std::string(" ") + ip + " " + std::to_string(ntohs(a.sin_port));
  }
  write_line(g_attacker.to, targets);
  std::string secret;
  const char* hex = std::getenv(coll::job_secret::kEnv);
  check(hex && coll::job_secret::decode(hex, &secret), "rank 0 has no job secret");
  for (;;) {
    const std::string line = read_line(g_attacker.from);
    if (line.empty()) break;  // the attacker ended early
    if (line.starts_with("challenge ")) {
      Challenge c{};
      check(from_hex(line.substr(10), &c, sizeof c), "the attacker's challenge");
      Hello h{coll::tcp_wire::kHelloMagic, 0, 1, 3, 0, {}, {}};
      std::memset(h.nonce, 0x42, sizeof h.nonce);
      const auto proof = coll::tcp_wire::hello_proof(secret, h, c);
      std::memcpy(h.proof, proof.data(), sizeof h.proof);
      write_line(g_attacker.to, "hello " + to_hex(&h, sizeof h));
      continue;
    }
    g_attacker.said += line + "\n";
    if (line.find("idle connections") != std::string::npos) break;
  }
}

void start_attacker(const char* self) {
  try {
    const test_support::OtherUserProcess p =
        test_support::start_as_other_user(self, "tcp_attacked_job", {"attack"});
    g_attacker.pid = p.pid;
    g_attacker.to = p.to;
    g_attacker.from = p.from;
    g_attacker.staged = p.staged;
  } catch (const std::exception& e) {
    check(false, std::string("starting the attacker: ") + e.what());
  }
}

void finish_attacker() {
  ::close(g_attacker.to);  // the flood ends
  std::string line;
  while (!(line = read_line(g_attacker.from)).empty()) g_attacker.said += line + "\n";
  std::printf("%s", g_attacker.said.c_str());
  int status = 0;
  check(::waitpid(g_attacker.pid, &status, 0) == g_attacker.pid && WIFEXITED(status) &&
            WEXITSTATUS(status) == 0,
        "the attacker saw an attack succeed (or did not run)");
  test_support::OtherUserProcess{.staged = g_attacker.staged}.remove_staged();
}

bool call_ok(int status, const char* what) {
  check(status == COLL_SUCCESS, std::string(what) + ": " + coll_strerror(status) + ": " +
                                    coll_comm_last_error(coll_comm_world()));
  return status == COLL_SUCCESS;
}

// Collectives whose results are known in closed form.
void run_collectives(int rank, int size) {
  for (size_t count : {size_t(1), size_t(1000), size_t(1) << 16}) {
    std::vector<int64_t> send(count), recv(count, -1);
    for (size_t i = 0; i < count; ++i) send[i] = int64_t(rank) * 1000003 + int64_t(i);
    if (call_ok(coll_allreduce(send.data(), recv.data(), count, COLL_INT64, COLL_SUM,
                               coll_comm_world()),
                "allreduce")) {
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i)
        wrong += recv[i] != int64_t(size) * int64_t(i) + 1000003 * int64_t(size * (size - 1) / 2);
      check(wrong == 0, "allreduce of " + std::to_string(count) + ": " + std::to_string(wrong) +
                            " wrong elements");
    }
    std::vector<uint32_t> b(count, rank == 2 ? 0 : 7);
    if (rank == 2)
      for (size_t i = 0; i < count; ++i) b[i] = uint32_t(i * 2654435761u);
    if (call_ok(coll_bcast(b.data(), count, COLL_UINT32, 2, coll_comm_world()), "bcast")) {
      size_t wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += b[i] != uint32_t(i * 2654435761u);
      check(wrong == 0,
            "bcast of " + std::to_string(count) + ": " + std::to_string(wrong) + " wrong elements");
    }
    std::vector<int32_t> mine(count), all(count * size_t(size), -1);
    for (size_t i = 0; i < count; ++i) mine[i] = int32_t(rank * 7919 + int(i));
    if (call_ok(coll_allgather(mine.data(), all.data(), count, COLL_INT32, coll_comm_world()),
                "allgather")) {
      size_t wrong = 0;
      for (int r = 0; r < size; ++r)
        for (size_t i = 0; i < count; ++i)
          wrong += all[size_t(r) * count + i] != int32_t(r * 7919 + int(i));
      check(wrong == 0, "allgather of " + std::to_string(count) + ": " + std::to_string(wrong) +
                            " wrong elements");
    }
  }
}

int run_victim(const char* self) {
  if (::geteuid() != 0) {
    std::printf("skipped: not root (setpriv needs it)\n");
    return 77;
  }
  const char* rank_text = std::getenv("COLL_RANK");
  const int rank = rank_text ? std::atoi(rank_text) : -1;
  if (rank == 0) {
    start_attacker(self);
    g_hook_armed = true;
  }
  if (!call_ok(coll_init(nullptr, nullptr), "coll_init")) return 1;
  int me = -1, size = 0;
  coll_comm_rank(coll_comm_world(), &me);
  coll_comm_size(coll_comm_world(), &size);
  check(size == 3, "a job of 3");
  const char* transport = coll_comm_transport_name(coll_comm_world());
  check(transport && std::strcmp(transport, "tcp") == 0,
        std::string("transport ") + (transport ? transport : "(none)") + ", not tcp");
  if (rank == 0) check(g_ports_seen == 2, "rank 0 did not dial ranks 1 and 2 over tcp");
  if (size == 3) run_collectives(me, size);
  call_ok(coll_barrier(coll_comm_world()), "barrier");
  coll_finalize();
  if (rank == 0) {
    finish_attacker();
    if (g_failures == 0) std::printf("ok attacked tcp\n");
  }
  return g_failures == 0 ? 0 : 1;
}

}  // namespace

// libc's connect, wrapped (see the top): rank 0's tcp dials are noted, and
// the second one waits for the attacker. Every other connect passes as is.
extern "C" int connect(int fd, const sockaddr* addr, socklen_t len) {
  using Connect = int (*)(int, const sockaddr*, socklen_t);
  static const auto real = reinterpret_cast<Connect>(dlsym(RTLD_NEXT, "connect"));
  int type = 0;
  socklen_t type_len = sizeof type;
  if (g_hook_armed && addr && addr->sa_family == AF_INET &&
      getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 && type == SOCK_STREAM) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(addr);
    if (ntohs(in->sin_port) != rendezvous_port() && g_ports_seen < 2) {
      g_ports[g_ports_seen++] = *in;
      if (g_ports_seen == 2) {
        g_hook_armed = false;
        converse_with_attacker();
      }
    }
  }
  return real(fd, addr, len);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "victim") return run_victim(argv[0]);
  if (mode == "attack") return run_attack();
  std::fprintf(stderr, "usage: tcp_attacked_job victim|attack\n");
  return 2;
}
