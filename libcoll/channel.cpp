#include "channel.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "error.hpp"
#include "fault_injection.hpp"
#include "regcache.hpp"
#include "transport/host_identity.hpp"

namespace coll {
namespace {

// The length field of a flag; direct messages set the top bit, so a rank
// that expects one kind and gets the other reports a mismatch.
constexpr uint64_t kDirectBit = uint64_t(1) << 31;

inline uint64_t flag_value(uint64_t sequence, uint64_t len_field) {
  return ((sequence & 0xffffffffu) << 32) | len_field;
}

// What a rank writes into a peer's box to expose a buffer: the record,
// then (a separate 8-byte write, so it lands last) its sequence.
struct ExposeRecord {
  uint64_t addr;
  uint64_t length;
  uint64_t rkey;
  uint64_t sequence;
};
static_assert(sizeof(ExposeRecord) == 32);

// What a receiver writes into a peer's box to offer a buffer for placed
// messages (Channel::offer), in the expose line's second half. Written as
// a seqlock: `first` cleared, the body, then `first` (8-byte writes land
// in order: the transport's promise), so that a sender reading while a
// new offer replaces an old one sees first == 0, or two different firsts
// around the body, and places nothing.
struct OfferRecord {
  uint64_t addr;
  uint64_t length;
  uint32_t rkey;
  uint32_t count;  // messages first .. first + count - 1
  uint64_t first;  // the pair's sequence of the first; 0: none
};
static_assert(sizeof(OfferRecord) == 32);
constexpr size_t kOfferAt = sizeof(ExposeRecord);  // within the expose line
static_assert(kOfferAt + sizeof(OfferRecord) <= kLineBytes);

}  // namespace

Channel::Channel(Transport& transport, const WindowLayout& layout, MemoryRegion* window_mr,
                 std::vector<RemoteRegion> peer_windows, std::vector<int> group, int rank,
                 RegistrationCache& cache, size_t zcopy_threshold, bool zcopy_threshold_set,
                 uint64_t owner)
    : transport_(transport),
      layout_(layout),
      window_mr_(window_mr),
      peers_(std::move(peer_windows)),
      group_(std::move(group)),
      cache_(cache),
      zcopy_threshold_(zcopy_threshold),
      zcopy_threshold_set_(zcopy_threshold_set),
      pinnable_bytes_(transport.needs_local_registration() ? cache.max_pinned_bytes() / 4
                                                           : std::numeric_limits<size_t>::max()),
      direct_like_window_(transport.direct_writes_like_window_among(group_)),
      owner_(owner),
      rank_(rank),
      size_(int(group_.size())),
      window_(static_cast<char*>(window_mr->addr)),
      needs_registration_(transport.needs_local_registration()),
      sent_(size_t(size_), 0),
      credit_seen_(size_t(size_), 0),
      received_(size_t(size_), 0),
      exposed_to_(size_t(size_), 0),
      exposures_seen_(size_t(size_), 0) {
  if (layout_.num_slots < 1 || layout_.num_slots > WindowLayout::kMaxSlots)
    fail(COLL_ERR_INTERNAL, "channel: %d slots per peer (1..%d)", layout_.num_slots,
         WindowLayout::kMaxSlots);
  // A slot-sized chunk may go as a zero-copy message (ring bcast and
  // allreduce), so a slot is at most the longest one (COLL_SLOT_SIZE is
  // capped there too).
  if (layout_.slot_bytes > kMaxDirectMessage)
    fail(COLL_ERR_INTERNAL, "channel: slot of %zu bytes (at most %zu)", layout_.slot_bytes,
         kMaxDirectMessage);
  if (peers_.size() != group_.size() || rank_ < 0 || rank_ >= size_)
    fail(COLL_ERR_INTERNAL, "channel: %zu windows for %d ranks (rank %d)", peers_.size(), size_,
         rank_);
  line_peers_.resize(size_t(size_));
  for (int p = 0; p < size_; ++p) line_peers_[size_t(p)] = transport_.line_writes(group_[size_t(p)]);
  staging_.resize(size_t(size_) * WindowLayout::kMaxLineMessage);
  slot_committed_.resize(size_t(size_) * size_t(layout_.num_slots));
  slots_touched_.resize(size_t(size_));
}

const volatile uint64_t* Channel::local_word(size_t offset) const {
  return reinterpret_cast<const volatile uint64_t*>(window_ + offset);
}

void Channel::post(int peer, uint64_t context, const void* src, size_t len,
                   const MemoryRegion* mr, int flags, uint64_t remote_addr, uint32_t rkey) {
  // Count first: the completion may be polled (by another thread) before
  // post_write returns.
  if (flags & kWriteSignaled) outstanding_.fetch_add(1, std::memory_order_relaxed);
  if (transport_.post_write(group_[size_t(peer)], context, src, len,
                            const_cast<MemoryRegion*>(mr), flags, remote_addr, rkey) != 0) {
    if (flags & kWriteSignaled) outstanding_.fetch_sub(1, std::memory_order_relaxed);
    const RemoteRegion& w = peers_[size_t(peer)];
    const bool into_window = remote_addr >= w.addr && remote_addr - w.addr < w.length;
    post_failed(peer, len, !into_window);
  }
}

void Channel::post_failed(int peer, size_t len, bool exposed_buffer) {
  const int err = errno;
  transport_.check_peer(group_[size_t(peer)]);  // a peer that is gone is PEER_LOST, not a transport error
  if (err == ESTALE || (exposed_buffer && err == EACCES)) {
    // A buffer the peer exposed for this call is closed or deregistered:
    // the peer's operation that exposed it is over. In a correct program
    // only an earlier failure there (or its finalize after one), or
    // arguments the ranks disagree on, ends it first.
    fail(COLL_ERR_INVALID_ARG,
         "rank %d: a %zu-byte write into a buffer of rank %d that is no longer exposed: its "
         "operation ended first (it failed there, or the ranks disagree on the collective's "
         "arguments)",
         rank_, len, peer);
  }
  if (!exposed_buffer && err == EACCES) {
    // Our peer's window refuses writes: it was deregistered, so the peer has
    // left this communicator (freed it, or finalized) while we still talk
    // to it.
    fail(COLL_ERR_PEER_LOST,
         "rank %d: rank %d has left the communicator (its window is deregistered: it freed the "
         "communicator or finalized, after a failure there?) while this rank still writes to it",
         rank_, peer);
  }
  fail_errno(COLL_ERR_TRANSPORT, err, "rank %d: %s write of %zu bytes to rank %d%s", rank_,
             transport_.name(), len, peer,
             err == EPERM ? " (zero-copy needs ptrace permission between ranks on shm: "
                            "set COLL_ZCOPY_THRESHOLD=0 to turn it off)"
                          : "");
}

// Small control words (flags, credits, expose records) are written from
// the stack: transports copy or inline writes of up to 64 bytes at post.
void Channel::post_to_window(int peer, const void* src, size_t len, size_t offset, int flags) {
  const RemoteRegion& w = peers_[size_t(peer)];
  post(peer, 0, src, len, nullptr, flags, w.addr + offset, w.rkey);
}

namespace {
bool contains(const MemoryRegion* mr, const void* addr, size_t len) {
  auto a = reinterpret_cast<uintptr_t>(addr), b = reinterpret_cast<uintptr_t>(mr->addr);
  return a >= b && len <= mr->length && a - b <= mr->length - len;
}
}  // namespace

const MemoryRegion* Channel::pinned(const void* addr, size_t len) const {
  if (pins_)
    for (const MemoryRegion* mr : *pins_)
      if (contains(mr, addr, len)) return mr;
  return nullptr;
}

const MemoryRegion* Channel::local_region(const void* src, size_t len) const {
  if (contains(window_mr_, src, len)) return window_mr_;
  return pinned(src, len);  // nullptr: not registered (bounce it)
}

Channel::~Channel() {
  if (bounce_mr_) transport_.dereg(bounce_mr_);
  // What the transport learnt for our slots in the peers' windows
  // (commit_slot) dies with those windows.
  for (int p = 0; p < size_; ++p)
    if (pair_committed(p)) transport_.forget_window(group_[size_t(p)], peers_[size_t(p)].rkey);
  std::free(bounce_);
}

void Channel::drain_completions(int peer) {
  // Every signaled write so far must complete before the bounce buffer is
  // reused. RDMA completions need no work from the peer (its NIC acks), so
  // polling here cannot wait on a rank that waits on us. Completions of
  // other channels on the shared transport are routed as the progress
  // engine routes them.
  for (uint64_t spin = 0; outstanding_.load(std::memory_order_acquire) != 0; ++spin) {
    poll_and_route_completions(transport_, transport_.rank());
    if (spin % 4096 == 4095) transport_.check_peer(group_[size_t(peer)]);
  }
}

void poll_and_route_completions(Transport& transport, int rank) {
  Completion wc[16];
  const int n = transport.poll(wc, 16);
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != 0) {
      transport.check_peer(wc[i].peer);  // throws the transport's own detail
      fail(wc[i].status, "rank %d: a write to rank %d failed on transport %s", rank, wc[i].peer,
           transport.name());
    }
    // A counted write's context word is its channel (counted_context()).
    if (wc[i].context) reinterpret_cast<Channel*>(uintptr_t(wc[i].context))->completed();
  }
}

const MemoryRegion* Channel::bounce(const void* src, size_t len, const void** copy) {
  if (!bounce_mr_) {
    // Lazily: most jobs never send from an unpinned buffer.
    bounce_bytes_ = layout_.slot_bytes * size_t(layout_.num_slots);
    bounce_ = std::aligned_alloc(4096, (bounce_bytes_ + 4095) / 4096 * 4096);
    if (!bounce_) fail(COLL_ERR_NO_RESOURCES, "channel: no memory for a %zu-byte bounce buffer",
                       bounce_bytes_);
    bounce_mr_ = transport_.reg_write(bounce_, bounce_bytes_);
  }
  if (len > bounce_bytes_)
    fail(COLL_ERR_INTERNAL, "channel: a %zu-byte write from unpinned memory (bounce %zu)", len,
         bounce_bytes_);
  if (bounce_used_ + len > bounce_bytes_) bounce_used_ = 0;
  char* at = static_cast<char*>(bounce_) + bounce_used_;
  bounce_used_ += (len + 63) / 64 * 64;
  std::memcpy(at, src, len);
  *copy = at;
  return bounce_mr_;
}

void Channel::post_data(int peer, const void* src, size_t len, uint64_t remote_addr,
                        uint32_t rkey) {
  if (!needs_registration_) {
    post(peer, 0, src, len, nullptr, 0, remote_addr, rkey);
    return;
  }
  // The source must stay registered and unchanged until the write completes
  // (rdma_post_write(3)): every data write is signaled; the operation's last
  // flush waits for them before its pins are dropped, and release() before a slot we forwarded
  // from can be refilled by its sender.
  const MemoryRegion* mr = local_region(src, len);
  if (mr == nullptr) {
    // Not pinned (larger than the locked-memory limit lets a call pin):
    // copied into the bounce buffer, once every earlier write from it is
    // done. One drain per buffer's worth of data, not per write.
    if (bounce_mr_ && bounce_used_ + len > bounce_bytes_) drain_completions(peer);
    mr = bounce(src, len, &src);
  }
  post(peer, counted_context(), src, len, mr, kWriteSignaled, remote_addr, rkey);
  if (mr == window_mr_) slot_sources_in_flight_ = true;
}

// The peer's credit word is read only when the credit last read from it
// does not cover this message. The peer writes that word at every release,
// so each read of it after a release is a cache line taken from the peer's
// core: at np 2 through the PMPI shim (OSU's loop: a barrier, then a 4 B
// gather) that one load was 45% of a non-root's gather, about 0.16 us of
// 0.34, on a call that never waited for a credit. A credit once seen stays
// valid (the count only grows), so with num_slots slots the line is read
// about once every num_slots - 1 messages instead of at each one.
bool Channel::credit_ready(int peer) const {
  const uint64_t m = sent_[size_t(peer)];
  const uint64_t slots = uint64_t(layout_.num_slots);
  if (m < slots) return true;
  uint64_t& seen = credit_seen_[size_t(peer)];
  if (seen >= m + 1 - slots) return true;
  seen = __atomic_load_n(local_word(layout_.credit(peer)), __ATOMIC_ACQUIRE);
  return seen >= m + 1 - slots;
}

void Channel::post_flag(int peer, size_t len_field) {
  const uint64_t m = sent_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const uint64_t flag = flag_value(m + 1, len_field);
  post_to_window(peer, &flag, sizeof flag, layout_.ready(rank_, k));
  sent_[size_t(peer)] = m + 1;
}

void Channel::length_mismatch(int peer, uint64_t got, uint64_t want) const {
  // A control message where a call's data was due, or the other way round:
  // a rank refused a call that another accepted (notify_refused).
  if ((got ^ want) & kControlBit) {
    if (got & kControlBit)
      fail(COLL_ERR_INVALID_ARG,
           "rank %d: rank %d refused this call on its own arguments (one of them is invalid "
           "there; see its error) while this rank accepted it: the call fails on every rank, and "
           "the communicator with it",
           rank_, peer);
    fail(COLL_ERR_INVALID_ARG,
         "rank %d refused this call on its own arguments, and rank %d accepted it (it sent the "
         "call's data): the call fails on every rank, and the communicator with it",
         rank_, peer);
  }
  fail(COLL_ERR_INVALID_ARG,
       "rank %d received %s message of %llu bytes from rank %d where it expected %s one "
       "of %llu: do all ranks pass the same count, datatype, op and root?",
       rank_, got & kDirectBit ? "a zero-copy" : "an eager",
       static_cast<unsigned long long>(got & ~kDirectBit), peer,
       want & kDirectBit ? "a zero-copy" : "an eager",
       static_cast<unsigned long long>(want & ~kDirectBit));
}

bool Channel::try_flag(int peer, size_t len_field) {
  const uint64_t m = received_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const uint64_t flag = __atomic_load_n(local_word(layout_.ready(peer, k)), __ATOMIC_ACQUIRE);
  if ((flag >> 32) != ((m + 1) & 0xffffffffu)) return false;
  const uint64_t got = flag & 0xffffffffu;
  if (got != len_field) length_mismatch(peer, got, len_field);
  return true;
}

// A line message: every line is polled on each pass, so that their cache
// misses overlap; a line's payload is read only after its own flag.
// nullptr: not all there yet.
const void* Channel::try_lines(int peer, size_t len) {
  const uint64_t m = received_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const char* base = window_ + layout_.ready(peer, k);
  const size_t lines = len == 0 ? 1 : (len + WindowLayout::kInlineBytes - 1) /
                                          WindowLayout::kInlineBytes;
  const uint64_t expected = flag_value(m + 1, len | control_);
  bool rest = true;
  for (size_t j = 1; j < lines; ++j)
    rest &= __atomic_load_n(reinterpret_cast<const uint64_t*>(base + j * 64), __ATOMIC_ACQUIRE) ==
            expected;
  const uint64_t first = __atomic_load_n(reinterpret_cast<const uint64_t*>(base), __ATOMIC_ACQUIRE);
  if ((first >> 32) != ((m + 1) & 0xffffffffu)) return nullptr;
  // A first line of this sequence with another length is a mismatch.
  if (first != expected) length_mismatch(peer, first & 0xffffffffu, len | control_);
  if (!rest) return nullptr;
  if (lines == 1) return base + 8;
  char* out = staging_.data() + size_t(peer) * WindowLayout::kMaxLineMessage;
  for (size_t j = 0, at = 0; j < lines; ++j, at += WindowLayout::kInlineBytes)
    std::memcpy(out + at, base + j * 64 + 8, std::min(WindowLayout::kInlineBytes, len - at));
  return out;
}

Channel::SendWait Channel::send(int peer, const void* src, size_t len) {
  if (len > layout_.slot_bytes)
    fail(COLL_ERR_INTERNAL, "channel: message of %zu bytes exceeds the %zu byte slot", len,
         layout_.slot_bytes);
  return SendWait(*this, peer, src, len, false, nullptr, 0);
}

void Channel::do_send(int peer, const void* src, size_t len) {
  fault_at_send();
  const uint64_t m = sent_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const RemoteRegion& w = peers_[size_t(peer)];
  const uint64_t flag_addr = w.addr + layout_.ready(rank_, k);
  const uint64_t field = len | control_;
  if (line_message(peer, len)) {
    if (transport_.post_lines(group_[size_t(peer)], src, len, flag_value(m + 1, field), flag_addr,
                              w.rkey) != 0)
      post_failed(peer, len, false);
    sent_[size_t(peer)] = m + 1;
    return;
  }
  if (len > 0) {
    size_t at = layout_.inline_data(rank_, k);
    if (len > WindowLayout::kInlineBytes) {
      at = layout_.slot(rank_, k);
      if (len > slot_committed_[size_t(peer) * size_t(layout_.num_slots) + size_t(k)])
        commit_slots(peer, len);
    }
    if (!needs_registration_) {
      // Data and flag in one call: one system call on tcp.
      if (transport_.post_message(group_[size_t(peer)], src, len, w.addr + at,
                                  flag_value(m + 1, field), flag_addr, w.rkey) != 0)
        post_failed(peer, len, false);
      sent_[size_t(peer)] = m + 1;
      return;
    }
    post_data(peer, src, len, w.addr + at, w.rkey);
  }
  post_flag(peer, field);
}

// The first write into this much of one of our slots in the peer's
// window: its pages there are committed first (WindowLayout::window_bytes),
// once per slot and length reached, so later messages pay one compare.
// Our slots in the peer's window (all of them: the area the transport may
// register for us at once, Transport::prepare_write) go with the range.
void Channel::commit_slot(int peer, uint64_t remote_addr, size_t len, uint32_t* committed) {
  const RemoteRegion& w = peers_[size_t(peer)];
  if (transport_.prepare_write(group_[size_t(peer)], remote_addr + *committed, len - *committed,
                               w.rkey, w.addr + layout_.slot(rank_, 0),
                               layout_.slot_bytes * size_t(layout_.num_slots)) != 0) {
    if (errno != ENOMEM) post_failed(peer, len, false);
    const int saved = errno;
    // What /dev/shm has and what this communicator's windows need of it,
    // where the windows live there (slot_sizing.hpp cut the slots to fit
    // half a rank's share at coll_init; other communicators, the user and
    // other jobs take the rest).
    std::string shm;
    uint64_t total = 0, available = 0;
    if (std::strstr(transport_.name(), "shm") != nullptr && dev_shm_space(&total, &available))
      shm = strfmt("; /dev/shm: %llu of %llu bytes available now, and each rank's window of "
                   "this communicator commits up to %zu bytes of it when every peer writes "
                   "(%d slots x %zu bytes x %d writers)",
                   static_cast<unsigned long long>(available),
                   static_cast<unsigned long long>(total),
                   layout_.slot_bytes * size_t(layout_.num_slots) * size_t(size_ - 1),
                   layout_.num_slots, layout_.slot_bytes, size_ - 1);
    errno = saved;
    fail_errno(COLL_ERR_NO_RESOURCES, errno,
               "rank %d: no memory for %zu bytes of a slot in rank %d's window (%s: on shm, is "
               "/dev/shm or the memory limit full? df /dev/shm; on rdma, rank %d could not pin "
               "its slots for this rank: its locked-memory limit, ulimit -l)%s",
               rank_, len - *committed, peer, transport_.name(), peer, shm.c_str());
  }
  committed_bytes_ += len - *committed;
  *committed = uint32_t(len);
}

// The first message of a length into one of our slots in the peer's window
// commits all of our slots there to that length, not only its own. A
// page's first access through a mapping is costly (about 6 us a page on
// the 2-core development VM, where MADV_POPULATE_WRITE does not spare it:
// the transport touches what it commits, and the receiver what it will
// read, touch_slots), and which slot a call's messages take depends on how
// many messages went before on the pair, line messages included: through
// the PMPI shim at np 2, OSU's loop (a barrier, then the alltoall) puts
// every alltoall message of a size in the same two of the four slots, until
// a call elsewhere shifts the count and the other two take their first
// accesses inside timed calls (a 16 KiB alltoall then took 75-200 us
// instead of 2-3; bench/results/shim-2026-12-07-alltoall-np2.md). So every
// slot's first access comes with the first message of a length: the same
// pages a pair comes to hold after num_slots such messages, no more.
void Channel::commit_slots(int peer, size_t len) {
  const RemoteRegion& w = peers_[size_t(peer)];
  uint32_t* committed = &slot_committed_[size_t(peer) * size_t(layout_.num_slots)];
  for (int j = 0; j < layout_.num_slots; ++j)
    if (len > committed[j]) commit_slot(peer, w.addr + layout_.slot(rank_, j), len, &committed[j]);
}

// The receiver's side of commit_slots: a message longer than any before from
// peer reads a byte of every page of its slots up to that length, which
// its sender committed before it wrote the message (commit_slots). Only
// where peer writes through a mapping of our window (line writes: shm);
// elsewhere the transport's own writes fault the pages in.
void Channel::touch_slots(int peer, size_t len) {
  const size_t page = WindowLayout::kPageBytes;
  const size_t from = slots_touched_[size_t(peer)] / page * page;
  for (int j = 0; j < layout_.num_slots; ++j) {
    const char* slot = window_ + layout_.slot(peer, j);
    for (size_t at = from; at < len; at += page) (void)__atomic_load_n(slot + at, __ATOMIC_RELAXED);
  }
  slots_touched_[size_t(peer)] = uint32_t(len);
}

bool Channel::pair_committed(int peer) const {
  const size_t slots = size_t(layout_.num_slots);
  const uint32_t* first = &slot_committed_[size_t(peer) * slots];
  return std::any_of(first, first + slots, [](uint32_t c) { return c != 0; });
}

int Channel::committed_peers() const {
  int n = 0;
  for (int p = 0; p < size_; ++p) n += pair_committed(p);
  return n;
}

bool Channel::SendWait::try_now() {
  if (!ch.credit_ready(peer)) return false;
  RemoteRegion offered;
  if (placed && ch.offered_for(peer, ch.sent_[size_t(peer)] + 1, offset, len, &offered)) {
    ch.post_data(peer, src, len, offered.addr + offset, offered.rkey);
    ch.post_flag(peer, len | kDirectBit);
  } else if (!is_direct) {
    ch.do_send(peer, src, len);
  } else {
    if (len > 0) ch.post_data(peer, src, len, dst->addr + offset, dst->rkey);
    ch.post_flag(peer, len | kDirectBit);
  }
  return true;
}

Channel::RecvWait Channel::recv(int peer, size_t len) { return RecvWait(*this, peer, len, false); }

bool Channel::RecvWait::try_now() {
  if (is_direct) return ch.try_flag(peer, len | kDirectBit);
  if (placed && len > 0) {
    // Placed by its sender: only the flag is in the box, with the direct
    // bit (never a line message: those carry no direct bit).
    const uint64_t m = ch.received_[size_t(peer)];
    const int k = int(m % uint64_t(ch.layout_.num_slots));
    const uint64_t flag =
        __atomic_load_n(ch.local_word(ch.layout_.ready(peer, k)), __ATOMIC_ACQUIRE);
    if ((flag >> 32) != ((m + 1) & 0xffffffffu)) return false;
    if ((flag & 0xffffffffu) == (len | kDirectBit)) {
      data = placed;
      ++ch.placed_received_;
      return true;
    }
  }
  data = ch.message(peer, len);
  return data != nullptr;
}

const void* Channel::message(int peer, size_t len) {
  if (line_message(peer, len)) return try_lines(peer, len);
  if (!try_flag(peer, len | control_)) return nullptr;
  const int k = int(received_[size_t(peer)] % uint64_t(layout_.num_slots));
  if (len <= WindowLayout::kInlineBytes) return window_ + layout_.inline_data(peer, k);
  if (len > slots_touched_[size_t(peer)] && line_peers_[size_t(peer)]) touch_slots(peer, len);
  return window_ + layout_.slot(peer, k);
}

Channel::ReleaseWait Channel::release(int peer) { return ReleaseWait(*this, peer); }

// A message forwarded straight from its slot must have left before the
// slot is handed back.
bool Channel::ReleaseWait::try_now() {
  if (ch.slot_sources_in_flight_) {
    if (ch.outstanding_.load(std::memory_order_acquire) != 0) return false;
    ch.slot_sources_in_flight_ = false;
  }
  ch.do_release(peer);
  return true;
}

void Channel::do_release(int peer) {
  const uint64_t consumed = ++received_[size_t(peer)];
  // Deferrable (kWriteDeferrable): the peer needs this credit only for a
  // message num_slots - 1 ahead of what this rank has consumed, and this
  // rank polls - sending it - before any wait; tcp sends it with its next
  // write to the peer, often the next call's message, in one system call.
  // A credit for a peer that is gone is moot - its message is consumed -
  // and failing here would fail a call that the dead rank completed (tcp
  // learns the loss from reading its stream, which applied that message
  // first); the next wait on or write to the peer meets the loss.
  try {
    post_to_window(peer, &consumed, sizeof consumed, layout_.credit(rank_), kWriteDeferrable);
  } catch (const Error& e) {
    if (e.status() != COLL_ERR_PEER_LOST) throw;
  }
}

void Channel::expose(int peer, void* buf, size_t len) {
  const MemoryRegion* mr = pin(buf, len);
  // The previous exposure to this peer is over: it was for an earlier call,
  // which ended here only after all its direct writes had arrived.
  const uint64_t seq = ++exposed_to_[size_t(peer)];
  const ExposeRecord rec{reinterpret_cast<uintptr_t>(buf), len, mr ? mr->rkey : 0, seq};
  post_to_window(peer, &rec, offsetof(ExposeRecord, sequence), layout_.expose(rank_));
  post_to_window(peer, &rec.sequence, sizeof rec.sequence,
                 layout_.expose(rank_) + offsetof(ExposeRecord, sequence));
}

Channel::ExposedWait Channel::exposed_by(int peer) { return ExposedWait(*this, peer); }

bool Channel::offer(int peer, void* buf, size_t len, uint64_t messages, uint64_t after) {
  if (len == 0 || messages == 0 || messages > UINT32_MAX ||
      !transport_.copies_into(group_[size_t(peer)], buf, len))
    return false;
  const MemoryRegion* mr = pin(buf, len);
  // Messages of this call from peer start after the last one consumed:
  // every earlier operation on this channel consumed all of its own.
  const OfferRecord rec{reinterpret_cast<uintptr_t>(buf), len, mr ? mr->rkey : 0,
                        uint32_t(messages), received_[size_t(peer)] + 1 + after};
  const uint64_t none = 0;
  const size_t at = layout_.expose(rank_) + kOfferAt;
  post_to_window(peer, &none, sizeof none, at + offsetof(OfferRecord, first));
  post_to_window(peer, &rec, offsetof(OfferRecord, first), at);
  post_to_window(peer, &rec.first, sizeof rec.first, at + offsetof(OfferRecord, first));
  return true;
}

bool Channel::offered_for(int peer, uint64_t message, size_t offset, size_t len,
                          RemoteRegion* out) const {
  if (len == 0) return false;
  auto* rec = reinterpret_cast<const volatile OfferRecord*>(window_ + layout_.expose(peer) +
                                                            kOfferAt);
  const uint64_t first = __atomic_load_n(&rec->first, __ATOMIC_ACQUIRE);
  if (first == 0 || message < first) return false;
  const uint64_t addr = rec->addr, length = rec->length;
  const uint32_t rkey = rec->rkey, count = rec->count;
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  if (__atomic_load_n(&rec->first, __ATOMIC_RELAXED) != first) return false;  // being replaced
  if (message - first >= count || offset > length || len > length - offset) return false;
  *out = RemoteRegion{addr, length, rkey, 0};
  return true;
}

Channel::SendWait Channel::send_placed(int peer, const void* src, size_t len, size_t offset) {
  SendWait w = send(peer, src, len);
  w.placed = true;
  w.offset = offset;
  return w;
}

bool Channel::ExposedWait::try_now() {
  const uint64_t want = ch.exposures_seen_[size_t(peer)] + 1;
  auto* rec = reinterpret_cast<const volatile ExposeRecord*>(ch.window_ + ch.layout_.expose(peer));
  if (__atomic_load_n(&rec->sequence, __ATOMIC_ACQUIRE) != want) return false;
  ch.exposures_seen_[size_t(peer)] = want;
  region.addr = rec->addr;
  region.length = rec->length;
  region.rkey = uint32_t(rec->rkey);
  return true;
}

Channel::SendWait Channel::send_direct(int peer, const RemoteRegion& dst, size_t offset,
                                       const void* src, size_t len) {
  if (offset > dst.length || len > dst.length - offset)
    fail(COLL_ERR_INVALID_ARG,
         "rank %d: zero-copy write of %zu bytes at offset %zu into the %llu byte buffer of rank "
         "%d: do all ranks pass the same count and datatype?",
         rank_, len, offset, static_cast<unsigned long long>(dst.length), peer);
  if (len > kMaxDirectMessage)
    fail(COLL_ERR_INTERNAL, "channel: direct message of %zu bytes (at most %zu)", len,
         kMaxDirectMessage);
  return SendWait(*this, peer, src, len, true, &dst, offset);
}

FramePool* frame_pool_of(Channel& ch) { return &ch.frames(); }

Task Channel::recv_direct(int peer, size_t len) {
  co_await RecvWait(*this, peer, len, true);
  co_await release(peer);
}

const MemoryRegion* Channel::pin(const void* buf, size_t len) {
  if (len == 0) return nullptr;
  // Pinned already by this operation (the communicator pins the user
  // buffers on RDMA, and persistent operations at their init; an algorithm
  // then exposes recvbuf): no second cache lookup.
  if (const MemoryRegion* mr = pinned(buf, len)) return mr;
  if (!pins_) fail(COLL_ERR_INTERNAL, "channel: pin outside an operation");
  const MemoryRegion* mr = cache_.acquire(buf, len, owner_);
  pins_->push_back(mr);
  return mr;
}

bool Channel::pair_used(int peer) const {
  const size_t p = size_t(peer);
  return sent_[p] || received_[p] || exposed_to_[p] || exposures_seen_[p];
}

// Deadlock freedom: every rank first sends its last message to each used
// peer (credits for them were posted by the peers' earlier releases, which
// wait for nothing), then receives; "used" is symmetric (a pair's traffic in
// one direction implies credits or exposures read in the other).
Task Channel::close() {
  co_await flush();
  std::vector<int> used;
  for (int p = 0; p < size_; ++p)
    if (p != rank_ && pair_used(p)) used.push_back(p);
  for (int p : used) co_await send(p, nullptr, 0);
  // Received but never released: the slot is not reused, and no credit
  // goes back into a window that is about to go away.
  for (int p : used) co_await recv(p, 0);
  co_await flush();
  // Then the sub-channels', in the same order on every rank: each is a
  // handshake among its own ranks only (the leaders' among the leaders).
  if (hierarchy_) {
    co_await hierarchy_->node->close();
    if (hierarchy_->leaders) co_await hierarchy_->leaders->close();
  }
}

Task Channel::quiesce() {
  // Rewriting the last credit is harmless: credits are absolute counts.
  // Then the `left` notice, to every peer (one that never talked to us may
  // be waiting for its first message): this rank's operations are all
  // complete, so a peer still waiting for a write of ours is in an
  // operation we will never join, and fails at once (COLL_ERR_PEER_LOST)
  // instead of at COLL_TIMEOUT; posted after every other write of ours, it
  // lands after them, so a peer that sees it has everything we sent.
  // A peer that is gone already (it finalized before us, its process
  // ended) needs neither: it is skipped, not a failure of this rank's
  // finalize. Failing here would fail the communicator, whose failure
  // notice (notify_failed) would replace the `left` notice at the peers
  // that had it, and the rest would never get it: they could no longer
  // tell this rank's clean leave from a death (coll_comm_get_failed).
  static constexpr uint64_t kLeft = kFinalized;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const RemoteRegion& w = peers_[size_t(p)];
    try {
      if (sent_[size_t(p)] != 0 || received_[size_t(p)] != 0) {
        const uint64_t consumed = received_[size_t(p)];
        post(p, counted_context(), &consumed, sizeof consumed, nullptr, kWriteSignaled,
             w.addr + layout_.credit(rank_), w.rkey);
      }
      // kWriteLeaving: where connections are made on first use, a peer we
      // have none with learns it from being refused (transport.hpp).
      post(p, counted_context(), &kLeft, sizeof kLeft, nullptr, kWriteSignaled | kWriteLeaving,
           w.addr + layout_.left(rank_), w.rkey);
    } catch (const Error& e) {
      if (e.status() != COLL_ERR_PEER_LOST) throw;
    }
  }
  co_await flush();
  if (hierarchy_) {
    co_await hierarchy_->node->quiesce();
    if (hierarchy_->leaders) co_await hierarchy_->leaders->quiesce();
  }
}

void Channel::notify_failed(int status) { post_notice(kFailedBit | uint32_t(status)); }

void Channel::notify_refused(uint64_t seq, int status) {
  post_notice(kRefusedBit | (seq & kSeqMask) << kSeqShift | uint32_t(status));
}

int Channel::accepting_peer(uint64_t seq) const {
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const uint64_t v = notice(p);
    if (v & kFailedBit) return p;
    // A refusal of seq or of a later call (counted modulo 2^30): the peer
    // refused seq too, and may have sent a later call's data since.
    if ((v & kRefusedBit) && (((v >> kSeqShift) - seq) & kSeqMask) < (kSeqMask >> 1)) continue;
    const uint64_t m = received_[size_t(p)];
    const int k = int(m % uint64_t(layout_.num_slots));
    const uint64_t flag = __atomic_load_n(local_word(layout_.ready(p, k)), __ATOMIC_ACQUIRE);
    if ((flag >> 32) == ((m + 1) & 0xffffffffu) && !(flag & kControlBit)) return p;
  }
  return -1;
}

void Channel::post_notice(uint64_t value) {
  // Signaled, as quiesce's notices (an unsignaled write's source must stay
  // valid until a later signaled one completes), and waited for here: the
  // communicator may be freed right after its failure is returned, and the
  // next notice reuses the source.
  notice_ = value;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    const RemoteRegion& w = peers_[size_t(p)];
    try {
      post(p, counted_context(), &notice_, sizeof notice_, nullptr,
           kWriteSignaled | kWriteNotice, w.addr + layout_.left(rank_), w.rkey);
    } catch (const Error&) {
      // That peer is gone or has closed the window: nothing to tell.
    }
  }
  try {
    // RDMA completions need nothing from the peers (their NICs ack); an
    // error completion (a peer gone) throws and ends the wait.
    while (outstanding_.load(std::memory_order_acquire) != 0)
      poll_and_route_completions(transport_, transport_.rank());
  } catch (const Error&) {
  }
  if (hierarchy_) {
    hierarchy_->node->post_notice(value);
    if (hierarchy_->leaders) hierarchy_->leaders->post_notice(value);
  }
}

}  // namespace coll
