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
//             the next word of its line, `left`, is set by q when it
//             finalizes, after its last write to p (Channel::quiesce);
//   expose    {addr, length, rkey, sequence}: a user buffer of q that p may
//             write into directly (zero-copy) during the current call;
//             the line's second half, `offer`, {addr, length, rkey, count,
//             first}: a buffer of q that p's messages first .. first +
//             count - 1 may be placed in (placed messages, below);
//   slot[k]   num_slots eager slots of slot_bytes each.
// The window holds every partner's header (lines, credit, expose) first,
// then every partner's slots, so that the slots' memory can be committed
// only for the partners that write into them (WindowLayout::window_bytes).
// A message m from q to p lives in slot m % num_slots; p polls line 0 of
// slot k for sequence m+1. A zero-copy ("direct") message puts its data
// straight into the exposed buffer and only its flag into the box.
// Sequences and credits run for the life of the communicator, so
// collectives need no extra synchronisation between them. Each
// communicator has windows of its own (registered when it is created,
// deregistered when it is freed), so the messages of two communicators can
// never meet: the window a write lands in names its communicator. The flag
// positions of the lines only ever hold flags, so stale data can never
// pass for a flag.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "task.hpp"
#include "transport/transport.hpp"

namespace coll {

class RegistrationCache;
class Channel;

// One poll of the transport (its progress, too): every completion of a
// counted write goes to the channel that posted it (the context word names
// it); an error completion throws, naming the peer (transport rank `rank`
// reporting). The progress engine calls it, and a channel draining its own
// writes.
void poll_and_route_completions(Transport& transport, int rank);

struct WindowLayout {
  static constexpr int kMaxSlots = 16;
  static constexpr size_t kLineBytes = coll::kLineBytes;
  static constexpr size_t kInlineBytes = kLinePayload;  // payload after a line's flag
  // Line messages up to 5 lines (280 B): measured on the 2-core
  // development VM (np 2 allreduce, libcoll's own loop), 2-3 lines beat
  // flag + slot by 10-20%, 5 lines tie and 10 lines lose by 30% (a reader
  // polling many lines takes them from the writer while it is still
  // writing them). 5, not 4 (224 B): a 256 B message then travels in
  // lines, and under Open MPI's barrier (coll_bench_mpi, np 2, 4 runs
  // alternating) bcast 256 B took 0.27-0.28 us against 0.30-0.32 (OSU
  // average) and 0.42-0.43 against 0.47-0.50 (synchronized start),
  // allreduce 256 B 0.41-0.43 against 0.44-0.46; 128 B and 512 B the same.
  static constexpr size_t kLinesPerSlot = kMaxMessageLines;
  static constexpr size_t kMaxLineMessage = kLinesPerSlot * kInlineBytes;

  size_t slot_bytes = 0;
  int num_slots = 0;
  int nranks = 0;

  // Where the slots begin: the headers rounded up to whole pages, so that
  // no page holds both (see window_bytes). 4 KiB, the page of every
  // platform libcoll builds for; a transport with larger pages only
  // commits a little more at allocation.
  static constexpr size_t kPageBytes = 4096;

  size_t lines_bytes() const { return kLineBytes * kLinesPerSlot * size_t(num_slots); }
  size_t header_bytes() const { return lines_bytes() + 2 * kLineBytes; }  // + credit, expose
  // The window: every partner's header (its lines, credit and expose
  // lines) first, all together, then every partner's slots. The headers
  // are what a rank polls and what every message touches; the slots only
  // messages too large for the lines, and only from the partners the
  // schedules send them from (a ring: one; recursive doubling: log2 n).
  // So the window's memory is committed in two parts: the headers when it
  // is allocated (eager_bytes), a partner's slots by that partner, before
  // its first write there (Transport::prepare_write, Channel::do_send).
  // At n ranks that is n x 1.1 KiB up front instead of n x 513 KiB.
  size_t eager_bytes() const {
    return (header_bytes() * size_t(nranks) + kPageBytes - 1) / kPageBytes * kPageBytes;
  }
  size_t window_bytes() const {
    return eager_bytes() + slot_bytes * size_t(num_slots) * size_t(nranks);
  }
  size_t box(int partner) const { return header_bytes() * size_t(partner); }
  size_t ready(int partner, int slot) const {
    return box(partner) + kLineBytes * kLinesPerSlot * size_t(slot);
  }
  size_t inline_data(int partner, int slot) const { return ready(partner, slot) + 8; }
  size_t credit(int partner) const { return box(partner) + lines_bytes(); }
  size_t left(int partner) const { return credit(partner) + 8; }
  size_t expose(int partner) const { return credit(partner) + kLineBytes; }
  size_t slot(int partner, int k) const {
    return eager_bytes() + slot_bytes * (size_t(partner) * size_t(num_slots) + size_t(k));
  }
};

// A communicator whose ranks span hosts, with several on one host at least,
// has two sub-communicators that only its own operations use
// (Communicator::build_hierarchy): one of the ranks on this rank's host, and
// one of the hosts' leaders (the lowest rank on each). The hierarchical
// algorithms (algorithms/hierarchy.hpp) run collectives on their channels
// inside an operation of the parent, which has them to itself as it has
// its own channel.
struct Hierarchy {
  Channel* node = nullptr;     // this host's ranks, in the parent's order
  Channel* leaders = nullptr;  // one rank per host; nullptr where this rank leads none
  // Per parent rank: its host (hosts numbered in the order of their lowest
  // rank, which is also the order of the leaders' channel), and its rank
  // on that host's node channel.
  std::vector<int> host_of;
  std::vector<int> node_rank;
};

// The channel of one communicator: its ranks are the communicator's, mapped
// to the transport's (the process context's) ranks by `group`. Every wait is
// a co_await (task.hpp): it returns at once when the awaited thing is there,
// and otherwise suspends the operation until the progress engine finds it
// ready. One operation uses a channel at a time (the communicator runs its
// operations in the order they were started).
class Channel {
 public:
  // cache registers user memory (pin) on transports that need it and for
  // zero-copy targets. zcopy_threshold: calls of at least that many bytes
  // may go zero-copy (0: never); zcopy_threshold_set: the user chose it
  // (COLL_ZCOPY_THRESHOLD). group[r]: the transport rank of rank r.
  Channel(Transport& transport, const WindowLayout& layout, MemoryRegion* window_mr,
          std::vector<RemoteRegion> peer_windows, std::vector<int> group, int rank,
          RegistrationCache& cache, size_t zcopy_threshold, bool zcopy_threshold_set,
          uint64_t owner);
  ~Channel();  // deregisters and frees the bounce buffer, if one was made
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  int rank() const { return rank_; }
  // Slot memory this rank committed in its peers' windows, and at how many
  // peers (commit_slot).
  uint64_t committed_bytes() const { return committed_bytes_; }
  int committed_peers() const;
  int size() const { return size_; }
  // The transport rank of communicator rank r.
  int transport_rank(int r) const { return group_[size_t(r)]; }
  size_t slot_bytes() const { return layout_.slot_bytes; }
  bool needs_local_registration() const { return needs_registration_; }
  // Whether a call moving `bytes` should use the zero-copy messages.
  // Zero-copy needs the user buffers pinned: on a transport that pins pages
  // (RDMA) only calls that fit pinnable_bytes() go zero-copy, so that every
  // rank (with the same locked-memory limit) makes the same choice; larger
  // ones move through the windows, their sources bounced (post_data).
  bool zero_copy(size_t bytes) const {
    return zcopy_threshold_ && bytes >= zcopy_threshold_ && bytes <= pinnable_bytes();
  }
  // The largest user buffer a call pins (RDMA): a quarter of the cache's
  // budget (itself 3/4 of RLIMIT_MEMLOCK), so that a call's buffers and
  // other communicators' fit together. Unbounded where nothing is pinned.
  size_t pinnable_bytes() const { return pinnable_bytes_; }
  // Whether a call moving `bytes` goes zero-copy where that spares copies
  // outright (Transport::direct_writes_like_window_among this channel's
  // ranks: tcp, RDMA, and the hybrids where the ranks are on distinct
  // hosts): there an algorithm that writes straight into the receivers'
  // buffers moves less than one that copies through the windows. Alike on
  // every rank.
  bool zero_copy_spares_copies(size_t bytes) const {
    return direct_like_window_ && zero_copy(bytes);
  }
  // Whether the zero-copy threshold is the user's (COLL_ZCOPY_THRESHOLD)
  // rather than the transport's default.
  bool zero_copy_threshold_set() const { return zcopy_threshold_set_; }
  // The longest zero-copy message: its length shares the flag's low 31
  // bits with the direct bit, and RDMA devices commonly take writes of up
  // to 2 GiB (max_msg_sz).
  static constexpr size_t kMaxDirectMessage = size_t(1) << 30;

  // --- eager messages, through the slots -------------------------------
  // co_await send(peer, src, len): sends len <= slot_bytes() bytes from src
  // to peer as the next message on the pair, once a slot is free. On
  // transports that need local registration, src must lie in the window or
  // in memory pinned for this operation.
  struct SendWait : Wait<SendWait> {
    SendWait(Channel& c, int p, const void* s, size_t n, bool direct, const RemoteRegion* d,
             size_t off)
        : Wait(p, "a free slot", &c), ch(c), src(s), len(n), is_direct(direct), dst(d), offset(off) {}
    bool try_now();
    void await_resume() const {}
    Channel& ch;
    const void* src;
    size_t len;
    bool is_direct;
    const RemoteRegion* dst;
    size_t offset;
    bool placed = false;  // send_placed: offset is into the peer's offered buffer
  };
  SendWait send(int peer, const void* src, size_t len);
  // co_await recv(peer, len): the next message from peer, which must be len
  // bytes long (a different length means the ranks disagree on the
  // arguments: error). Its bytes are in our window, valid until
  // release(peer).
  struct RecvWait : Wait<RecvWait> {
    RecvWait(Channel& c, int p, size_t n, bool direct, void* placed_at = nullptr)
        : Wait(p, direct ? "a zero-copy message" : "a message", &c), ch(c), len(n),
          is_direct(direct), placed(placed_at) {}
    bool try_now();
    const void* await_resume() const { return data; }
    Channel& ch;
    size_t len;
    bool is_direct;
    void* placed;  // recv_placed: where the message lands if its sender placed it
    bool arrived = false;
    const void* data = nullptr;
  };
  RecvWait recv(int peer, size_t len);
  // co_await release(peer): gives the slot of the oldest received message
  // from peer back to peer (after the writes forwarded from it are done).
  struct ReleaseWait : Wait<ReleaseWait> {
    ReleaseWait(Channel& c, int p) : Wait(p, "completion of its own writes", &c), ch(c) {
      from_peer = false;
    }
    bool try_now();
    void await_resume() const {}
    Channel& ch;
  };
  ReleaseWait release(int peer);

  // --- zero-copy messages, straight into an exposed user buffer --------
  // Lets peer write into [buf, buf + len) (pinned here) during this call.
  void expose(int peer, void* buf, size_t len);
  // co_await exposed_by(peer): the buffer that peer exposed to us for this
  // call.
  struct ExposedWait : Wait<ExposedWait> {
    ExposedWait(Channel& c, int p) : Wait(p, "a zero-copy buffer", &c), ch(c) {}
    bool try_now();
    RemoteRegion await_resume() const { return region; }
    Channel& ch;
    RemoteRegion region;
  };
  ExposedWait exposed_by(int peer);
  // co_await send_direct(...): writes len bytes from src into dst (exposed
  // by peer) at offset, then the flag of a direct message.
  SendWait send_direct(int peer, const RemoteRegion& dst, size_t offset, const void* src,
                       size_t len);
  // co_await recv_direct(peer, len): waits for a direct message of len
  // bytes from peer (its data is then in the buffer we exposed) and
  // releases its slot.
  Task recv_direct(int peer, size_t len);

  // --- placed messages: eager messages that may land in the receiver's
  // buffer ---------------------------------------------------------------
  // Memory that a peer's writes reach by a plain copy (on shm, memory from
  // coll_mem_alloc, which lies in the rank's segment: Transport::copies_into)
  // can take that peer's messages in place, spared the slot and the copy
  // out of it. No rank needs to know whether the others' buffers are such
  // memory, and nobody waits for anybody: a receiver offers its buffer
  // for `messages` messages from peer, those after the next `after` (one
  // record in the peer's window), and the peer's send_placed writes each
  // of them straight to its offset there if the offer is in when the
  // message goes, through a slot otherwise; recv_placed takes either. An algorithm that offers must
  // receive exactly `messages` messages from peer in this call, each with
  // recv_placed, and its sender must place each at the offset where the
  // receiver's recv_placed puts it. Returns whether it offered (false: the
  // buffer is not such memory, or len or messages is 0).
  bool offer(int peer, void* buf, size_t len, uint64_t messages, uint64_t after = 0);
  // A send() (len <= slot_bytes()) that goes to offset of the buffer peer
  // offered, if it did.
  SendWait send_placed(int peer, const void* src, size_t len, size_t offset);
  // A recv() whose message may have been placed at dst (the offset its
  // sender placed it at): co_await gives dst then, else the slot's bytes,
  // which the caller copies to dst; release(peer) either way.
  RecvWait recv_placed(int peer, void* dst, size_t len) {
    return RecvWait(*this, peer, len, false, dst);
  }
  // Messages that arrived placed (for COLL_DEBUG's account at finalize).
  uint64_t placed_received() const { return placed_received_; }

  // --- the synchronous form of an algorithm (algorithms.hpp, NowFn) -----
  // Where writes complete when they are posted (no signaled writes: every
  // transport but RDMA), no send waits for its source and no release or
  // flush for forwarded writes; a wait is then only for a credit or for a
  // message, and both can be asked before anything is done.
  bool completes_at_post() const { return !needs_registration_; }
  // Whether a send to peer would go at once (one of our slots is free).
  bool can_send(int peer) const { return credit_ready(peer); }
  // A send once can_send(peer) said yes; len <= slot_bytes().
  void send_now(int peer, const void* src, size_t len) { do_send(peer, src, len); }
  // The next message from peer if it is there, else nullptr: what
  // co_await recv(peer, len) gives, valid until release. Nothing is
  // consumed, so asking again gives the same message.
  const void* message(int peer, size_t len);
  // A release where completes_at_post().
  void release_now(int peer) { do_release(peer); }

  // --- per operation ---------------------------------------------------
  // The registrations of the running operation: pin() adds to them, sends
  // look their sources up in them. The communicator points the channel at
  // an operation's list while that operation runs.
  void use_pins(std::vector<const MemoryRegion*>* pins) { pins_ = pins; }
  std::vector<const MemoryRegion*>* pins_in_use() const { return pins_; }
  // The communicator's sub-channels, or nullptr (a flat communicator).
  const Hierarchy* hierarchy() const { return hierarchy_; }
  void set_hierarchy(const Hierarchy* h) { hierarchy_ = h; }
  // Registers (through the cache) user memory of this operation. len 0 is
  // a no-op. Returns the registration.
  const MemoryRegion* pin(const void* buf, size_t len);
  // co_await flush(): every signaled write posted so far has completed.
  struct FlushWait : Wait<FlushWait> {
    explicit FlushWait(Channel& c) : Wait(-1, "completion of its own writes"), ch(c) {
      from_peer = false;
    }
    bool try_now() { return ch.outstanding_.load(std::memory_order_acquire) == 0; }
    void await_resume() const {}
    Channel& ch;
  };
  FlushWait flush() { return FlushWait(*this); }
  // The frames of the coroutines that run on this channel (task.hpp).
  FramePool& frames() { return frames_; }

  // Transport completion of one of this channel's signaled writes (the
  // context routes completions by their context word, this channel).
  void completed() { outstanding_.fetch_sub(1, std::memory_order_acq_rel); }

  // Before the windows of a communicator that stays in a running context go
  // away: every pair that carried anything exchanges one last message, and
  // each rank waits for those addressed to it. Messages on a pair arrive in
  // order, so after it no write of a peer into our window is still on its
  // way (credits included), and none will come.
  Task close();
  // At finalize, where a bootstrap barrier follows: a last signaled credit
  // to every peer, then the `left` notice, then flush. On ordered
  // transports the completion of the last write to a peer implies all
  // earlier ones.
  Task quiesce();
  // Whether peer has finalized (its `left` notice is here). Every write of
  // peer into our window before it is visible once this returns true: a
  // wait on peer still blocked after that will never end.
  bool peer_left(int peer) const { return notice(peer) == kFinalized; }
  // Whether this communicator failed at peer (notify_failed), and with
  // which status: 0 while it has not. Its operations there have ended, so
  // a wait on peer here will never end either.
  int peer_failed(int peer) const {
    const uint64_t v = notice(peer);
    return v & kFailedBit ? int(v & 0xffffffffu) : 0;
  }
  // This rank's part of the communicator failed (Communicator::fail): tells
  // every peer, through its `left` word, so that a peer waiting on us fails
  // at its next check (within ~10 ms, Context::check_stalled) instead of at
  // COLL_TIMEOUT; a peer that fails so tells its own peers, so the failure
  // reaches every rank that waits on another. Best effort: a write that
  // cannot be posted (a peer gone, its window closed) is skipped. The
  // sub-channels are told too.
  void notify_failed(int status);

  // --- refusals: an argument invalid on one rank only ------------------
  // Without COLL_CHECK_ARGS the ranks do not exchange their arguments, so
  // a call that this rank refused on its own arguments (a NULL buffer, a
  // datatype it does not know) may be one its peers accepted: they wait in
  // it for this rank, or would take this rank's next call's messages for
  // its data (issue 31: wrong sums with COLL_SUCCESS). So a refusing rank
  // tells every peer which call it refused (notify_refused: `left` word,
  // kRefusedBit, the call's number and the status; waited for), and a peer
  // waiting on it in that very call fails it (Context::check_stalled);
  // then it meets the others in an exchange whose messages are control
  // messages (ControlScope): a peer that accepted the call fails on the
  // first of them instead of reading it as data, and the refuser fails on
  // the first data message instead of reading it as the exchange's. Ranks
  // that all refused the call meet in the exchange and stay in step.
  void notify_refused(uint64_t seq, int status);
  // The status with which peer refused its call number seq, 0 if it did
  // not (or told something else since: a failure, its finalize).
  // The first peer whose notice is a failure with status (kFailedBit |
  // status: coll_comm_revoke's COLL_ERR_REVOKED), or -1.
  int peer_failed_with(int status) const {
    for (int p = 0; p < size_; ++p)
      if (p != rank_ && peer_failed(p) == status) return p;
    return -1;
  }
  int peer_refused(int peer, uint64_t seq) const {
    const uint64_t v = notice(peer);
    if (!(v & kRefusedBit) || (v >> kSeqShift) != (seq & kSeqMask)) return 0;
    return int(v & 0xffffffffu);
  }
  // This rank refused its call number seq (notify_refused) and waits in the
  // refusal's exchange: the first peer seen to have accepted that call (its
  // next message here is data, and it has told of no refusal of seq or
  // later) or to have failed; -1 if none. A peer that accepted it and needs
  // nothing of this rank's completes it and goes on: only this finds it.
  int accepting_peer(uint64_t seq) const;
  // While one lives, every message this channel sends carries kControlBit
  // in its length field, and every message it waits for must: an
  // exchange's messages can never pass for a call's data, nor the other
  // way round. Only the argument exchange of COLL_CHECK_ARGS and of
  // refusals (arg_check.cpp) uses it, one operation at a time per channel.
  class ControlScope {
   public:
    explicit ControlScope(Channel& c) : ch_(c) { ch_.control_ = kControlBit; }
    ~ControlScope() { ch_.control_ = 0; }
    ControlScope(const ControlScope&) = delete;
    ControlScope& operator=(const ControlScope&) = delete;

   private:
    Channel& ch_;
  };
  // Bit 30 of a flag's length field (eager lengths are below it; a direct
  // message sets kDirectBit too, so the two never meet).
  static constexpr uint64_t kControlBit = uint64_t(1) << 30;

 private:
  void post(int peer, uint64_t context, const void* src, size_t len, const MemoryRegion* mr,
            int flags, uint64_t remote_addr, uint32_t rkey);
  void post_to_window(int peer, const void* src, size_t len, size_t offset, int flags = 0);
  void post_data(int peer, const void* src, size_t len, uint64_t remote_addr, uint32_t rkey);
  const MemoryRegion* bounce(const void* src, size_t len, const void** copy);
  void drain_completions(int peer);
  void post_flag(int peer, size_t len_field);
  bool credit_ready(int peer) const;
  bool try_flag(int peer, size_t len_field);
  const void* try_lines(int peer, size_t len);
  void do_send(int peer, const void* src, size_t len);
  void commit_slot(int peer, uint64_t remote_addr, size_t len, uint32_t* committed);
  void commit_slots(int peer, size_t len);
  void touch_slots(int peer, size_t len);
  bool pair_committed(int peer) const;  // we committed some of our slots at peer
  void do_release(int peer);
  bool line_message(int peer, size_t len) const {
    return len <= WindowLayout::kMaxLineMessage && line_peers_[size_t(peer)];
  }
  bool pair_used(int peer) const;
  // The context word of a counted (signaled) write: this channel, so that
  // whoever polls the shared transport can route the completion here.
  uint64_t counted_context() const { return reinterpret_cast<uintptr_t>(this); }
  [[noreturn]] void length_mismatch(int peer, uint64_t got, uint64_t want) const;
  // exposed_buffer: the write aimed at a buffer the peer exposed, not its window.
  [[noreturn]] void post_failed(int peer, size_t len, bool exposed_buffer);
  // The buffer peer offered for our message number `message` (1-based, the
  // pair's sequence), if that offer holds [offset, offset + len).
  bool offered_for(int peer, uint64_t message, size_t offset, size_t len, RemoteRegion* out) const;
  const MemoryRegion* local_region(const void* src, size_t len) const;
  const MemoryRegion* pinned(const void* addr, size_t len) const;  // nullptr: not in this call
  const volatile uint64_t* local_word(size_t offset) const;
  // The `left` word peer wrote: 0, kFinalized (Channel::quiesce),
  // kFailedBit | status (notify_failed), or kRefusedBit | call number <<
  // kSeqShift | status (notify_refused; the number's low 30 bits).
  static constexpr uint64_t kFinalized = 1;
  static constexpr uint64_t kFailedBit = uint64_t(1) << 32;
  static constexpr uint64_t kRefusedBit = uint64_t(1) << 33;
  static constexpr int kSeqShift = 34;
  static constexpr uint64_t kSeqMask = (uint64_t(1) << 30) - 1;
  uint64_t notice(int peer) const {
    return __atomic_load_n(local_word(layout_.left(peer)), __ATOMIC_ACQUIRE);
  }
  // Writes value into this rank's `left` word at every peer, here and in
  // the sub-channels, and waits for the writes.
  void post_notice(uint64_t value);
  uint64_t notice_ = 0;   // the source of post_notice's writes
  uint64_t control_ = 0;  // kControlBit while a ControlScope lives

  Transport& transport_;
  WindowLayout layout_;
  MemoryRegion* window_mr_;
  std::vector<RemoteRegion> peers_;
  std::vector<int> group_;
  RegistrationCache& cache_;
  size_t zcopy_threshold_;
  bool zcopy_threshold_set_;
  size_t pinnable_bytes_;
  bool direct_like_window_;  // direct_writes_like_window_among(group_), asked once
  // RDMA sources that are not pinned (larger than pinnable_bytes()) are
  // copied here, registered, and written from here: slot-sized writes,
  // reused after every signaled write so far has completed.
  void* bounce_ = nullptr;
  size_t bounce_bytes_ = 0;
  size_t bounce_used_ = 0;
  MemoryRegion* bounce_mr_ = nullptr;
  uint64_t owner_;  // the communicator's id, as the cache's owner of what we pin
  int rank_;
  int size_;
  char* window_;
  bool needs_registration_;  // transport_.needs_local_registration(), asked once
  std::vector<uint64_t> sent_;           // messages sent to each peer
  // The last credit read from each peer's word (credit_ready): a lower
  // bound of the peer's count, since credits only grow.
  mutable std::vector<uint64_t> credit_seen_;
  std::vector<uint64_t> received_;       // messages released from each peer
  uint64_t placed_received_ = 0;
  std::vector<uint64_t> exposed_to_;     // buffers exposed to each peer
  std::vector<uint64_t> exposures_seen_;  // buffers each peer exposed to us
  std::vector<const MemoryRegion*>* pins_ = nullptr;  // the running operation's
  const Hierarchy* hierarchy_ = nullptr;
  std::vector<char> line_peers_;         // transport_.line_writes(peer)
  std::vector<char> staging_;            // a received line message, contiguous, per peer
  // Per (peer, slot k): how many bytes from the start of our slot k in
  // the peer's window are committed (commit_slot); slot_bytes < 2^31.
  std::vector<uint32_t> slot_committed_;
  // Per peer: how many bytes from the start of each of its slots in our
  // window this rank has read (touch_slots).
  std::vector<uint32_t> slots_touched_;
  uint64_t committed_bytes_ = 0;  // their sum: slot memory this rank made peers hold
  std::atomic<uint64_t> outstanding_{0};  // signaled writes not yet completed
  FramePool frames_;
  bool slot_sources_in_flight_ = false;  // a write from one of our slots may not be done
};

}  // namespace coll
