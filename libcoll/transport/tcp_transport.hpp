// The TCP backend (tcp_transport.cpp) for nodes without RDMA, and its wire
// format, which the tests use to craft frames.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "transport/region_table.hpp"
#include "transport/transport.hpp"

namespace coll {

// Every rank reaches every other through TCP (COLL_TRANSPORT=tcp), over a
// connection made when one of the two first writes to the other
// (COLL_TCP_CONNECT=eager: all of them at setup); see tcp_transport.cpp.
std::unique_ptr<Transport> make_tcp_transport(Bootstrap& boot, const TransportOptions& opts);

// The tcp half of the shm+tcp transport: serves only the ranks marked in
// `reach` (and connects to them as the tcp transport does), and checks
// incoming writes against `regions`, the table of the shm half (one rkey
// space for both paths). It has no windows and registers nothing itself:
// reg_write and alloc_window throw (COLL_ERR_INTERNAL).
std::unique_ptr<Transport> make_tcp_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<bool>& reach,
                                                   const RegionEntry* regions);

// The byte stream between two ranks. Integers are in host byte order: the
// ranks of one job share an architecture.
namespace tcp_wire {

// A connection (made by whichever rank of the pair writes first, or by both
// at once: then the lower rank's stands) opens with a handshake of three
// fixed-size messages, and nothing larger is read before it is verified:
//   accepting rank -> connecting rank: Challenge, a fresh random nonce;
//   connecting -> accepting: Hello, naming both ranks and the job size,
//     with a nonce of its own and hello_proof() over both nonces;
//   accepting -> connecting: Welcome, with welcome_proof().
// A proof is HMAC-SHA256 keyed by the job's secret (Bootstrap::secret), so
// only a rank of this job makes one; it answers one connection's nonce, so
// a hello seen on another connection is worth nothing here; and a label
// apart for each direction (and apart from the rendezvous' own) keeps a
// welcome from passing for a hello. Anything else is dropped.
inline constexpr uint64_t kChallengeMagic = 0x6c6c616843706374ULL;  // "tcpChall"
inline constexpr uint64_t kHelloMagic = 0x6f6c6c6548706374ULL;      // "tcpHello"
inline constexpr uint64_t kWelcomeMagic = 0x6f636c6557706374ULL;    // "tcpWelco"
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;
inline constexpr const char* kHelloLabel = "libcoll tcp hello v1";
inline constexpr const char* kWelcomeLabel = "libcoll tcp welcome v1";

struct Challenge {
  uint64_t magic;
  uint8_t nonce[kNonceBytes];  // the accepting rank's, fresh per connection
};
static_assert(sizeof(Challenge) == 40);

struct Hello {
  uint64_t magic;
  uint32_t rank;               // the connecting rank
  uint32_t target;             // the accepting rank
  uint32_t size;               // ranks in the job
  uint32_t reserved;           // 0
  uint8_t nonce[kNonceBytes];  // the connecting rank's, for the welcome
  uint8_t proof[kProofBytes];  // hello_proof(secret, this hello, the challenge)
};
static_assert(sizeof(Hello) == 88);

struct Welcome {
  uint64_t magic;
  uint8_t proof[kProofBytes];  // welcome_proof(secret, the hello, the challenge)
};
static_assert(sizeof(Welcome) == 40);

// job_secret::prove over the hello's rank, target, size and nonce, for the
// challenge's nonce (the hello's own proof field is not part of it).
std::array<uint8_t, kProofBytes> hello_proof(std::string_view secret, const Hello& hello,
                                             const Challenge& challenge);
// The same statement, for the hello's nonce, under the welcome's label.
std::array<uint8_t, kProofBytes> welcome_proof(std::string_view secret, const Hello& hello,
                                               const Challenge& challenge);

// Then frames, in both directions, applied by the receiver in order.
inline constexpr uint32_t kFrameMagic = 0x57544c43;  // "CLTW"
enum FrameType : uint32_t {
  kWriteFrame = 1,  // payload goes to remote_addr, checked against rkey
  kAbortFrame = 2,  // payload is text: the receiver of our frames refused
                    // one and has failed; we fail too, with its reason
  kLinesFrame = 3,  // Transport::post_lines: payload is the 8-byte flag,
                    // then the message (length - 8 bytes, at most
                    // kMaxFrameLines lines' worth); the receiver writes line j
                    // at remote_addr + 64 j (64-byte aligned, checked against
                    // rkey over every line): bytes [56 j, 56 j + 56) of the
                    // message after 8 bytes, then the flag into the first 8
                    // with a release store. One frame instead of a data
                    // frame and a flag frame: one sendmsg per small message.
  kNoticeFrame = 4,  // an 8-byte write (kWriteNotice) that the receiver drops
                     // when rkey names no live region of its own any more:
                     // a failure or refusal notice to a communicator that
                     // the receiver has freed since, moot there.
};
inline constexpr uint64_t kMaxAbortText = 1024;
inline constexpr size_t kLineBytes = coll::kLineBytes;
inline constexpr size_t kLinePayload = coll::kLinePayload;
// Lines per frame; a longer line message goes as several frames. The
// channel's line messages fit in one.
inline constexpr size_t kMaxFrameLines = kMaxMessageLines;
// Lines a frame of `length` payload bytes (flag included) covers.
inline constexpr size_t frame_lines(uint64_t length) {
  return length <= 8 + kLinePayload ? 1 : size_t((length - 8 + kLinePayload - 1) / kLinePayload);
}
struct FrameHeader {
  uint32_t magic;
  uint32_t type;
  uint32_t rkey;
  uint32_t reserved;  // 0
  uint64_t remote_addr;
  uint64_t length;  // payload bytes that follow
};
static_assert(sizeof(FrameHeader) == 32);

// What each rank publishes through the bootstrap.
struct Address {
  uint16_t port;
  uint8_t bound_any;  // listening on every address: peers in its network
                      // namespace may use 127.0.0.1
  char ip[47];        // numeric IPv4 (INET_ADDRSTRLEN fits)
  char host[256];     // host_identity(), truncated
  char netns[64];     // the network namespace (/proc/self/ns/net)
};

}  // namespace tcp_wire
}  // namespace coll
