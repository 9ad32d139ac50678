// The TCP backend (tcp_transport.cpp) for nodes without RDMA, and its wire
// format, which the tests use to craft frames.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/region_table.hpp"
#include "transport/transport.hpp"

namespace coll {

// Every rank reaches every other through TCP (COLL_TRANSPORT=tcp).
std::unique_ptr<Transport> make_tcp_transport(Bootstrap& boot, const TransportOptions& opts);

// The tcp half of the shm+tcp transport: connects only to the ranks marked
// in `reach`, and checks incoming writes against `regions`, the table of
// the shm half (one rkey space for both paths). It has no windows and
// registers nothing itself: reg_write and alloc_window throw
// (COLL_ERR_INTERNAL).
std::unique_ptr<Transport> make_tcp_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<bool>& reach,
                                                   const RegionEntry* regions);

// The byte stream between two ranks. Integers are in host byte order: the
// ranks of one job share an architecture.
namespace tcp_wire {

// A connection opens with a Hello from the lower rank, which names itself
// and proves that it took part in this job's bootstrap by quoting the
// token that the higher rank published there. Anything else is dropped.
inline constexpr uint64_t kHelloMagic = 0x6f6c6c6548706374ULL;  // "tcpHello"
struct Hello {
  uint64_t magic;
  uint32_t rank;   // the connecting rank
  uint32_t size;   // ranks in the job
  uint64_t token;  // the accepting rank's published token
};
static_assert(sizeof(Hello) == 24);

// Then frames, in both directions, applied by the receiver in order.
inline constexpr uint32_t kFrameMagic = 0x57544c43;  // "CLTW"
enum FrameType : uint32_t {
  kWriteFrame = 1,  // payload goes to remote_addr, checked against rkey
  kAbortFrame = 2,  // payload is text: the receiver of our frames refused
                    // one and has failed; we fail too, with its reason
};
inline constexpr uint64_t kMaxAbortText = 1024;
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
  uint64_t token;
  uint16_t port;
  uint8_t bound_any;  // listening on every address: peers in its network
                      // namespace may use 127.0.0.1
  char ip[47];        // numeric IPv4 (INET_ADDRSTRLEN fits)
  char host[256];     // host_identity(), truncated
  char netns[64];     // the network namespace (/proc/self/ns/net)
};

}  // namespace tcp_wire
}  // namespace coll
