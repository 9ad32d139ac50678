// libFuzzer target: a rank's side of the rendezvous (issue 15), facing a
// collrun that answers with arbitrary bytes: the real collrun bootstrap
// client over a real TCP connection. The first byte picks what comes
// before the fuzzed bytes: even, nothing (the bytes are the challenge and
// whatever follows); odd, a good challenge and, after the rank's hello, a
// good welcome, so that the bytes are the answers to the rank's first
// bootstrap round. With bit 1 of that byte set the rank's first round is a
// survivors' round (key 7, ranks 0 and 1) instead of an allgather, so that
// the bytes are its answers. Every input ends in a bootstrap or a
// coll::Error, never a crash or a hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/collrun_protocol.hpp"
#include "error.hpp"
#include "job_secret.hpp"
#include "loopback_listener.hpp"

namespace {

namespace proto = coll::collrun_protocol;
const char* const kSecretHex = "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";
const std::string kNonce(proto::kNonceBytes, 'n');

// The harness's listener; the client's environment points at it.
int listener() {
  static const int fd = [] {
    const fuzz::Listener& l = fuzz::loopback_listener();
    ::setenv("COLL_BOOTSTRAP", ("127.0.0.1:" + std::to_string(l.port)).c_str(), 1);
    ::setenv("COLL_RANK", "0", 1);
    ::setenv("COLL_SIZE", "2", 1);
    ::setenv("COLL_JOBID", "fuzzjob", 1);
    ::setenv("COLL_JOB_SECRET", kSecretHex, 1);
    return l.fd;
  }();
  return fd;
}

void write_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += size_t(n);
  }
}

// The hello's statement, read back from its frame (to make the welcome).
bool read_hello(int fd, std::string* statement, std::string* rank_nonce) {
  std::string in;
  char chunk[4096];
  for (;;) {
    if (in.size() >= proto::kHeaderBytes) {
      const proto::FrameHeader h = proto::parse_header(in.data());
      if (h.length > 4096) return false;
      if (in.size() >= proto::kHeaderBytes + h.length) break;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) return false;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    in.append(chunk, size_t(n));
  }
  proto::PayloadReader r(std::string_view(in).substr(proto::kHeaderBytes));
  uint32_t version = 0, rank = 0, size = 0;
  uint64_t epoch = 0, pid = 0;
  std::string_view job, nonce, proof;
  if (!r.get_u32(version) || !r.get_u32(rank) || !r.get_u32(size) || !r.get_u64(epoch) ||
      !r.get_u64(pid) || !r.get_bytes(job, 256) || !r.get_bytes(nonce, 32) ||
      !r.get_bytes(proof, 32))
    return false;
  *statement = proto::hello_statement(version, rank, size, epoch, pid, job, nonce);
  *rank_nonce = std::string(nonce);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int l = listener();
  const bool welcomed = data[0] & 1;
  const bool survivors = data[0] & 2;
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::thread collrun([&] {
    pollfd p{l, POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    const int fd = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    if (welcomed) {
      write_all(fd, proto::FrameWriter(proto::MessageType::kChallenge).put_bytes(kNonce).finish());
      std::string statement, rank_nonce, secret;
      coll::job_secret::decode(kSecretHex, &secret);
      if (read_hello(fd, &statement, &rank_nonce)) {
        const coll::job_secret::Digest proof =
            coll::job_secret::prove(secret, proto::kCollrunRole, rank_nonce, statement);
        write_all(fd, proto::FrameWriter(proto::MessageType::kWelcome)
                          .put_bytes(std::string_view(
                              reinterpret_cast<const char*>(proof.data()), proof.size()))
                          .finish());
      }
    }
    write_all(fd, rest);
    ::shutdown(fd, SHUT_WR);
    // Until the rank closes (it has read what it wanted, or given up).
    char sink[4096];
    for (;;) {
      pollfd q{fd, POLLIN, 0};
      if (::poll(&q, 1, 3000) <= 0) break;
      if (::recv(fd, sink, sizeof sink, 0) <= 0) break;
    }
    ::close(fd);
  });
  try {
    auto bootstrap = coll::make_collrun_bootstrap(2.0);
    if (survivors)
      (void)bootstrap->survivor_round(7, {0, 1}, "blob", 0.5);
    else
      (void)bootstrap->allgather("blob", 2.0);
  } catch (const coll::Error&) {
  }
  collrun.join();
  return 0;
}
