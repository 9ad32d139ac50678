// The transport contract on the tcp backend (and on shm+tcp), with real
// processes: ranks are forked children that trade setup data through
// FileBootstrap (tests/rdma/file_bootstrap.hpp). Some cases replace a rank
// by an impostor that speaks the wire format by hand (tcp_wire) to inject
// garbage, truncated and hostile frames.
//
// Children report through their exit status and stderr: gtest assertions
// live in the parent only. Every wait is bounded; no test asserts a time.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "error.hpp"
#include "job_secret.hpp"
#include "tests/rdma/file_bootstrap.hpp"
#include "tests/rdma/forked_ranks.hpp"
#include "transport/hybrid_transport.hpp"
#include "transport/tcp_transport.hpp"
#include "transport/transport.hpp"

namespace coll {
namespace {

using test::deadline_after;
using test::exchange_regions;
using test::expect_all_succeeded;
using test::FileBootstrap;
using test::pattern;
using Clock = std::chrono::steady_clock;
using tcp_wire::FrameHeader;

constexpr double kTimeout = 60;  // bound of every wait in a rank, seconds

struct Rank {
  FileBootstrap& boot;
  std::string dir;  // the job's directory (for side-band files)
};
using RankBody = std::function<int(Rank&)>;

std::vector<int> run_ranks(int size, const RankBody& body, double bound_s = 180) {
  return test::run_forked_ranks(
      "tcp", size,
      [&](FileBootstrap& boot, const std::string& dir) {
        Rank rank{boot, dir};
        return body(rank);
      },
      bound_s);
}

// Side-band synchronisation for ranks whose transport has failed: each
// creates <dir>/<name>.<rank> and waits (bounded) for the others' files.
bool side_barrier(const Rank& rank, const std::string& name, const std::vector<int>& ranks) {
  const std::string mine = rank.dir + "/" + name + "." + std::to_string(rank.boot.rank());
  std::FILE* f = std::fopen(mine.c_str(), "w");
  if (f) std::fclose(f);
  const auto deadline = deadline_after(kTimeout);
  for (int r : ranks) {
    const std::string theirs = rank.dir + "/" + name + "." + std::to_string(r);
    while (!std::filesystem::exists(theirs)) {
      if (Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return true;
}

constexpr size_t kWindowBytes = 64 * 1024;  // of the window a case allocates

TransportOptions options() {
  TransportOptions o;
  o.timeout_s = kTimeout;
  return o;
}

// The eager mesh of before issue 14 (COLL_TCP_CONNECT=eager): the setup
// waits for every lower rank's connection. The impostor cases speak as
// rank 0 at setup, as they did; every other case runs the default, lazy
// connections, and the cases at the end test those.
std::unique_ptr<Transport> eager_transport(Rank& rank) {
  setenv("COLL_TCP_CONNECT", "eager", 1);  // a forked rank: this rank only
  return make_tcp_transport(rank.boot, options());
}

// Polls (and every few ms asks check_peer) until ready() or an error.
// Returns false on an error completion, a throw, or the bound; `failure`
// keeps what happened.
struct Waiter {
  explicit Waiter(Transport& transport) : t(transport) {}

  Transport& t;
  std::vector<uint64_t> completed;  // contexts of signaled writes
  int error_status = 0;             // of an error completion
  std::string thrown;               // message of check_peer's Error
  int thrown_status = 0;

  template <class Ready>
  bool until(Ready ready, int peer) {
    const auto deadline = deadline_after(kTimeout);
    for (uint64_t spin = 0;; ++spin) {
      Completion wc[16];
      const int n = t.poll(wc, 16);
      for (int i = 0; i < n; ++i) {
        if (wc[i].status != 0) {
          error_status = wc[i].status;
          capture(peer);
          return false;
        }
        completed.push_back(wc[i].context);
      }
      if (ready()) return true;
      if (spin % 1024 == 1023) {
        if (!capture(peer)) return false;
        if (Clock::now() > deadline) return false;
        std::this_thread::yield();
      }
    }
  }

  // Waits for the transport to fail; true when it did with `status`.
  bool fails_with(int status, int peer) {
    if (until([] { return false; }, peer)) return false;
    if (thrown_status == 0) capture(peer);
    return thrown_status == status;
  }

  // check_peer; false (and the error kept) when it throws.
  bool capture(int peer) {
    try {
      t.check_peer(peer);
      return true;
    } catch (const Error& e) {
      thrown_status = e.status();
      thrown = e.what();
      return false;
    }
  }

  bool has_completed(uint64_t context) const {
    for (uint64_t c : completed)
      if (c == context) return true;
    return false;
  }
};

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// Memory with an inaccessible page on each side, and canary bytes between
// the registered range and the guard pages: a stray write either faults or
// changes a canary.
class GuardedBuffer {
 public:
  static constexpr uint8_t kCanary = 0xA5;
  static constexpr uint8_t kFill = 0x5A;
  static constexpr size_t kSlack = 256;  // canary bytes on each side

  explicit GuardedBuffer(size_t length) : length_(length) {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    inner_ = (length + 2 * kSlack + page_ - 1) / page_ * page_;
    total_ = inner_ + 2 * page_;
    void* p = mmap(nullptr, total_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap");
    base_ = static_cast<uint8_t*>(p);
    if (mprotect(base_ + page_, inner_, PROT_READ | PROT_WRITE) != 0)
      throw std::runtime_error("mprotect");
    std::memset(base_ + page_, kCanary, inner_);
    std::memset(data(), kFill, length_);
  }
  ~GuardedBuffer() { munmap(base_, total_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  uint8_t* data() const { return base_ + page_ + kSlack; }
  size_t length() const { return length_; }
  uint64_t addr() const { return reinterpret_cast<uintptr_t>(data()); }

  // Index of the first changed canary byte, or -1.
  long first_bad_canary() const {
    const uint8_t* inner = base_ + page_;
    for (size_t i = 0; i < inner_; ++i) {
      const bool in_region = inner + i >= data() && inner + i < data() + length_;
      if (!in_region && inner[i] != kCanary) return long(i);
    }
    return -1;
  }
  // Index of the first region byte that is not kFill, or -1.
  long first_written() const {
    for (size_t i = 0; i < length_; ++i)
      if (data()[i] != kFill) return long(i);
    return -1;
  }

 private:
  size_t length_, page_ = 0, inner_ = 0, total_ = 0;
  uint8_t* base_ = nullptr;
};

// ------------------------------------------------------------ ordering

// Sizes of the blocks each sender writes, in this order: the small ones
// gathered whole, the ones staged, ones large enough to be received
// straight into the region and to fill the socket, and after those (the
// stream read in small pieces after a large write) staged ones again.
const size_t kBlockSizes[] = {1,         7,        8, 63,       64,  65,    4096, 16383, 16384,
                              65536 + 3, 1u << 20, 8, 3u << 20, 100, 20000, 5,    4097};
constexpr int kBlocks = int(sizeof kBlockSizes / sizeof kBlockSizes[0]);

size_t block_offset(int k) {
  size_t off = 0;
  for (int i = 0; i < k; ++i) off += (kBlockSizes[i] + 63) / 64 * 64;
  return off;
}

// Each rank writes every block into its own area of every peer's buffer,
// each block followed by an 8-byte flag (its number). A target that sees
// flag f checks that blocks 1..f are all there, every byte: flags land
// after their data, writes land in posting order.
int ordered_writes_rank(Rank& rank) {
  const int me = rank.boot.rank(), n = rank.boot.size();
  auto t = make_tcp_transport(rank.boot, options());
  CHILD_CHECK(std::strcmp(t->name(), "tcp") == 0, "name %s", t->name());
  CHILD_CHECK(t->rank() == me && t->size() == n, "rank/size");
  CHILD_CHECK(!t->needs_local_registration(), "tcp copies at post");
  auto* window = static_cast<uint8_t*>(t->alloc_window(kWindowBytes));
  CHILD_CHECK(window != nullptr && reinterpret_cast<uintptr_t>(window) % 4096 == 0, "window");
  for (size_t i = 0; i < kWindowBytes; ++i) CHILD_CHECK(window[i] == 0, "window not zeroed");

  const size_t area = block_offset(kBlocks);
  GuardedBuffer buffer(area * size_t(n));
  MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
  MemoryRegion* flags_mr = t->reg_write(window, kWindowBytes);
  const auto remote = exchange_regions(rank.boot, mr);
  const auto remote_flags = exchange_regions(rank.boot, flags_mr);
  auto* flags = reinterpret_cast<uint64_t*>(window);
  Waiter wait{*t};

  std::vector<uint8_t> source(*std::max_element(std::begin(kBlockSizes), std::end(kBlockSizes)));
  for (int k = 0; k < kBlocks; ++k) {
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      for (size_t i = 0; i < kBlockSizes[k]; ++i) source[i] = pattern(me, k, i);
      const RemoteRegion& target = remote[size_t(peer)];
      CHILD_CHECK(
          t->post_write(peer, 0, source.data(), kBlockSizes[k], nullptr, 0,
                        target.addr + area * size_t(me) + block_offset(k), target.rkey) == 0,
          "block %d to %d: %s", k, peer, std::strerror(errno));
      // The source is reused at once: post_write must have taken the bytes.
      std::memset(source.data(), 0xEE, kBlockSizes[k]);
      const uint64_t flag = uint64_t(k + 1);
      CHILD_CHECK(t->post_write(peer, 0, &flag, sizeof flag, nullptr, 0,
                                remote_flags[size_t(peer)].addr + 8 * uint64_t(me),
                                remote_flags[size_t(peer)].rkey) == 0,
                  "flag %d to %d", k, peer);
    }
    // Check what has arrived so far, without waiting for all of it.
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      const uint64_t f = __atomic_load_n(&flags[peer], __ATOMIC_ACQUIRE);
      for (uint64_t b = 0; b < f; ++b) {
        const uint8_t* got = buffer.data() + area * size_t(peer) + block_offset(int(b));
        for (size_t i = 0; i < kBlockSizes[b]; ++i)
          CHILD_CHECK(got[i] == pattern(peer, int(b), i),
                      "flag %llu from rank %d seen, but byte %zu of block %llu is %u",
                      static_cast<unsigned long long>(f), peer, i,
                      static_cast<unsigned long long>(b), got[i]);
      }
    }
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    CHILD_CHECK(
        wait.until(
            [&] { return __atomic_load_n(&flags[peer], __ATOMIC_ACQUIRE) == uint64_t(kBlocks); },
            peer),
        "last flag from rank %d: %s", peer, wait.thrown.c_str());
    for (int b = 0; b < kBlocks; ++b) {
      const uint8_t* got = buffer.data() + area * size_t(peer) + block_offset(b);
      for (size_t i = 0; i < kBlockSizes[b]; ++i)
        CHILD_CHECK(got[i] == pattern(peer, b, i), "block %d byte %zu from %d", b, i, peer);
    }
  }
  CHILD_CHECK(buffer.first_bad_canary() < 0, "canary %ld changed", buffer.first_bad_canary());
  // Nobody disconnects while the others may still read: a close would be
  // a lost peer to them.
  rank.boot.barrier(kTimeout);
  CHILD_CHECK(t->dereg(mr) == 0 && t->dereg(flags_mr) == 0, "dereg");
  CHILD_CHECK(t->dereg(mr) == -1 && errno == EINVAL, "a second dereg must fail");
  return 0;
}

TEST(TcpTransport, WritesLandInOrderAndFlagsAfterTheirDataOnTwoRanks) {
  expect_all_succeeded(run_ranks(2, ordered_writes_rank));
}

TEST(TcpTransport, WritesLandInOrderAndFlagsAfterTheirDataOnThreeRanks) {
  expect_all_succeeded(run_ranks(3, ordered_writes_rank));
}

// Signaled writes complete (with their context), writes to oneself land,
// and two ranks that write 24 MiB into each other at the same moment - each
// blocked on a full socket - both finish: a sender applies incoming frames
// while it waits.
TEST(TcpTransport, SignaledWritesCompleteSelfWritesLandCrossingLargeWritesFinish) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    const int me = rank.boot.rank(), peer = 1 - me;
    auto t = make_tcp_transport(rank.boot, options());
    constexpr size_t kBig = 24u << 20;
    std::vector<uint8_t> target(kBig, 0), source(kBig);
    for (size_t i = 0; i < kBig; ++i) source[i] = pattern(me, 3, i);
    MemoryRegion* mr = t->reg_write(target.data(), kBig);
    auto* flag = static_cast<uint64_t*>(t->alloc_window(4096));
    MemoryRegion* flags_mr = t->reg_write(flag, 4096);
    const auto remote = exchange_regions(rank.boot, mr);
    const auto remote_flags = exchange_regions(rank.boot, flags_mr);
    Waiter wait{*t};

    CHILD_CHECK(t->post_write(peer, 77, source.data(), kBig, nullptr, kWriteSignaled,
                              remote[size_t(peer)].addr, remote[size_t(peer)].rkey) == 0,
                "big write");
    const uint64_t one = 1;
    CHILD_CHECK(
        t->post_write(peer, 78, &one, 8, nullptr, kWriteSignaled, remote_flags[size_t(peer)].addr,
                      remote_flags[size_t(peer)].rkey) == 0,
        "flag");
    CHILD_CHECK(wait.until([&] { return __atomic_load_n(flag, __ATOMIC_ACQUIRE) == 1; }, peer),
                "flag from the peer: %s", wait.thrown.c_str());
    for (size_t i = 0; i < kBig; ++i)
      CHILD_CHECK(target[i] == pattern(peer, 3, i), "byte %zu of the big write", i);
    CHILD_CHECK(wait.until([&] { return wait.has_completed(77) && wait.has_completed(78); }, peer),
                "completions of contexts 77 and 78");

    // A write to oneself, checked like any other.
    const uint64_t self_value = 0x1122334455667788ull;
    CHILD_CHECK(t->post_write(me, 79, &self_value, 8, nullptr, kWriteSignaled,
                              reinterpret_cast<uint64_t>(flag) + 8, flags_mr->rkey) == 0,
                "self write");
    CHILD_CHECK(flag[1] == self_value, "self write did not land");
    CHILD_CHECK(wait.until([&] { return wait.has_completed(79); }, me), "self completion");

    // Invalid arguments are refused before anything is sent.
    errno = 0;
    CHILD_CHECK(t->post_write(5, 0, &one, 8, nullptr, 0, 0, 0) == -1 && errno == EINVAL,
                "peer out of range");
    CHILD_CHECK(t->post_write(peer, 0, nullptr, 8, nullptr, 0, 0, 0) == -1 && errno == EINVAL,
                "null source");
    rank.boot.barrier(kTimeout);
    return 0;
  }));
}

// ------------------------------------------------------------ refused writes

enum class BadWrite {
  kDeregistered,  // the rkey was valid, then dereg'ed
  kUnknownRkey,   // never registered
  kBeforeRegion,  // one byte before the start
  kPastEnd,       // last byte plus one
  kTooLong,       // whole region plus one byte
  kAbsurdLength,  // 2^62 bytes: refused from the header, before any payload
  kWrapAround,    // address near 2^64: the sum wraps
};
// Test names, in the order of BadWrite.
const char* const kBadWriteNames[] = {"Deregistered", "UnknownRkey",  "BeforeRegion", "PastEnd",
                                      "TooLong",      "AbsurdLength", "WrapAround"};

class RefusedWrite : public ::testing::TestWithParam<BadWrite> {};

// Rank 0 writes into rank 1 in a way the contract forbids. Rank 1's
// transport fails with COLL_ERR_TRANSPORT and a message naming rank 0;
// rank 0 is told (abort frame) and fails too; not a byte lands anywhere.
// The lengths that are too large to send (absurd, wrap-around) are crafted
// by an impostor rank 0 instead.
int refused_write_rank(Rank& rank, BadWrite bad) {
  const int me = rank.boot.rank();
  constexpr size_t kLen = 4096;
  const bool crafted = bad == BadWrite::kAbsurdLength || bad == BadWrite::kWrapAround;
  if (me == 0 && crafted) return 0;  // see impostor_rank
  auto t = crafted ? eager_transport(rank) : make_tcp_transport(rank.boot, options());
  GuardedBuffer buffer(kLen);
  MemoryRegion* mr = me == 1 ? t->reg_write(buffer.data(), kLen) : nullptr;
  const auto remote = exchange_regions(rank.boot, mr);
  if (me == 1 && bad == BadWrite::kDeregistered) CHILD_CHECK(t->dereg(mr) == 0, "dereg");
  rank.boot.barrier(kTimeout);  // the dereg is done before rank 0 writes
  Waiter wait{*t};
  if (me == 0) {
    RemoteRegion target = remote[1];
    std::vector<uint8_t> bytes(kLen + 1, 0xCC);
    uint64_t addr = target.addr;
    size_t len = 8;
    if (bad == BadWrite::kUnknownRkey) target.rkey ^= 0x5500;
    if (bad == BadWrite::kBeforeRegion) addr -= 1;
    if (bad == BadWrite::kPastEnd) addr += kLen, len = 1;
    if (bad == BadWrite::kTooLong) len = kLen + 1;
    CHILD_CHECK(t->post_write(1, 0, bytes.data(), len, nullptr, 0, addr, target.rkey) == 0,
                "a refused write is still posted: the target refuses it");
    CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, 1), "rank 0: status %d/%d: %s",
                wait.error_status, wait.thrown_status, wait.thrown.c_str());
    CHILD_CHECK(contains(wait.thrown, "rank 1 refused"), "rank 0 was told: %s",
                wait.thrown.c_str());
    // Sticky: later writes are accepted and never land; poll keeps failing.
    CHILD_CHECK(t->post_write(1, 5, bytes.data(), 8, nullptr, kWriteSignaled, target.addr,
                              target.rkey) == 0,
                "post after failure");
    Completion wc[4];
    CHILD_CHECK(t->poll(wc, 4) >= 1 && wc[0].status != 0, "sticky error completion");
  } else {
    CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, 0), "rank 1: status %d/%d: %s",
                wait.error_status, wait.thrown_status, wait.thrown.c_str());
    CHILD_CHECK(contains(wait.thrown, "from rank 0"), "message names the sender: %s",
                wait.thrown.c_str());
    const char* why = bad == BadWrite::kDeregistered || bad == BadWrite::kUnknownRkey
                          ? "names no registered region"
                          : "outside its region";
    CHILD_CHECK(contains(wait.thrown, why), "message says '%s': %s", why, wait.thrown.c_str());
    CHILD_CHECK(buffer.first_written() < 0, "byte %ld of the region written",
                buffer.first_written());
    CHILD_CHECK(buffer.first_bad_canary() < 0, "canary %ld changed", buffer.first_bad_canary());
  }
  return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
}

// ------------------------------------------------------------ impostors

// A raw-socket stand-in for rank 0 of a two-rank job: it publishes an
// address, greets the real rank 1, trades regions, and then sends what the
// test wants.
class Impostor {
 public:
  explicit Impostor(Rank& rank) : rank_(rank) {}

  // join(), then a connection to rank 1 with the handshake made as rank
  // 0's: the socket, or -1 (errno kept).
  int join_and_greet() {
    const int fd = dial(join());
    if (fd >= 0 && !greet(fd, rank_.boot.secret())) {
      const int err = errno;
      close(fd);
      errno = err;
      return -1;
    }
    return fd;
  }

  // The tcp setup exchange, as rank 0 runs it. Returns rank 1's address.
  // Rank 0 publishes `port`: by default one nobody listens on (an eager
  // rank 1 never dials rank 0); a lazy one may, to check on it.
  tcp_wire::Address join(uint16_t port = 9) {
    tcp_wire::Address mine{};
    std::snprintf(mine.ip, sizeof mine.ip, "127.0.0.1");
    mine.port = port;
    const auto all = rank_.boot.allgather(
        std::string(reinterpret_cast<const char*>(&mine), sizeof mine), kTimeout);
    tcp_wire::Address peer{};
    if (all.size() == 2 && all[1].size() == sizeof peer)
      std::memcpy(&peer, all[1].data(), sizeof peer);
    return peer;
  }

  // A connection to the real rank's listener (-1 and errno on failure).
  static int dial(const tcp_wire::Address& a) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(a.port);
    // Where the rank listens: its announced address (it binds only that),
    // or loopback when it had to bind every address.
    inet_pton(AF_INET, a.bound_any ? "127.0.0.1" : a.ip, &sa.sin_addr);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      const int err = errno;
      close(fd);
      errno = err;
      return -1;
    }
    return fd;
  }

  static bool send_all(int fd, const void* data, size_t len) {
    const char* p = static_cast<const char*>(data);
    while (len > 0) {
      ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
      if (n <= 0) return false;
      p += n;
      len -= size_t(n);
    }
    return true;
  }

  // Reads exactly n bytes, bounded; false on close, error or the bound.
  static bool recv_all(int fd, void* out, size_t n) {
    size_t got = 0;
    const auto deadline = deadline_after(kTimeout);
    while (got < n && Clock::now() < deadline) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, 100) <= 0) continue;
      ssize_t r = recv(fd, static_cast<char*>(out) + got, n - got, 0);
      if (r <= 0) return false;
      got += size_t(r);
    }
    return got == n;
  }

  // True when the peer closes fd (bounded) having sent at most a challenge:
  // what a refused stranger gets.
  static bool closed_by_peer(int fd) {
    size_t got = 0;
    const auto deadline = deadline_after(kTimeout);
    while (Clock::now() < deadline) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, 100) <= 0) continue;
      char buf[256];
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return got <= sizeof(tcp_wire::Challenge);
      got += size_t(r);
    }
    return false;
  }

  static tcp_wire::Hello hello_for(const std::string& secret, const tcp_wire::Challenge& c) {
    tcp_wire::Hello h{tcp_wire::kHelloMagic, 0, 1, 2, 0, {}, {}};
    std::memset(h.nonce, 0x5a, sizeof h.nonce);
    const auto proof = tcp_wire::hello_proof(secret, h, c);
    std::memcpy(h.proof, proof.data(), sizeof h.proof);
    return h;
  }

  // The handshake as rank 0 makes it on a connection to rank 1: reads the
  // challenge, answers with a hello proved with `secret` and checks rank
  // 1's welcome. False (errno kept) when a step fails.
  static bool greet(int fd, const std::string& secret) {
    tcp_wire::Challenge c{};
    if (!recv_all(fd, &c, sizeof c) || c.magic != tcp_wire::kChallengeMagic) return false;
    const tcp_wire::Hello h = hello_for(secret, c);
    tcp_wire::Welcome w{};
    if (!send_all(fd, &h, sizeof h) || !recv_all(fd, &w, sizeof w)) return false;
    const auto proof = tcp_wire::welcome_proof(secret, h, c);
    return w.magic == tcp_wire::kWelcomeMagic &&
           std::memcmp(w.proof, proof.data(), sizeof w.proof) == 0;
  }

  static bool send_frame(int fd, uint32_t type, uint32_t rkey, uint64_t addr, uint64_t length,
                         const void* payload, size_t payload_bytes) {
    const FrameHeader h{tcp_wire::kFrameMagic, type, rkey, 0, addr, length};
    return send_all(fd, &h, sizeof h) && send_all(fd, payload, payload_bytes);
  }

  // Reads (bounded) until an abort frame arrives; returns its text.
  static std::string read_abort(int fd) {
    std::string got;
    const auto deadline = deadline_after(kTimeout);
    while (Clock::now() < deadline) {
      pollfd pfd{fd, POLLIN, 0};
      if (::poll(&pfd, 1, 100) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, size_t(n));
      if (got.size() >= sizeof(FrameHeader)) {
        FrameHeader h;
        std::memcpy(&h, got.data(), sizeof h);
        if (h.magic != tcp_wire::kFrameMagic || h.type != tcp_wire::kAbortFrame) return "";
        if (got.size() >= sizeof h + h.length) return got.substr(sizeof h, h.length);
      }
    }
    return "";
  }

 private:
  Rank& rank_;
};

int impostor_for_refused_write(Rank& rank, BadWrite bad) {
  Impostor imp(rank);
  const int fd = imp.join_and_greet();
  CHILD_CHECK(fd >= 0, "connect: %s", std::strerror(errno));
  const auto remote = exchange_regions(rank.boot, nullptr);
  rank.boot.barrier(kTimeout);
  uint64_t addr = remote[1].addr, length = uint64_t(1) << 62;
  if (bad == BadWrite::kWrapAround) addr = ~uint64_t(0) - 3, length = 64;
  const uint8_t some[64] = {};
  CHILD_CHECK(Impostor::send_frame(fd, tcp_wire::kWriteFrame, remote[1].rkey, addr, length, some,
                                   sizeof some),
              "send");
  const std::string text = Impostor::read_abort(fd);
  CHILD_CHECK(contains(text, "outside its region"), "the sender is told why: '%s'", text.c_str());
  // ... naming the region it missed, not an empty one.
  const std::string region =
      strfmt("%llu bytes at 0x%llx", static_cast<unsigned long long>(remote[1].length),
             static_cast<unsigned long long>(remote[1].addr));
  CHILD_CHECK(contains(text, region.c_str()), "the region '%s' is named: '%s'", region.c_str(),
              text.c_str());
  const bool ok = side_barrier(rank, "done", {0, 1});
  close(fd);
  return ok ? 0 : 1;
}

TEST_P(RefusedWrite, FailsTheTargetAndTheSenderAndWritesNothing) {
  const BadWrite bad = GetParam();
  expect_all_succeeded(run_ranks(2, [bad](Rank& rank) {
    if (rank.boot.rank() == 0 && (bad == BadWrite::kAbsurdLength || bad == BadWrite::kWrapAround))
      return impostor_for_refused_write(rank, bad);
    return refused_write_rank(rank, bad);
  }));
}

INSTANTIATE_TEST_SUITE_P(Tcp, RefusedWrite,
                         ::testing::Values(BadWrite::kDeregistered, BadWrite::kUnknownRkey,
                                           BadWrite::kBeforeRegion, BadWrite::kPastEnd,
                                           BadWrite::kTooLong, BadWrite::kAbsurdLength,
                                           BadWrite::kWrapAround),
                         [](const auto& info) {
                           return std::string(kBadWriteNames[int(info.param)]);
                         });

// What an impostor rank 0 sends after setup, and what the real rank 1 must
// conclude.
enum class Injection {
  kGarbage,           // random bytes
  kBadMagic,          // a header whose magic is wrong
  kUnknownType,       // a header of an unknown frame type
  kReservedSet,       // a header with its reserved word set
  kHugeAbort,         // an abort frame longer than any abort text
  kTruncatedHeader,   // half a header, then close
  kTruncatedPayload,  // a flag write with 4 of its 8 bytes, then close
  kValidThenGarbage,  // a valid flag write lands, then garbage
  kValidThenClose,    // a valid write lands, then the connection closes
};
// Test names, in the order of Injection.
const char* const kInjectionNames[] = {"Garbage",          "BadMagic",         "UnknownType",
                                       "ReservedSet",      "HugeAbort",        "TruncatedHeader",
                                       "TruncatedPayload", "ValidThenGarbage", "ValidThenClose"};

constexpr uint64_t kValidValue = 0x0123456789abcdefull;

int inject(Rank& rank, Injection what) {
  Impostor imp(rank);
  const int fd = imp.join_and_greet();
  CHILD_CHECK(fd >= 0, "connect: %s", std::strerror(errno));
  const auto remote = exchange_regions(rank.boot, nullptr);
  const RemoteRegion target = remote[1];
  const uint64_t eight = 0xdeadbeefdeadbeefull;
  bool sent = true;
  switch (what) {
    case Injection::kGarbage: {
      uint8_t junk[200];
      for (size_t i = 0; i < sizeof junk; ++i) junk[i] = uint8_t(i * 37 + 11);
      sent = Impostor::send_all(fd, junk, sizeof junk);
      break;
    }
    case Injection::kBadMagic: {
      const FrameHeader h{0x12345678, tcp_wire::kWriteFrame, target.rkey, 0, target.addr, 8};
      sent = Impostor::send_all(fd, &h, sizeof h) && Impostor::send_all(fd, &eight, 8);
      break;
    }
    case Injection::kUnknownType:
      sent = Impostor::send_frame(fd, 99, target.rkey, target.addr, 8, &eight, 8);
      break;
    case Injection::kReservedSet: {
      const FrameHeader h{
          tcp_wire::kFrameMagic, tcp_wire::kWriteFrame, target.rkey, 1, target.addr, 8};
      sent = Impostor::send_all(fd, &h, sizeof h) && Impostor::send_all(fd, &eight, 8);
      break;
    }
    case Injection::kHugeAbort:
      sent = Impostor::send_frame(fd, tcp_wire::kAbortFrame, 0, 0, uint64_t(1) << 40, &eight, 8);
      break;
    case Injection::kTruncatedHeader: {
      const FrameHeader h{
          tcp_wire::kFrameMagic, tcp_wire::kWriteFrame, target.rkey, 0, target.addr, 8};
      sent = Impostor::send_all(fd, &h, sizeof h / 2);
      break;
    }
    case Injection::kTruncatedPayload:
      sent =
          Impostor::send_frame(fd, tcp_wire::kWriteFrame, target.rkey, target.addr, 8, &eight, 4);
      break;
    case Injection::kValidThenGarbage:
    case Injection::kValidThenClose:
      sent = Impostor::send_frame(fd, tcp_wire::kWriteFrame, target.rkey, target.addr, 8,
                                  &kValidValue, 8);
      if (what == Injection::kValidThenGarbage) {
        const char junk[] = "GET / HTTP/1.0\r\n\r\n and then some more bytes";
        sent = sent && Impostor::send_all(fd, junk, sizeof junk);
      }
      break;
  }
  CHILD_CHECK(sent, "send: %s", std::strerror(errno));
  const bool closes = what == Injection::kTruncatedHeader || what == Injection::kTruncatedPayload ||
                      what == Injection::kValidThenClose;
  if (closes) close(fd);
  const bool ok = side_barrier(rank, "done", {0, 1});
  if (!closes) close(fd);
  return ok ? 0 : 1;
}

int injected_target(Rank& rank, Injection what) {
  auto t = eager_transport(rank);
  GuardedBuffer buffer(4096);
  MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
  exchange_regions(rank.boot, mr);
  Waiter wait{*t};
  const bool lost = what == Injection::kTruncatedHeader || what == Injection::kTruncatedPayload ||
                    what == Injection::kValidThenClose;
  const int status = lost ? COLL_ERR_PEER_LOST : COLL_ERR_TRANSPORT;
  CHILD_CHECK(wait.fails_with(status, 0), "want status %d, got %d/%d: %s", status,
              wait.error_status, wait.thrown_status, wait.thrown.c_str());
  CHILD_CHECK(contains(wait.thrown, "rank 0"), "message names the sender: %s", wait.thrown.c_str());
  const char* why =
      lost ? (what == Injection::kValidThenClose ? "closed" : "truncated") : "malformed";
  CHILD_CHECK(contains(wait.thrown, why), "message says '%s': %s", why, wait.thrown.c_str());
  if (what == Injection::kValidThenGarbage || what == Injection::kValidThenClose) {
    uint64_t landed;
    std::memcpy(&landed, buffer.data(), 8);
    CHILD_CHECK(landed == kValidValue, "the valid write before did not land");
    std::memset(buffer.data(), GuardedBuffer::kFill, 8);  // so that the check below holds
  }
  CHILD_CHECK(buffer.first_written() < 0, "byte %ld of the region written", buffer.first_written());
  CHILD_CHECK(buffer.first_bad_canary() < 0, "canary %ld changed", buffer.first_bad_canary());
  // Still failed, with the same message.
  Waiter again{*t};
  CHILD_CHECK(!again.capture(0) && again.thrown == wait.thrown, "sticky: %s", again.thrown.c_str());
  return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
}

class InjectedBytes : public ::testing::TestWithParam<Injection> {};

TEST_P(InjectedBytes, AreAnErrorNotACrashNorAWrite) {
  const Injection what = GetParam();
  expect_all_succeeded(run_ranks(2, [what](Rank& rank) {
    return rank.boot.rank() == 0 ? inject(rank, what) : injected_target(rank, what);
  }));
}

INSTANTIATE_TEST_SUITE_P(
    Tcp, InjectedBytes,
    ::testing::Values(Injection::kGarbage, Injection::kBadMagic, Injection::kUnknownType,
                      Injection::kReservedSet, Injection::kHugeAbort, Injection::kTruncatedHeader,
                      Injection::kTruncatedPayload, Injection::kValidThenGarbage,
                      Injection::kValidThenClose),
    [](const auto& info) { return std::string(kInjectionNames[int(info.param)]); });

// Strangers on the listening port during the eager mesh's setup - garbage,
// a hello without the secret, a replayed hello, a silent connection, a
// flood - are dropped, and the real rank 0 gets in. After setup the port
// is closed and no stranger's connection is kept: nobody can connect at
// all. (The lazy transport's listener stays open: the case at the end.)
TEST(TcpTransport, StrangersAtSetupAreDroppedAndTheEagerPortClosesAfterwards) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    if (rank.boot.rank() == 1) {
      auto t = eager_transport(rank);
      GuardedBuffer buffer(4096);
      MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
      exchange_regions(rank.boot, mr);
      Waiter wait{*t};
      CHILD_CHECK(wait.until(
                      [&] {
                        uint64_t v;
                        std::memcpy(&v, buffer.data(), 8);
                        return v == kValidValue;
                      },
                      0),
                  "the impostor's valid write: %s", wait.thrown.c_str());
      CHILD_CHECK(buffer.first_bad_canary() < 0, "canary");
      return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
    }
    Impostor imp(rank);
    const tcp_wire::Address peer = imp.join();
    // The port is on the announced address only: not on loopback (nor any
    // other address) when the announced one is another.
    if (!peer.bound_any && std::strcmp(peer.ip, "127.0.0.1") != 0) {
      tcp_wire::Address loopback = peer;
      loopback.bound_any = 1;  // dial() then uses 127.0.0.1
      errno = 0;
      const int on_loopback = Impostor::dial(loopback);
      CHILD_CHECK(on_loopback < 0 && errno == ECONNREFUSED,
                  "rank 1 listens on 127.0.0.1 too (announced %s): fd %d, %s", peer.ip, on_loopback,
                  std::strerror(errno));
    }
    // Garbage, shorter than a hello: rank 1 waits for the rest (bounded).
    int junk = Impostor::dial(peer);
    CHILD_CHECK(junk >= 0 && Impostor::send_all(junk, "hello there, this is no hello", 29), "junk");
    // A well-formed hello without the job's secret: dropped, no welcome.
    int wrong = Impostor::dial(peer);
    tcp_wire::Challenge c{};
    CHILD_CHECK(wrong >= 0 && Impostor::recv_all(wrong, &c, sizeof c) &&
                    c.magic == tcp_wire::kChallengeMagic,
                "a challenge first");
    const tcp_wire::Hello guessed =
        Impostor::hello_for(std::string(job_secret::kSecretBytes, '\0'), c);
    CHILD_CHECK(Impostor::send_all(wrong, &guessed, sizeof guessed), "wrong secret");
    CHILD_CHECK(Impostor::closed_by_peer(wrong), "a hello without the secret was not dropped");
    // A replayed hello: proved with the secret, but for another
    // connection's challenge (as one seen on the wire would be).
    int first = Impostor::dial(peer), second = Impostor::dial(peer);
    tcp_wire::Challenge c1{}, c2{};
    CHILD_CHECK(first >= 0 && second >= 0 && Impostor::recv_all(first, &c1, sizeof c1) &&
                    Impostor::recv_all(second, &c2, sizeof c2),
                "two challenges");
    CHILD_CHECK(std::memcmp(c1.nonce, c2.nonce, sizeof c1.nonce) != 0, "a nonce used twice");
    const tcp_wire::Hello replay = Impostor::hello_for(rank.boot.secret(), c1);
    CHILD_CHECK(Impostor::send_all(second, &replay, sizeof replay), "replay");
    CHILD_CHECK(Impostor::closed_by_peer(second), "a replayed hello was not dropped");
    close(first);
    close(second);
    int silent = Impostor::dial(peer);
    CHILD_CHECK(silent >= 0, "silent");
    close(silent);
    // A flood of idle connections, more than rank 1 holds unidentified:
    // the real rank 0 still gets in.
    std::vector<int> flood;
    for (int i = 0; i < 200; ++i) {
      const int f = Impostor::dial(peer);
      CHILD_CHECK(f >= 0, "flood connection %d: %s", i, std::strerror(errno));
      flood.push_back(f);
    }
    int fd = Impostor::dial(peer);
    CHILD_CHECK(fd >= 0 && Impostor::greet(fd, rank.boot.secret()), "the real handshake");
    const auto remote = exchange_regions(rank.boot, nullptr);
    // Rank 1's setup is over (it traded regions): its port must be closed,
    // and it holds no stranger's connection any more.
    errno = 0;
    int late = Impostor::dial(peer);
    CHILD_CHECK(late < 0 && errno == ECONNREFUSED, "a connection after setup: fd %d, %s", late,
                std::strerror(errno));
    CHILD_CHECK(Impostor::closed_by_peer(junk), "the garbage connection is still open");
    for (int f : flood) {
      CHILD_CHECK(Impostor::closed_by_peer(f), "a flood connection is still open");
      close(f);
    }
    CHILD_CHECK(Impostor::send_frame(fd, tcp_wire::kWriteFrame, remote[1].rkey, remote[1].addr, 8,
                                     &kValidValue, 8),
                "valid write");
    const bool ok = side_barrier(rank, "done", {0, 1});
    close(junk);
    close(wrong);
    close(fd);
    return ok ? 0 : 1;
  }));
}

// Ranks whose secrets differ never connect: both time out, and the
// messages say what failed without printing a secret or a proof.
class OtherSecret final : public Bootstrap {
 public:
  OtherSecret(Bootstrap& inner, std::string secret) : inner_(inner), secret_(std::move(secret)) {}
  const char* name() const override { return "other-secret"; }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::string job_id() const override { return inner_.job_id(); }
  const std::string& secret() const override { return secret_; }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double timeout_s) override {
    return inner_.allgather(mine, timeout_s);
  }

 private:
  Bootstrap& inner_;
  std::string secret_;
};

TEST(TcpTransport, RanksWithDifferentSecretsDoNotConnectEagerly) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    const int r = rank.boot.rank();
    OtherSecret boot(rank.boot, std::string(job_secret::kSecretBytes, char('a' + r)));
    TransportOptions o = options();
    o.timeout_s = 2;
    setenv("COLL_TCP_CONNECT", "eager", 1);
    try {
      make_tcp_transport(boot, o);
    } catch (const Error& e) {
      const std::string m = e.what();
      CHILD_CHECK(e.status() == COLL_ERR_TIMEOUT, "status %d: %s", e.status(), m.c_str());
      const char* says = r == 0 ? "does it hold this rank's job secret"
                                : "claiming rank 0 without this job's secret";
      CHILD_CHECK(contains(m, says), "message does not say '%s': %s", says, m.c_str());
      CHILD_CHECK(!contains(m, "aaaa") && !contains(m, "bbbb"), "a secret in: %s", m.c_str());
      return 0;
    }
    CHILD_CHECK(false, "rank %d connected to a rank with another secret", r);
  }));
}

// ------------------------------------------------------------ lost peers

// Rank 2 leaves right after setup (exit without cleanup, or SIGKILL): the
// others see COLL_ERR_PEER_LOST naming rank 2 from check_peer(2), and a
// write to it fails at post; rank 2 alone is lost: ranks 0 and 1 go on
// writing to each other on their stream, with no error completion.
void lost_peer_case(bool killed) {
  const auto statuses = run_ranks(3, [killed](Rank& rank) {
    auto t = make_tcp_transport(rank.boot, options());
    auto* window = static_cast<uint64_t*>(t->alloc_window(4096));
    MemoryRegion* mr = t->reg_write(window, 4096);
    const auto remote = exchange_regions(rank.boot, mr);
    const int me = rank.boot.rank();
    if (me == 0 || me == 1) {  // every pair has its stream before rank 2 goes
      const uint64_t hello = 1;
      for (int peer : {1 - me, 2})
        CHILD_CHECK(t->post_write(peer, 0, &hello, 8, nullptr, 0,
                                  remote[size_t(peer)].addr + 8 * size_t(me),
                                  remote[size_t(peer)].rkey) == 0,
                    "a first write to %d", peer);
    }
    Waiter wait{*t};
    if (me == 2) {
      CHILD_CHECK(wait.until([&] {
        return __atomic_load_n(&window[0], __ATOMIC_ACQUIRE) == 1 &&
               __atomic_load_n(&window[1], __ATOMIC_ACQUIRE) == 1;
      }, 0), "both first writes: %s", wait.thrown.c_str());
      if (killed) raise(SIGKILL);
      std::fflush(nullptr);
      _exit(0);  // no destructor: the kernel closes the sockets
    }
    CHILD_CHECK(wait.fails_with(COLL_ERR_PEER_LOST, 2), "status %d/%d: %s", wait.error_status,
                wait.thrown_status, wait.thrown.c_str());
    CHILD_CHECK(wait.error_status == 0, "an error completion (%d): only rank 2 is lost",
                wait.error_status);
    CHILD_CHECK(contains(wait.thrown, ("rank " + std::to_string(me) + " lost rank 2 over tcp").c_str()),
                "message: %s", wait.thrown.c_str());
    const uint64_t value = 10 + uint64_t(me);
    errno = 0;
    CHILD_CHECK(t->post_write(2, 0, &value, 8, nullptr, kWriteSignaled, remote[2].addr,
                              remote[2].rkey) != 0,
                "a write to the lost rank 2 posts");
    // The other stream works: a signaled write each way, and its completion.
    const int other = 1 - me;
    Waiter go_on{*t};
    CHILD_CHECK(t->post_write(other, 5, &value, 8, nullptr, kWriteSignaled,
                              remote[size_t(other)].addr + 64, remote[size_t(other)].rkey) == 0,
                "a write to %d after rank 2 was lost", other);
    CHILD_CHECK(go_on.until([&] {
      return go_on.has_completed(5) &&
             __atomic_load_n(&window[8], __ATOMIC_ACQUIRE) == 10 + uint64_t(other);
    }, other), "rank %d's write after the loss: %d/%d %s", other, go_on.error_status,
                go_on.thrown_status, go_on.thrown.c_str());
    // Ranks 0 and 1 stay until both have seen it: an exit would be a
    // second lost peer for the other.
    return side_barrier(rank, "seen", {0, 1}) ? 0 : 1;
  });
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0], 0);
  EXPECT_EQ(statuses[1], 0);
  EXPECT_EQ(statuses[2], killed ? -1 : 0);
}

TEST(TcpTransport, APeerThatExitsIsLost) { lost_peer_case(false); }
TEST(TcpTransport, APeerThatIsKilledIsLost) { lost_peer_case(true); }

// ------------------------------------------------------------ line writes

// A line message as the target must hold it: line j at 64 j is the flag,
// then bytes [56 j, 56 j + 56) of the message (nothing else of the line
// changes: the rest of a last line keeps what was there).
bool holds_lines(const uint8_t* at, const uint8_t* message, size_t len, uint64_t flag,
                 uint8_t untouched) {
  const size_t lines = tcp_wire::frame_lines(8 + len);
  for (size_t j = 0; j < lines; ++j) {
    uint64_t got;
    std::memcpy(&got, at + 64 * j, 8);
    if (got != flag) return false;
    for (size_t b = 0; b < tcp_wire::kLinePayload; ++b) {
      const size_t i = 56 * j + b;
      if (at[64 * j + 8 + b] != (i < len ? message[i] : untouched)) return false;
    }
  }
  return true;
}

// Lengths of the line messages each rank sends: empty, within one line,
// exactly one, two, four, the channel's largest (5 lines, one frame) and
// longer ones that take several frames.
const size_t kLineLengths[] = {0, 1, 8, 55, 56, 57, 112, 200, 224, 225, 280, 281, 500, 1000};
constexpr int kLineMessages = int(sizeof kLineLengths / sizeof kLineLengths[0]);
constexpr size_t kLineArea = 19 * 64;  // per message: room for the 18 lines of 1000 bytes

// Every rank sends every line message to every peer and to itself; a
// target that sees message k's last line checks all of messages 1..k
// (frames apply in order). Then the refusals: a misaligned address is
// refused at post, and a lines frame with a bad rkey fails the target.
int line_writes_rank(Rank& rank) {
  const int me = rank.boot.rank(), n = rank.boot.size();
  auto t = make_tcp_transport(rank.boot, options());
  CHILD_CHECK(t->line_writes(1 - me), "tcp writes lines");
  const size_t area = kLineArea * kLineMessages;
  GuardedBuffer buffer(area * size_t(n));
  MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
  const auto remote = exchange_regions(rank.boot, mr);
  Waiter wait{*t};
  std::vector<uint8_t> source(1000);
  auto flag_of = [](int k) { return (uint64_t(k + 1) << 32) | kLineLengths[k]; };
  for (int k = 0; k < kLineMessages; ++k)
    for (int peer = 0; peer < n; ++peer) {
      for (size_t i = 0; i < kLineLengths[k]; ++i) source[i] = pattern(me, k, i);
      const RemoteRegion& r = remote[size_t(peer)];
      CHILD_CHECK(t->post_lines(peer, source.data(), kLineLengths[k], flag_of(k),
                                r.addr + area * size_t(me) + kLineArea * size_t(k), r.rkey) == 0,
                  "lines %d to %d: %s", k, peer, std::strerror(errno));
      std::memset(source.data(), 0xEE, source.size());  // taken at post
    }
  std::vector<uint8_t> expect(1000);
  for (int peer = 0; peer < n; ++peer) {
    const uint8_t* from = buffer.data() + area * size_t(peer);
    const int last = kLineMessages - 1;
    const size_t last_line = tcp_wire::frame_lines(8 + kLineLengths[last]) - 1;
    CHILD_CHECK(wait.until(
                    [&] {
                      return __atomic_load_n(reinterpret_cast<const uint64_t*>(
                                                 from + kLineArea * last + 64 * last_line),
                                             __ATOMIC_ACQUIRE) == flag_of(last);
                    },
                    peer),
                "last line from %d: %s", peer, wait.thrown.c_str());
    for (int k = 0; k < kLineMessages; ++k) {
      for (size_t i = 0; i < kLineLengths[k]; ++i) expect[i] = pattern(peer, k, i);
      CHILD_CHECK(holds_lines(from + kLineArea * size_t(k), expect.data(), kLineLengths[k],
                              flag_of(k), GuardedBuffer::kFill),
                  "line message %d (%zu bytes) from rank %d", k, kLineLengths[k], peer);
    }
  }
  CHILD_CHECK(buffer.first_bad_canary() < 0, "canary %ld changed", buffer.first_bad_canary());
  errno = 0;
  CHILD_CHECK(t->post_lines(1 - me, source.data(), 8, 1, remote[size_t(1 - me)].addr + 8,
                            remote[size_t(1 - me)].rkey) == -1 &&
                  errno == EINVAL,
              "misaligned lines: errno %d", errno);
  rank.boot.barrier(kTimeout);
  if (me == 0) {
    CHILD_CHECK(t->post_lines(1, source.data(), 8, 1, remote[1].addr, remote[1].rkey + 1000) == 0,
                "posts; the target refuses");
  } else {
    CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, 0), "rank 1: %d/%d %s", wait.error_status,
                wait.thrown_status, wait.thrown.c_str());
    CHILD_CHECK(contains(wait.thrown, "names no registered region"), "message: %s",
                wait.thrown.c_str());
  }
  return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
}

TEST(TcpTransport, LineWritesLandAsLinesInOrderOnTwoRanks) {
  expect_all_succeeded(run_ranks(2, line_writes_rank));
}

// A data write that no flag follows still lands, whatever its size: a
// transport that held data back for the flag it expects (MSG_MORE, tried
// and dropped: a rank that returns to its application after a write would
// leave it in the kernel for up to 200 ms) must push it.
TEST(TcpTransport, DataWithNoFlagAfterItLands) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    const int me = rank.boot.rank(), peer = 1 - me;
    auto t = make_tcp_transport(rank.boot, options());
    const size_t sizes[] = {1, 100, 4096, 70000};
    size_t total = 0;
    for (size_t len : sizes) total += len;
    GuardedBuffer buffer(total);
    MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
    const auto remote = exchange_regions(rank.boot, mr);
    Waiter wait{*t};
    std::vector<uint8_t> source(70000);
    size_t at = 0;
    for (int k = 0; k < 4; ++k) {
      for (size_t i = 0; i < sizes[k]; ++i) source[i] = pattern(me, k, i);
      CHILD_CHECK(t->post_write(peer, 0, source.data(), sizes[k], nullptr, 0,
                                remote[size_t(peer)].addr + at, remote[size_t(peer)].rkey) == 0,
                  "write %d", k);
      // The peer's whole write arrives without any write after it.
      std::vector<uint8_t> expect(sizes[k]);
      for (size_t i = 0; i < sizes[k]; ++i) expect[i] = pattern(peer, k, i);
      CHILD_CHECK(
          wait.until([&] { return std::memcmp(buffer.data() + at, expect.data(), sizes[k]) == 0; },
                     peer),
          "write %d (%zu bytes) from the peer: %s", k, sizes[k], wait.thrown.c_str());
      at += sizes[k];
    }
    rank.boot.barrier(kTimeout);
    return 0;
  }));
}

// A stream of coalesced frames of every kind, as an impostor rank 0 sends
// it: per round, in one 512-byte area of rank 1's region,
//   8-byte write at 0, lines (100 bytes) at 64, 40-byte write at 192,
//   empty lines at 256, and the round's 8-byte mark at 320, last.
// Round s is sent cut at byte s (a pause between the parts, so that the
// target reads the first part alone), round 0 whole: every frame is split
// at every byte boundary once, header and payload, and several frames
// arrive in one read. The target must apply every round exactly.
constexpr size_t kRoundArea = 512;

std::string round_stream(uint64_t base, uint32_t rkey, int round) {
  std::string s;
  auto frame = [&](uint32_t type, uint64_t addr, const std::string& payload) {
    const FrameHeader h{tcp_wire::kFrameMagic, type, rkey, 0, addr, payload.size()};
    s.append(reinterpret_cast<const char*>(&h), sizeof h);
    s += payload;
  };
  auto word = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
  auto bytes = [&](int block, size_t len) {
    std::string b(len, 0);
    for (size_t i = 0; i < len; ++i) b[i] = char(pattern(round, block, i));
    return b;
  };
  frame(tcp_wire::kWriteFrame, base, word(0x1000u + uint64_t(round)));
  frame(tcp_wire::kLinesFrame, base + 64, word((uint64_t(round + 1) << 32) | 100) + bytes(1, 100));
  frame(tcp_wire::kWriteFrame, base + 192, bytes(2, 40));
  frame(tcp_wire::kLinesFrame, base + 256, word(uint64_t(round + 1) << 32));
  frame(tcp_wire::kWriteFrame, base + 320, word(uint64_t(round + 1)));
  return s;
}

// The bytes of round `round` in the target's region must be exactly these.
bool round_landed(const uint8_t* area, int round) {
  uint64_t w;
  std::memcpy(&w, area, 8);
  if (w != 0x1000u + uint64_t(round)) return false;
  std::vector<uint8_t> message(100);
  for (size_t i = 0; i < 100; ++i) message[i] = pattern(round, 1, i);
  if (!holds_lines(area + 64, message.data(), 100, (uint64_t(round + 1) << 32) | 100,
                   GuardedBuffer::kFill))
    return false;
  for (size_t i = 0; i < 40; ++i)
    if (area[192 + i] != pattern(round, 2, i)) return false;
  if (!holds_lines(area + 256, nullptr, 0, uint64_t(round + 1) << 32, GuardedBuffer::kFill))
    return false;
  std::memcpy(&w, area + 320, 8);
  if (w != uint64_t(round + 1)) return false;
  // Nothing else of the area was written.
  for (size_t i = 0; i < kRoundArea; ++i) {
    const bool written = i < 8 || (i >= 64 && i < 192) || (i >= 192 && i < 232) ||
                         (i >= 256 && i < 320) || (i >= 320 && i < 328);
    if (!written && area[i] != GuardedBuffer::kFill) return false;
  }
  return true;
}

int stream_rounds() {
  return int(round_stream(0, 0, 0).size());  // round 0 whole, then a cut at every byte
}

// post_message: the data, then its flag, each landing whole and the flag
// only after all of the data (a reader that sees the flag reads it all),
// to a peer and to itself, at sizes that fill the socket several times.
TEST(TcpTransport, AMessagesFlagLandsAfterItsData) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    const int me = rank.boot.rank(), peer = 1 - me;
    auto t = make_tcp_transport(rank.boot, options());
    const size_t sizes[] = {1, 57, 4096, 70000, 3 << 20};
    constexpr size_t kFlags = 64;  // the flags first, then the data
    const size_t bytes = kFlags + (3 << 20);
    GuardedBuffer buffer(bytes);
    MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
    const auto remote = exchange_regions(rank.boot, mr);
    Waiter wait{*t};
    std::vector<uint8_t> source(3 << 20);
    const auto* flags = reinterpret_cast<const uint64_t*>(buffer.data());
    for (int k = 0; k < 5; ++k) {
      for (int to : {peer, me}) {
        const int from = to == me ? me : peer;
        for (size_t i = 0; i < sizes[k]; ++i) source[i] = pattern(me, k + 10 * (to == me), i);
        const RemoteRegion& r = remote[size_t(to)];
        CHILD_CHECK(t->post_message(to, source.data(), sizes[k], r.addr + kFlags,
                                    uint64_t(k + 1), r.addr + 8 * uint64_t(to == me), r.rkey) == 0,
                    "message %d to %d: %s", k, to, std::strerror(errno));
        const int at = to == me ? 1 : 0;
        CHILD_CHECK(wait.until([&] { return __atomic_load_n(&flags[at], __ATOMIC_ACQUIRE) ==
                                            uint64_t(k + 1); },
                               peer),
                    "flag of message %d from %d: %s", k, from, wait.thrown.c_str());
        for (size_t i = 0; i < sizes[k]; ++i)
          CHILD_CHECK(buffer.data()[kFlags + i] == pattern(from, k + 10 * (to == me), i),
                      "message %d (%zu bytes) from %d: byte %zu not there at its flag", k,
                      sizes[k], from, i);
        rank.boot.barrier(kTimeout);  // both read before the next overwrites
      }
    }
    return 0;
  }));
}

// Credits (kWriteDeferrable) may be held back, but never past the next
// frame to their peer, nor past this rank's next poll, and the latest
// value at an address is the one that lands. Rank 0 never polls while rank
// 1 waits, so a credit held any longer hangs the case (a failure, at the
// bound). A credit to a peer without a stream yet is sent at once.
TEST(TcpTransport, HeldBackCreditsLandWithTheNextFrameOrAtTheNextPoll) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    const int me = rank.boot.rank();
    auto t = make_tcp_transport(rank.boot, options());
    auto* window = static_cast<uint8_t*>(t->alloc_window(kWindowBytes));
    MemoryRegion* mr = t->reg_write(window, kWindowBytes);
    const auto remote = exchange_regions(rank.boot, mr);
    const auto* word = reinterpret_cast<const uint64_t*>(window);  // 0, 1: credits; 2: a flag
    auto post = [&](uint64_t value, int index, int flags) {
      return t->post_write(1, 0, &value, sizeof value, nullptr, flags,
                           remote[1].addr + 8 * uint64_t(index), remote[1].rkey) == 0;
    };
    Waiter wait{*t};
    auto seen = [&](int index, uint64_t value) {
      return wait.until([&] { return __atomic_load_n(&word[index], __ATOMIC_ACQUIRE) == value; }, 0);
    };
    if (me == 0) {
      // No stream yet: sent now, while this rank sits in the barrier below.
      CHILD_CHECK(post(1, 0, kWriteDeferrable), "first credit: %s", std::strerror(errno));
      rank.boot.barrier(kTimeout);
      // Held, superseded, then carried by the flag's frame.
      CHILD_CHECK(post(2, 0, kWriteDeferrable) && post(3, 0, kWriteDeferrable) &&
                      post(5, 1, kWriteDeferrable) && post(1, 2, 0),
                  "credits and flag: %s", std::strerror(errno));
      rank.boot.barrier(kTimeout);
      // Held, then sent by one poll.
      CHILD_CHECK(post(4, 0, kWriteDeferrable), "credit: %s", std::strerror(errno));
      Completion wc[4];
      CHILD_CHECK(t->poll(wc, 4) == 0, "a completion for an unsignaled write");
      rank.boot.barrier(kTimeout);
    } else {
      CHILD_CHECK(seen(0, 1), "the first credit did not land: %s", wait.thrown.c_str());
      rank.boot.barrier(kTimeout);
      CHILD_CHECK(seen(2, 1), "the flag did not land: %s", wait.thrown.c_str());
      CHILD_CHECK(word[0] == 3 && word[1] == 5,
                  "at the flag, credits %llu and %llu, want 3 and 5: held past the next frame",
                  static_cast<unsigned long long>(word[0]),
                  static_cast<unsigned long long>(word[1]));
      rank.boot.barrier(kTimeout);
      CHILD_CHECK(seen(0, 4), "the credit held at the poll did not land: %s", wait.thrown.c_str());
      rank.boot.barrier(kTimeout);
    }
    rank.boot.barrier(kTimeout);
    return 0;
  }));
}

TEST(TcpTransport, CoalescedFramesSplitAtEveryByteApplyExactly) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    const int rounds = stream_rounds();
    if (rank.boot.rank() == 0) {
      Impostor imp(rank);
      const int fd = imp.join_and_greet();
      CHILD_CHECK(fd >= 0, "connect: %s", std::strerror(errno));
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // the parts go apart
      const auto remote = exchange_regions(rank.boot, nullptr);
      for (int r = 0; r < rounds; ++r) {
        const std::string s =
            round_stream(remote[1].addr + kRoundArea * uint64_t(r), remote[1].rkey, r);
        const size_t cut = size_t(r);
        CHILD_CHECK(Impostor::send_all(fd, s.data(), cut), "round %d, first part", r);
        if (cut > 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
        CHILD_CHECK(Impostor::send_all(fd, s.data() + cut, s.size() - cut), "round %d", r);
      }
      const bool ok = side_barrier(rank, "done", {0, 1});
      close(fd);
      return ok ? 0 : 1;
    }
    auto t = eager_transport(rank);
    GuardedBuffer buffer(kRoundArea * size_t(rounds));
    MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
    exchange_regions(rank.boot, mr);
    Waiter wait{*t};
    const auto* last_mark =
        reinterpret_cast<const uint64_t*>(buffer.data() + kRoundArea * size_t(rounds - 1) + 320);
    CHILD_CHECK(
        wait.until([&] { return __atomic_load_n(last_mark, __ATOMIC_ACQUIRE) == uint64_t(rounds); },
                   0),
        "last round: %s", wait.thrown.c_str());
    for (int r = 0; r < rounds; ++r)
      CHILD_CHECK(round_landed(buffer.data() + kRoundArea * size_t(r), r), "round %d (cut at %d)",
                  r, r);
    CHILD_CHECK(buffer.first_bad_canary() < 0, "canary %ld changed", buffer.first_bad_canary());
    CHILD_CHECK(wait.capture(0), "still healthy: %s", wait.thrown.c_str());
    return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
  }));
}

// A lines frame that is not one - shorter than its flag, longer than a
// frame's lines, or misaligned - is refused as malformed, and writes
// nothing.
enum class BadLines { kNoFlag, kTooLong, kMisaligned };
const char* const kBadLinesNames[] = {"NoFlag", "TooLong", "Misaligned"};

class MalformedLines : public ::testing::TestWithParam<BadLines> {};

TEST_P(MalformedLines, AreRefusedAndWriteNothing) {
  const BadLines bad = GetParam();
  expect_all_succeeded(run_ranks(2, [bad](Rank& rank) {
    if (rank.boot.rank() == 0) {
      Impostor imp(rank);
      const int fd = imp.join_and_greet();
      CHILD_CHECK(fd >= 0, "connect: %s", std::strerror(errno));
      const auto remote = exchange_regions(rank.boot, nullptr);
      std::vector<uint8_t> payload(8 + (tcp_wire::kMaxFrameLines + 1) * tcp_wire::kLinePayload, 0x77);
      uint64_t addr = remote[1].addr, length = 8;
      if (bad == BadLines::kNoFlag) length = 4;
      if (bad == BadLines::kTooLong) length = payload.size();
      if (bad == BadLines::kMisaligned) addr += 8;
      CHILD_CHECK(Impostor::send_frame(fd, tcp_wire::kLinesFrame, remote[1].rkey, addr, length,
                                       payload.data(), size_t(length)),
                  "send");
      const std::string text = Impostor::read_abort(fd);
      CHILD_CHECK(contains(text, "malformed lines frame"), "the sender is told why: '%s'",
                  text.c_str());
      const bool ok = side_barrier(rank, "done", {0, 1});
      close(fd);
      return ok ? 0 : 1;
    }
    auto t = eager_transport(rank);
    GuardedBuffer buffer(4096);
    MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
    exchange_regions(rank.boot, mr);
    Waiter wait{*t};
    CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, 0), "status %d/%d: %s", wait.error_status,
                wait.thrown_status, wait.thrown.c_str());
    CHILD_CHECK(contains(wait.thrown, "rank 0") && contains(wait.thrown, "malformed lines frame"),
                "message: %s", wait.thrown.c_str());
    CHILD_CHECK(buffer.first_written() < 0, "byte %ld written", buffer.first_written());
    CHILD_CHECK(buffer.first_bad_canary() < 0, "canary %ld changed", buffer.first_bad_canary());
    return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
  }));
}

INSTANTIATE_TEST_SUITE_P(Tcp, MalformedLines,
                         ::testing::Values(BadLines::kNoFlag, BadLines::kTooLong,
                                           BadLines::kMisaligned),
                         [](const auto& info) {
                           return std::string(kBadLinesNames[int(info.param)]);
                         });

// ------------------------------------------------------------ on first use

// No connection at setup; then every rank writes to every other at once,
// each first to its partner (me ^ 1), which writes to it at the same
// moment: crossing dials. Every write lands, and each pair shares one
// stream (n - 1 connections). Three rounds, each on a fresh transport.
TEST(TcpTransport, RanksThatWriteToEachOtherFirstAtOnceShareOneStreamPerPair) {
  expect_all_succeeded(run_ranks(4, [](Rank& rank) {
    const int me = rank.boot.rank(), n = rank.boot.size();
    constexpr size_t kArea = 4096, kFlags = 8 * kArea;
    for (int round = 0; round < 3; ++round) {
      auto t = make_tcp_transport(rank.boot, options());
      CHILD_CHECK(t->connections() == 0, "round %d: %d connections at setup", round,
                  t->connections());
      auto* window = static_cast<uint8_t*>(t->alloc_window(kWindowBytes));
      MemoryRegion* mr = t->reg_write(window, kWindowBytes);
      const auto remote = exchange_regions(rank.boot, mr);
      std::vector<uint8_t> source(kArea);
      for (size_t i = 0; i < kArea; ++i) source[i] = pattern(me, round, i);
      const uint64_t flag = uint64_t(round + 1);
      rank.boot.barrier(kTimeout);  // from here, all at once
      for (int k = 0; k < n; ++k) {
        const int peer = me ^ (k == 0 ? 1 : k ^ 1);  // the partner first, then the others
        if (peer == me || (k > 0 && peer == (me ^ 1))) continue;
        const RemoteRegion& r = remote[size_t(peer)];
        CHILD_CHECK(t->post_write(peer, 0, source.data(), kArea, nullptr, 0,
                                  r.addr + kArea * size_t(me), r.rkey) == 0 &&
                        t->post_write(peer, 0, &flag, 8, nullptr, 0,
                                      r.addr + kFlags + 8 * uint64_t(me), r.rkey) == 0,
                    "round %d: write to %d: %s", round, peer, std::strerror(errno));
      }
      Waiter wait{*t};
      const auto* flags = reinterpret_cast<const uint64_t*>(window + kFlags);
      for (int peer = 0; peer < n; ++peer) {
        if (peer == me) continue;
        CHILD_CHECK(
            wait.until([&] { return __atomic_load_n(&flags[peer], __ATOMIC_ACQUIRE) == flag; },
                       peer),
            "round %d: flag from %d: %s", round, peer, wait.thrown.c_str());
        for (size_t i = 0; i < kArea; ++i)
          CHILD_CHECK(window[kArea * size_t(peer) + i] == pattern(peer, round, i),
                      "round %d: byte %zu from %d", round, i, peer);
      }
      CHILD_CHECK(t->connections() == n - 1, "round %d: %d connections, want one a pair (%d)",
                  round, t->connections(), n - 1);
      rank.boot.barrier(kTimeout);  // nobody closes while the others read
    }
    return 0;
  }));
}

// Rank 2 exits before anyone dialed it: rank 0's first write to it, and
// rank 1's check on it while it waits for it, fail at once - its port
// refuses - with COLL_ERR_PEER_LOST naming it (the write at post). No hang,
// no timeout.
TEST(TcpTransport, AFirstWriteToAPeerThatIsGoneIsALostPeer) {
  const auto statuses = run_ranks(3, [](Rank& rank) {
    auto t = make_tcp_transport(rank.boot, options());
    MemoryRegion* mr = t->reg_write(t->alloc_window(4096), 4096);
    const auto remote = exchange_regions(rank.boot, mr);
    if (rank.boot.rank() == 2) {
      std::fflush(nullptr);
      _exit(0);  // no destructor: the kernel closes the listener
    }
    Waiter wait{*t};
    if (rank.boot.rank() == 0) {
      const uint64_t one = 1;
      CHILD_CHECK(t->post_write(2, 0, &one, 8, nullptr, 0, remote[2].addr, remote[2].rkey) != 0,
                  "a write to a rank whose port refuses posts");
    }
    CHILD_CHECK(wait.fails_with(COLL_ERR_PEER_LOST, 2), "status %d/%d: %s", wait.error_status,
                wait.thrown_status, wait.thrown.c_str());
    CHILD_CHECK(contains(wait.thrown, "lost rank 2") && contains(wait.thrown, "refuses"),
                "message: %s", wait.thrown.c_str());
    CHILD_CHECK(t->connections() == 0, "%d connections", t->connections());
    return side_barrier(rank, "seen", {0, 1}) ? 0 : 1;
  });
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_EQ(statuses[0], 0);
  EXPECT_EQ(statuses[1], 0);
  EXPECT_EQ(statuses[2], 0);
}

// A rank's `left` notices (kWriteLeaving, Channel::quiesce): the one to a
// peer it has a stream with lands; the one to a peer it never talked to
// is dropped, not dialed; and once every peer had its notice the rank
// takes no new connection, so that peer, waiting for it, is refused and
// knows at once (COLL_ERR_PEER_LOST) - although the rank is still alive.
TEST(TcpTransport, ALeavingRanksNoticeGoesOnExistingStreamsAndItsPortCloses) {
  expect_all_succeeded(run_ranks(3, [](Rank& rank) {
    const int me = rank.boot.rank();
    auto t = make_tcp_transport(rank.boot, options());
    auto* window = static_cast<uint64_t*>(t->alloc_window(4096));
    MemoryRegion* mr = t->reg_write(window, 4096);
    const auto remote = exchange_regions(rank.boot, mr);
    Waiter wait{*t};
    const uint64_t one = 1, left = 7;
    if (me == 0) {
      CHILD_CHECK(t->post_write(1, 0, &one, 8, nullptr, 0, remote[1].addr, remote[1].rkey) == 0,
                  "a write to rank 1");
      for (int peer : {1, 2})
        CHILD_CHECK(
            t->post_write(peer, uint64_t(peer), &left, 8, nullptr, kWriteSignaled | kWriteLeaving,
                          remote[size_t(peer)].addr + 8, remote[size_t(peer)].rkey) == 0,
            "the notice to %d", peer);
      CHILD_CHECK(wait.until([&] { return wait.has_completed(1) && wait.has_completed(2); }, 1),
                  "both notices complete: %s", wait.thrown.c_str());
      CHILD_CHECK(t->connections() == 1, "%d connections: the notice to 2 dialed",
                  t->connections());
      CHILD_CHECK(side_barrier(rank, "noticed", {0, 2}), "rank 2 is there");
    } else if (me == 1) {
      CHILD_CHECK(
          wait.until([&] { return __atomic_load_n(&window[1], __ATOMIC_ACQUIRE) == left; }, 0),
          "the notice: %s", wait.thrown.c_str());
      CHILD_CHECK(window[0] == one, "the write before it");
    } else {
      // Only now: a check on rank 0 before its notices dials it, and makes
      // the stream the notice then takes.
      CHILD_CHECK(side_barrier(rank, "noticed", {0, 2}), "rank 0's notices");
      CHILD_CHECK(wait.fails_with(COLL_ERR_PEER_LOST, 0), "status %d/%d: %s", wait.error_status,
                  wait.thrown_status, wait.thrown.c_str());
      CHILD_CHECK(contains(wait.thrown, "lost rank 0") && contains(wait.thrown, "refuses"),
                  "message: %s", wait.thrown.c_str());
      CHILD_CHECK(window[1] == 0, "a notice landed");
    }
    return side_barrier(rank, "done", {0, 1, 2}) ? 0 : 1;
  }));
}

// Lazy: ranks whose secrets differ try at the first write, and never
// connect: both time out, and the messages say what failed without
// printing a secret or a proof.
TEST(TcpTransport, RanksWithDifferentSecretsDoNotConnectAtTheFirstWrite) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    const int r = rank.boot.rank();
    OtherSecret boot(rank.boot, std::string(job_secret::kSecretBytes, char('a' + r)));
    TransportOptions o = options();
    o.timeout_s = 2;
    auto t = make_tcp_transport(boot, o);
    MemoryRegion* mr = t->reg_write(t->alloc_window(4096), 4096);
    const auto remote = exchange_regions(rank.boot, mr);
    const uint64_t one = 1;
    // The write fails at post once the handshake timed out; check_peer says
    // why (the peer is silent to this rank: COLL_ERR_TIMEOUT).
    CHILD_CHECK(t->post_write(1 - r, 0, &one, 8, nullptr, 0, remote[size_t(1 - r)].addr,
                              remote[size_t(1 - r)].rkey) != 0,
                "a write without a handshake posts");
    Waiter wait{*t};
    CHILD_CHECK(!wait.capture(1 - r) && wait.thrown_status == COLL_ERR_TIMEOUT, "status %d: %s",
                wait.thrown_status, wait.thrown.c_str());
    const char* says = r == 0 ? "does it hold this rank's job secret"
                              : "claiming rank 0 without this job's secret";
    CHILD_CHECK(contains(wait.thrown, says), "message does not say '%s': %s", says,
                wait.thrown.c_str());
    CHILD_CHECK(!contains(wait.thrown, "aaaa") && !contains(wait.thrown, "bbbb"), "a secret in: %s",
                wait.thrown.c_str());
    return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
  }));
}

// The lazy listener is open for the transport's life. The strangers of
// the eager case, now while rank 1 waits in the library, are dropped and
// the real rank 0 gets in; afterwards the port still takes connections and
// still drops strangers - garbage (within the 10 s a stranger has), a
// hello without the secret, a flood past the table - and a second genuine
// hello from rank 0, whose pair has its stream; the stream carries on.
TEST(TcpTransport, StrangersOnALazyRanksOpenPortAreDroppedForItsLife) {
  expect_all_succeeded(run_ranks(2, [](Rank& rank) {
    if (rank.boot.rank() == 1) {
      auto t = make_tcp_transport(rank.boot, options());
      GuardedBuffer buffer(4096);
      MemoryRegion* mr = t->reg_write(buffer.data(), buffer.length());
      exchange_regions(rank.boot, mr);
      Waiter wait{*t};
      for (uint64_t k = 0; k < 2; ++k)
        CHILD_CHECK(wait.until(
                        [&] {
                          uint64_t v;
                          std::memcpy(&v, buffer.data() + 8 * k, 8);
                          return v == kValidValue + k;
                        },
                        0),
                    "the impostor's valid write %d: %s", int(k), wait.thrown.c_str());
      CHILD_CHECK(buffer.first_bad_canary() < 0, "canary");
      CHILD_CHECK(t->connections() == 1, "%d connections", t->connections());
      return side_barrier(rank, "done", {0, 1}) ? 0 : 1;
    }
    // A port rank 1 may dial to check on rank 0 while it waits: it takes
    // the connection (the kernel does) and never says a word.
    const int mute = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t len = sizeof sa;
    CHILD_CHECK(bind(mute, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 &&
                    listen(mute, 16) == 0 &&
                    getsockname(mute, reinterpret_cast<sockaddr*>(&sa), &len) == 0,
                "a mute listener");
    Impostor imp(rank);
    const tcp_wire::Address peer = imp.join(ntohs(sa.sin_port));
    const auto remote = exchange_regions(rank.boot, nullptr);
    auto wrong_hello_dropped = [&] {
      const int fd = Impostor::dial(peer);
      tcp_wire::Challenge c{};
      const bool challenged =
          fd >= 0 && Impostor::recv_all(fd, &c, sizeof c) && c.magic == tcp_wire::kChallengeMagic;
      const tcp_wire::Hello guessed =
          Impostor::hello_for(std::string(job_secret::kSecretBytes, '\0'), c);
      const bool dropped = challenged && Impostor::send_all(fd, &guessed, sizeof guessed) &&
                           Impostor::closed_by_peer(fd);
      if (fd >= 0) close(fd);
      return dropped;
    };
    int junk = Impostor::dial(peer);
    CHILD_CHECK(junk >= 0 && Impostor::send_all(junk, "hello there, this is no hello", 29), "junk");
    CHILD_CHECK(wrong_hello_dropped(), "a hello without the secret was not dropped");
    int first = Impostor::dial(peer), second = Impostor::dial(peer);
    tcp_wire::Challenge c1{}, c2{};
    CHILD_CHECK(first >= 0 && second >= 0 && Impostor::recv_all(first, &c1, sizeof c1) &&
                    Impostor::recv_all(second, &c2, sizeof c2),
                "two challenges");
    const tcp_wire::Hello replay = Impostor::hello_for(rank.boot.secret(), c1);
    CHILD_CHECK(Impostor::send_all(second, &replay, sizeof replay), "replay");
    CHILD_CHECK(Impostor::closed_by_peer(second), "a replayed hello was not dropped");
    close(first);
    close(second);
    std::vector<int> flood;
    for (int i = 0; i < 200; ++i) {
      const int f = Impostor::dial(peer);
      CHILD_CHECK(f >= 0, "flood connection %d: %s", i, std::strerror(errno));
      flood.push_back(f);
    }
    int fd = Impostor::dial(peer);
    CHILD_CHECK(fd >= 0 && Impostor::greet(fd, rank.boot.secret()), "the real handshake");
    CHILD_CHECK(Impostor::send_frame(fd, tcp_wire::kWriteFrame, remote[1].rkey, remote[1].addr, 8,
                                     &kValidValue, 8),
                "valid write");
    // The stream is up; the port is still open, and still guarded.
    int late = Impostor::dial(peer);
    CHILD_CHECK(late >= 0 && Impostor::send_all(late, "late junk", 9), "a late connection: %s",
                std::strerror(errno));
    CHILD_CHECK(wrong_hello_dropped(), "a late hello without the secret was not dropped");
    int again = Impostor::dial(peer);
    tcp_wire::Challenge c3{};
    CHILD_CHECK(again >= 0 && Impostor::recv_all(again, &c3, sizeof c3), "a challenge");
    const tcp_wire::Hello genuine = Impostor::hello_for(rank.boot.secret(), c3);
    CHILD_CHECK(
        Impostor::send_all(again, &genuine, sizeof genuine) && Impostor::closed_by_peer(again),
        "a second connection of rank 0's was taken");
    for (int f : flood) {
      CHILD_CHECK(Impostor::closed_by_peer(f), "a flood connection is still open");
      close(f);
    }
    CHILD_CHECK(Impostor::closed_by_peer(junk) && Impostor::closed_by_peer(late),
                "a garbage connection is still open");
    const uint64_t next = kValidValue + 1;
    CHILD_CHECK(Impostor::send_frame(fd, tcp_wire::kWriteFrame, remote[1].rkey, remote[1].addr + 8,
                                     8, &next, 8),
                "second valid write");
    const bool ok = side_barrier(rank, "done", {0, 1});
    for (int f : {junk, late, again, fd, mute}) close(f);
    return ok ? 0 : 1;
  }));
}

// ------------------------------------------------------------ shm+tcp

// Four ranks that pretend to live on two hosts {0,1} and {2,3}: same-host
// pairs go through shared memory, the others through TCP, and one rkey from
// one reg_write serves both paths. Then a deregistered rkey fails on both:
// at the sender on shm (post_write, EACCES), at the target on tcp.
TEST(HybridTransport, OneRkeyServesBothPathsAndDeregEndsItOnBoth) {
  expect_all_succeeded(run_ranks(4, [](Rank& rank) {
    const int me = rank.boot.rank(), n = rank.boot.size();
    const std::vector<std::string> hosts = {"hostA", "hostA", "hostB", "hostB"};
    auto t = make_hybrid_transport(rank.boot, options(), hosts);
    CHILD_CHECK(std::strcmp(t->name(), "shm+tcp") == 0, "name %s", t->name());
    CHILD_CHECK(!t->needs_local_registration(), "copies at post");
    auto* window = static_cast<uint8_t*>(t->alloc_window(kWindowBytes));
    constexpr size_t kArea = 8192, kFlags = 4 * kArea;
    MemoryRegion* mr = t->reg_write(window, kWindowBytes);
    const auto remote = exchange_regions(rank.boot, mr);
    Waiter wait{*t};
    std::vector<uint8_t> source(kArea);
    for (size_t i = 0; i < kArea; ++i) source[i] = pattern(me, 1, i);
    for (int peer = 0; peer < n; ++peer) {  // oneself included
      const RemoteRegion& r = remote[size_t(peer)];
      CHILD_CHECK(t->post_write(peer, 0, source.data(), kArea, nullptr, 0,
                                r.addr + kArea * size_t(me), r.rkey) == 0,
                  "data to %d: %s", peer, std::strerror(errno));
      const uint64_t flag = 1;
      CHILD_CHECK(t->post_write(peer, uint64_t(100 + peer), &flag, 8, nullptr, kWriteSignaled,
                                r.addr + kFlags + 8 * uint64_t(me), r.rkey) == 0,
                  "flag to %d", peer);
    }
    auto* flags = reinterpret_cast<uint64_t*>(window + kFlags);
    for (int peer = 0; peer < n; ++peer) {
      CHILD_CHECK(
          wait.until([&] { return __atomic_load_n(&flags[peer], __ATOMIC_ACQUIRE) == 1; }, peer),
          "flag from %d: %s", peer, wait.thrown.c_str());
      for (size_t i = 0; i < kArea; ++i)
        CHILD_CHECK(window[kArea * size_t(peer) + i] == pattern(peer, 1, i), "byte %zu from %d", i,
                    peer);
      CHILD_CHECK(wait.until([&] { return wait.has_completed(uint64_t(100 + peer)); }, peer),
                  "completion of the flag to %d", peer);
    }
    rank.boot.barrier(kTimeout);

    // Rank 0 deregisters; rank 1 (same host) and rank 2 (other host) try.
    if (me == 0) CHILD_CHECK(t->dereg(mr) == 0, "dereg");
    rank.boot.barrier(kTimeout);
    const uint64_t poison = 0xbadbadbadbadbadull;
    if (me == 1) {
      errno = 0;
      CHILD_CHECK(
          t->post_write(0, 0, &poison, 8, nullptr, 0, remote[0].addr, remote[0].rkey) == -1 &&
              errno == EACCES,
          "shm write with a deregistered rkey: errno %d", errno);
    }
    if (me == 2) {
      CHILD_CHECK(t->post_write(0, 0, &poison, 8, nullptr, 0, remote[0].addr, remote[0].rkey) == 0,
                  "tcp posts; the target refuses");
      CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, 0), "rank 2: %s", wait.thrown.c_str());
    }
    if (me == 0) {
      CHILD_CHECK(wait.fails_with(COLL_ERR_TRANSPORT, 2), "rank 0: %d/%d %s", wait.error_status,
                  wait.thrown_status, wait.thrown.c_str());
      CHILD_CHECK(contains(wait.thrown, "from rank 2") &&
                      contains(wait.thrown, "names no registered region"),
                  "message: %s", wait.thrown.c_str());
      uint64_t first;
      std::memcpy(&first, window, 8);
      CHILD_CHECK(first != poison, "the refused write landed");
    }
    return side_barrier(rank, "done", {0, 1, 2, 3}) ? 0 : 1;
  }));
}

}  // namespace
}  // namespace coll
