// libFuzzer target: collrun's rendezvous server as a stranger or a rank
// meets it (issue 15): the real RendezvousServer, a real TCP connection per
// input. The first byte picks the role: even, a stranger, whose bytes go
// first (a hello it cannot prove, garbage, frames out of order); odd, a
// process holding the job secret, which answers the challenge with a good
// hello and then sends the rest (rounds, queries, frames out of order). The
// server lives across inputs, as collrun does across connections; a job of
// one rank, so that every round it is sent completes (nothing accumulates).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bootstrap/collrun_protocol.hpp"
#include "job_secret.hpp"
#include "rendezvous_server.hpp"

namespace {

namespace proto = coll::collrun_protocol;

const std::string kSecret(coll::job_secret::kSecretBytes, '\x5a');
const char* const kJob = "fuzzjob";

collrun::RendezvousServer& server() {
  static collrun::RendezvousServer s(1, kJob, kSecret);
  return s;
}

void pump(int timeout_ms) {
  std::vector<pollfd> fds;
  server().add_pollfds(fds);
  ::poll(fds.data(), fds.size(), timeout_ms);
  server().handle(fds);
}

// Reads what is there (after a pump); false when the server closed.
bool read_available(int fd, std::string* into) {
  char chunk[4096];
  for (;;) {
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n > 0) {
      into->append(chunk, size_t(n));
      continue;
    }
    return n < 0;  // EAGAIN: still open; 0: closed; other errors: closed
  }
}

std::string good_hello(std::string_view nonce, uint64_t epoch) {
  const std::string rank_nonce(proto::kNonceBytes, 'r');
  const std::string statement =
      proto::hello_statement(proto::kVersion, 0, 1, epoch, 1, kJob, rank_nonce);
  const coll::job_secret::Digest proof =
      coll::job_secret::prove(kSecret, proto::kRankRole, nonce, statement);
  return proto::FrameWriter(proto::MessageType::kHello)
      .put_u32(proto::kVersion)
      .put_u32(0)
      .put_u32(1)
      .put_u64(epoch)
      .put_u64(1)
      .put_bytes(kJob)
      .put_bytes(rank_nonce)
      .put_bytes(std::string_view(reinterpret_cast<const char*>(proof.data()), proof.size()))
      .finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint64_t epoch = 0;
  if (size == 0) return 0;
  const bool member = data[0] & 1;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);

  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(uint16_t(server().port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ::close(fd);
    return 0;
  }
  std::string got;
  bool open = true;
  for (int i = 0; i < 20 && got.size() < proto::kHeaderBytes + 8 + proto::kNonceBytes; ++i) {
    pump(10);
    open = read_available(fd, &got);
  }
  std::string bytes;
  if (member && got.size() >= proto::kHeaderBytes + 8 + proto::kNonceBytes)
    bytes = good_hello(got.substr(proto::kHeaderBytes + 8, proto::kNonceBytes), ++epoch);
  bytes.append(rest);
  size_t sent = 0;
  for (int i = 0; i < 200 && open && sent < bytes.size(); ++i) {
    const ssize_t n =
        ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) sent += size_t(n);
    pump(0);
    open = read_available(fd, &got);
  }
  ::shutdown(fd, SHUT_WR);
  for (int i = 0; i < 50 && open; ++i) {
    pump(5);
    open = read_available(fd, &got);
  }
  ::close(fd);
  pump(0);  // the server sees the close
  // FUZZ_TRACE=1: the frame types the server answered with (to check that
  // a seed reaches what it is meant to: a member's round gets a result, 5).
  if (std::getenv("FUZZ_TRACE")) {
    std::fprintf(stderr, "member %d, answered:", int(member));
    for (size_t at = 0; at + proto::kHeaderBytes <= got.size();) {
      const proto::FrameHeader h = proto::parse_header(got.data() + at);
      std::fprintf(stderr, " %u", h.type);
      at += proto::kHeaderBytes + h.length;
    }
    std::fprintf(stderr, "\n");
  }
  return 0;
}
