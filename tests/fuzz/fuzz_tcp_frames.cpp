// libFuzzer target: the tcp transport's receive path (issue 15), facing a
// peer that sends arbitrary bytes after a good handshake: the real
// TcpTransport (rank 0 of 2) over a real TCP connection; this harness is
// rank 1 (its "bootstrap" hands rank 0 this harness's address and the
// job's secret, and a thread answers rank 0's dial as rank 1 would:
// challenge, hello checked, welcome). Rank 0 has one
// registered buffer, a heap allocation: the first input byte picks whether
// the rest is raw bytes or write frames whose rkey and address are patched
// to point into (or around) that buffer, with the fuzzer's offsets and
// lengths. Whatever comes, a write lands inside the registered buffer or is
// refused (ASan would see a byte outside it), and the transport fails
// cleanly (coll::Error), never a crash or a hang.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"
#include "job_secret.hpp"
#include "loopback_listener.hpp"
#include "transport/tcp_transport.hpp"

namespace {

using coll::tcp_wire::Address;
using coll::tcp_wire::FrameHeader;
const std::string kSecret(coll::job_secret::kSecretBytes, 's');

constexpr size_t kBuffer = 4096;

// Rank 0 of 2; every exchange hands back rank 1's blob as this harness
// made it.
class HarnessBootstrap final : public coll::Bootstrap {
 public:
  explicit HarnessBootstrap(std::string peer) : peer_(std::move(peer)) {}
  const char* name() const override { return "fuzz"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string job_id() const override { return "fuzz"; }
  const std::string& secret() const override { return kSecret; }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double) override {
    return {mine, mine.size() == sizeof(Address) ? peer_ : std::string()};
  }

 private:
  std::string peer_;
};

bool read_exactly(int fd, void* out, size_t n) {
  size_t got = 0;
  while (got < n) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 2000) <= 0) return false;
    const ssize_t r = ::recv(fd, static_cast<char*>(out) + got, n - got, 0);
    if (r <= 0) return false;
    got += size_t(r);
  }
  return true;
}

bool send_exactly(int fd, const void* data, size_t n) {
  return ::send(fd, data, n, MSG_NOSIGNAL) == ssize_t(n);
}

// Rank 1's side of the handshake on the connection rank 0 dials; the
// connection, or -1 when none came. A hello that does not prove the
// secret is a bug of the transport: abort.
int answer_handshake(int listener) {
  pollfd p{listener, POLLIN, 0};
  if (::poll(&p, 1, 2000) <= 0) return -1;
  const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return -1;
  coll::tcp_wire::Challenge challenge{coll::tcp_wire::kChallengeMagic, {}};
  std::memset(challenge.nonce, 'n', sizeof challenge.nonce);
  coll::tcp_wire::Hello hello{};
  if (!send_exactly(fd, &challenge, sizeof challenge) || !read_exactly(fd, &hello, sizeof hello)) {
    ::close(fd);
    return -1;
  }
  const auto proof = coll::tcp_wire::hello_proof(kSecret, hello, challenge);
  if (hello.magic != coll::tcp_wire::kHelloMagic || hello.rank != 0 || hello.target != 1 ||
      std::memcmp(hello.proof, proof.data(), proof.size()) != 0)
    std::abort();
  coll::tcp_wire::Welcome welcome{coll::tcp_wire::kWelcomeMagic, {}};
  const auto back = coll::tcp_wire::welcome_proof(kSecret, hello, challenge);
  std::memcpy(welcome.proof, back.data(), back.size());
  if (!send_exactly(fd, &welcome, sizeof welcome)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Frames from the input: each a 12-byte record (u32 offset, u32 length,
// u8 flags, 3 unused) followed by min(length, what is left) payload bytes.
// flags bit 0: the frame's rkey is not the buffer's; bit 1: a huge length
// in the header; bit 2: the frame's type is abort.
std::string frames_from(const uint8_t* data, size_t size, uint32_t rkey, uint64_t base) {
  std::string out;
  size_t at = 0;
  while (at + 12 <= size) {
    uint32_t offset = 0, length = 0;
    std::memcpy(&offset, data + at, 4);
    std::memcpy(&length, data + at + 4, 4);
    const uint8_t flags = data[at + 8];
    at += 12;
    offset %= 2 * kBuffer;
    length %= 2 * kBuffer;
    const size_t payload = std::min<size_t>(length, size - at);
    FrameHeader h{};
    h.magic = coll::tcp_wire::kFrameMagic;
    h.type = flags & 4 ? coll::tcp_wire::kAbortFrame : coll::tcp_wire::kWriteFrame;
    h.rkey = flags & 1 ? rkey + 1 : rkey;
    h.remote_addr = base + offset;  // may run past the buffer's end
    h.length = flags & 2 ? (uint64_t(1) << 62) : length;
    out.append(reinterpret_cast<const char*>(&h), sizeof h);
    out.append(reinterpret_cast<const char*>(data + at), payload);
    at += payload;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int l = fuzz::loopback_listener().fd;
  const uint16_t port = fuzz::loopback_listener().port;
  Address peer{};
  peer.port = port;
  std::snprintf(peer.ip, sizeof peer.ip, "127.0.0.1");
  std::snprintf(peer.host, sizeof peer.host, "fuzz-peer");  // another host: connects to ip
  HarnessBootstrap boot(std::string(reinterpret_cast<const char*>(&peer), sizeof peer));
  coll::TransportOptions opts;
  opts.timeout_s = 2;
  std::unique_ptr<coll::Transport> t;
  int fd = -1;
  std::thread rank1([&] { fd = answer_handshake(l); });
  // The eager mesh: rank 0 dials rank 1 (the harness) at setup, so the
  // stream is there before the frames.
  setenv("COLL_TCP_CONNECT", "eager", 1);
  try {
    t = coll::make_tcp_transport(boot, opts);
  } catch (const coll::Error&) {
  }
  rank1.join();
  if (!t || fd < 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }

  std::vector<uint8_t> buffer(kBuffer, 0);  // rank 0's registered buffer (on the heap)
  coll::MemoryRegion* mr = t->reg_write(buffer.data(), buffer.size());
  const std::string bytes =
      data[0] & 1
          ? frames_from(data + 1, size - 1, mr->rkey, reinterpret_cast<uint64_t>(buffer.data()))
          : std::string(reinterpret_cast<const char*>(data + 1), size - 1);
  size_t sent = 0;
  bool failed = false;
  for (int i = 0; i < 2000 && !failed; ++i) {
    if (sent < bytes.size()) {
      const ssize_t n =
          ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) sent += size_t(n);
      if (sent == bytes.size()) ::shutdown(fd, SHUT_WR);
    }
    try {
      coll::Completion wc[4];
      t->poll(wc, 4);
      if (sent == bytes.size()) t->check_peer(1);
    } catch (const coll::Error&) {
      failed = true;  // refused a frame, or the peer closed: the transport failed cleanly
    }
  }
  // FUZZ_TRACE=1: whether a write landed and whether the transport failed
  // (to check that a seed reaches what it is meant to).
  if (std::getenv("FUZZ_TRACE")) {
    size_t changed = 0;
    for (uint8_t b : buffer) changed += b != 0;
    std::fprintf(stderr, "bytes written into the buffer: %zu, transport failed: %d\n", changed,
                 int(failed));
  }
  try {
    t->dereg(mr);
  } catch (const coll::Error&) {
  }
  t.reset();
  ::close(fd);
  return 0;
}
