// Channel: data movement between ranks on one-sided writes. This is the only
// layer the algorithms use ("send a message", "receive one, use it in
// place, release it"); it knows windows and flow control, not collectives.
//
// Every rank's window holds one box per partner. The box of partner q in
// the window of rank p is written only by q:
//   ready[k]  8-byte flag of slot k: (sequence << 32) | length, written by q
//             after the data of its message (the transport's ordering
//             promise makes the data visible first);
//   credit    how many of p's messages to q that q has consumed: p may
//             reuse one of its slots in q's window only after q said so;
//   slot[k]   num_slots eager slots of slot_bytes each.
// A message m from q to p lives in slot m % num_slots; p polls ready[k] for
// sequence m+1. Sequences and credits run for the life of the
// communicator, so collectives need no extra synchronisation between them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "transport/transport.hpp"

namespace coll {

struct WindowLayout {
  static constexpr size_t kBoxHeaderBytes = 512;
  static constexpr size_t kReadyOffset = 0;    // uint64_t ready[16]
  static constexpr size_t kCreditOffset = 192;  // own cache line
  static constexpr int kMaxSlots = 16;

  size_t slot_bytes = 0;
  int num_slots = 0;
  int nranks = 0;

  size_t box_bytes() const { return kBoxHeaderBytes + slot_bytes * size_t(num_slots); }
  size_t window_bytes() const { return box_bytes() * size_t(nranks); }
  size_t box(int partner) const { return box_bytes() * size_t(partner); }
  size_t ready(int partner, int slot) const {
    return box(partner) + kReadyOffset + 8 * size_t(slot);
  }
  size_t credit(int partner) const { return box(partner) + kCreditOffset; }
  size_t slot(int partner, int k) const {
    return box(partner) + kBoxHeaderBytes + slot_bytes * size_t(k);
  }
};

// How the channel gets a registration for a local source buffer on
// transports that need one (RDMA): normally the registration cache.
struct SourceRegistrar {
  std::function<const MemoryRegion*(const void* addr, size_t len)> acquire;
  std::function<void(const MemoryRegion*)> release;
};

class Channel {
 public:
  Channel(Transport& transport, const WindowLayout& layout,
          MemoryRegion* window_mr, std::vector<RemoteRegion> peer_windows,
          double timeout_s, SourceRegistrar registrar);
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return layout_.slot_bytes; }
  double timeout_s() const { return timeout_s_; }

  // Sends len <= slot_bytes() bytes from src to peer as the next message on
  // the pair. Waits (bounded by the timeout) for a free slot. src may be
  // reused when send returns, except on transports that need local
  // registration, where it must stay unchanged until flush().
  void send(int peer, const void* src, size_t len);

  // Waits for the next message from peer, which must be len bytes long (a
  // different length means the ranks disagree on the arguments: error).
  // Returns its bytes in our window, valid until release(peer).
  const void* recv(int peer, size_t len);
  // Gives the slot of the oldest received message from peer back to peer.
  void release(int peer);

  // Waits until every signaled write this rank posted has completed (the
  // sources of sends may change afterwards).
  void flush();

  // Waits until every write this rank ever posted has completed: used before
  // the communicator's windows go away. On ordered transports the completion
  // of a last signaled write to a peer implies all earlier ones.
  void quiesce();

 private:
  template <class Ready>
  void wait_until(int peer, const char* what, Ready ready);
  void progress();
  void post(int peer, uint64_t context, const void* src, size_t len,
            const MemoryRegion* mr, int flags, size_t remote_offset);
  const volatile uint64_t* local_word(size_t offset) const;

  Transport& transport_;
  WindowLayout layout_;
  MemoryRegion* window_mr_;
  std::vector<RemoteRegion> peers_;
  double timeout_s_;
  SourceRegistrar registrar_;
  int rank_;
  int size_;
  char* window_;
  std::vector<uint64_t> sent_;      // messages sent to each peer
  std::vector<uint64_t> received_;  // messages released from each peer
  uint64_t outstanding_ = 0;        // signaled writes not yet completed
};

}  // namespace coll
