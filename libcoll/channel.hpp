// Channel: data movement between ranks on one-sided writes. This is the only
// layer the algorithms use ("send a message", "receive one, use it in
// place, release it", and the zero-copy variants); it knows windows and
// flow control, not collectives.
//
// Every rank's window holds one box per partner. The box of partner q in
// the window of rank p is written only by q:
//   lines[k]  kLinesPerSlot cache lines per slot k. Line 0 starts with the
//             8-byte flag of message k, (sequence << 32) | length, written
//             after the message's data (the transport's ordering promise
//             makes the data visible first). Small messages travel in the
//             lines themselves: on transports with line writes (shm) a
//             message of up to kMaxLineMessage bytes is cut into lines of an
//             8-byte flag and 56 bytes of payload, each line's flag visible
//             only after its payload, so the reader polls every line and
//             fetches the whole message in one round of cache misses (the
//             idea of NCCL's LL protocol); elsewhere up to kInlineBytes ride
//             in line 0 behind the flag, and larger messages in the slot;
//   credit    how many of p's messages to q that q has consumed: p may
//             reuse one of its slots in q's window only after q said so;
//   expose    {addr, length, rkey, sequence}: a user buffer of q that p may
//             write into directly (zero-copy) during the current call;
//   slot[k]   num_slots eager slots of slot_bytes each.
// A message m from q to p lives in slot m % num_slots; p polls line 0 of
// slot k for sequence m+1. A zero-copy ("direct") message puts its data
// straight into the exposed buffer and only its flag into the box.
// Sequences and credits run for the life of the communicator, so
// collectives need no extra synchronisation between them. The flag
// positions of the lines only ever hold flags, so stale data can never
// pass for a flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "transport/transport.hpp"
#include "wait_policy.hpp"

namespace coll {

class RegistrationCache;

struct WindowLayout {
  static constexpr int kMaxSlots = 16;
  static constexpr size_t kLineBytes = 64;
  static constexpr size_t kInlineBytes = kLineBytes - 8;  // payload after a line's flag
  // Line messages up to 4 lines (224 B): measured on the 2-core
  // development VM (np 2 allreduce), 2-3 lines beat flag + slot by 10-20%,
  // 5 lines tie and 10 lines lose by 30% (a reader polling many lines
  // takes them from the writer while it is still writing them).
  static constexpr size_t kLinesPerSlot = 4;
  static constexpr size_t kMaxLineMessage = kLinesPerSlot * kInlineBytes;

  size_t slot_bytes = 0;
  int num_slots = 0;
  int nranks = 0;

  size_t lines_bytes() const { return kLineBytes * kLinesPerSlot * size_t(num_slots); }
  size_t header_bytes() const { return lines_bytes() + 2 * kLineBytes; }  // + credit, expose
  size_t box_bytes() const { return header_bytes() + slot_bytes * size_t(num_slots); }
  size_t window_bytes() const { return box_bytes() * size_t(nranks); }
  size_t box(int partner) const { return box_bytes() * size_t(partner); }
  size_t ready(int partner, int slot) const {
    return box(partner) + kLineBytes * kLinesPerSlot * size_t(slot);
  }
  size_t inline_data(int partner, int slot) const { return ready(partner, slot) + 8; }
  size_t credit(int partner) const { return box(partner) + lines_bytes(); }
  size_t expose(int partner) const { return credit(partner) + kLineBytes; }
  size_t slot(int partner, int k) const {
    return box(partner) + header_bytes() + slot_bytes * size_t(k);
  }
};

class Channel {
 public:
  // cache registers user memory (pin) on transports that need it and for
  // zero-copy targets. zcopy_threshold: calls of at least that many bytes
  // may go zero-copy (0: never). wait: how waits spin, yield and nap
  // (wait_policy.hpp).
  Channel(Transport& transport, const WindowLayout& layout, MemoryRegion* window_mr,
          std::vector<RemoteRegion> peer_windows, double timeout_s, RegistrationCache& cache,
          size_t zcopy_threshold, const WaitPolicyParams& wait);
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return layout_.slot_bytes; }
  double timeout_s() const { return timeout_s_; }
  bool needs_local_registration() const { return needs_registration_; }
  // Whether a call moving `bytes` should use the zero-copy messages.
  bool zero_copy(size_t bytes) const { return zcopy_threshold_ && bytes >= zcopy_threshold_; }

  // --- eager messages, through the slots -------------------------------
  // Sends len <= slot_bytes() bytes from src to peer as the next message on
  // the pair. Waits (bounded by the timeout) for a free slot. On transports
  // that need local registration, src must lie in the window or in memory
  // pinned for this call.
  void send(int peer, const void* src, size_t len);
  // Waits for the next message from peer, which must be len bytes long (a
  // different length means the ranks disagree on the arguments: error).
  // Returns its bytes in our window, valid until release(peer).
  const void* recv(int peer, size_t len);
  // Gives the slot of the oldest received message from peer back to peer.
  void release(int peer);

  // --- zero-copy messages, straight into an exposed user buffer --------
  // Lets peer write into [buf, buf + len) (pinned here) during this call.
  void expose(int peer, void* buf, size_t len);
  // Waits for the buffer that peer exposed to us for this call.
  RemoteRegion exposed_by(int peer);
  // Writes len bytes from src into dst (exposed by peer) at offset, then
  // the flag of a direct message.
  void send_direct(int peer, const RemoteRegion& dst, size_t offset, const void* src,
                   size_t len);
  // Waits for a direct message of len bytes from peer: its data is then in
  // the buffer we exposed. Its slot is released at once.
  void recv_direct(int peer, size_t len);

  // --- per call (the communicator brackets every algorithm with these) ---
  // Registers (through the cache) user memory of this call. len 0 is a
  // no-op. Returns the registration.
  const MemoryRegion* pin(const void* buf, size_t len);
  // Waits until every signaled write posted so far has completed.
  void flush();
  // flush(), then drops this call's pins.
  void finish();
  // After a failed call: drops the pins without waiting.
  void drop_pins() noexcept;

  // Waits until every write this rank ever posted has completed: used before
  // the communicator's windows go away. On ordered transports the completion
  // of a last signaled write to a peer implies all earlier ones.
  void quiesce();

 private:
  template <class Ready>
  void wait_until(int peer, const char* what, Ready ready);
  void progress();
  void post(int peer, uint64_t context, const void* src, size_t len, const MemoryRegion* mr,
            int flags, uint64_t remote_addr, uint32_t rkey);
  void post_to_window(int peer, const void* src, size_t len, size_t offset);
  void post_data(int peer, const void* src, size_t len, uint64_t remote_addr, uint32_t rkey);
  void post_flag(int peer, size_t len_field);
  uint64_t wait_flag(int peer, size_t len_field);
  const void* wait_lines(int peer, size_t len);
  bool line_message(int peer, size_t len) const {
    return len <= WindowLayout::kMaxLineMessage && line_peers_[size_t(peer)];
  }
  [[noreturn]] void length_mismatch(int peer, uint64_t got, uint64_t want) const;
  [[noreturn]] void post_failed(int peer, size_t len);
  void wait_credit(int peer);
  const MemoryRegion* local_region(const void* src, size_t len) const;
  const MemoryRegion* pinned(const void* addr, size_t len) const;  // nullptr: not in this call
  const volatile uint64_t* local_word(size_t offset) const;

  Transport& transport_;
  WindowLayout layout_;
  MemoryRegion* window_mr_;
  std::vector<RemoteRegion> peers_;
  double timeout_s_;
  RegistrationCache& cache_;
  size_t zcopy_threshold_;
  TransportPlacement placement_;  // used only if transport_.shares_cpu_placement()
  WaitPolicy wait_;
  int rank_;
  int size_;
  char* window_;
  bool needs_registration_;  // transport_.needs_local_registration(), asked once
  std::vector<uint64_t> sent_;           // messages sent to each peer
  std::vector<uint64_t> received_;       // messages released from each peer
  std::vector<uint64_t> exposed_to_;     // buffers exposed to each peer
  std::vector<uint64_t> exposures_seen_;  // buffers each peer exposed to us
  std::vector<const MemoryRegion*> pins_;  // this call's registrations
  std::vector<char> line_peers_;         // transport_.line_writes(peer)
  std::vector<char> staging_;            // a received line message, contiguous, per peer
  uint64_t outstanding_ = 0;             // signaled writes not yet completed
  bool slot_sources_in_flight_ = false;  // a write from one of our slots may not be done
};

}  // namespace coll
