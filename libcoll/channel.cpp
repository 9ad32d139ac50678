#include "channel.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "error.hpp"
#include "regcache.hpp"

namespace coll {
namespace {

// Contexts of signaled writes: completions are only counted.
constexpr uint64_t kCountedContext = 1;

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

}  // namespace

Channel::Channel(Transport& transport, const WindowLayout& layout, MemoryRegion* window_mr,
                 std::vector<RemoteRegion> peer_windows, double timeout_s,
                 RegistrationCache& cache, size_t zcopy_threshold,
                 const WaitPolicyParams& wait)
    : transport_(transport),
      layout_(layout),
      window_mr_(window_mr),
      peers_(std::move(peer_windows)),
      timeout_s_(timeout_s),
      cache_(cache),
      zcopy_threshold_(zcopy_threshold),
      placement_(transport),
      wait_(wait, transport.shares_cpu_placement() ? &placement_ : nullptr),
      rank_(transport.rank()),
      size_(transport.size()),
      window_(static_cast<char*>(window_mr->addr)),
      needs_registration_(transport.needs_local_registration()),
      sent_(size_t(size_), 0),
      received_(size_t(size_), 0),
      exposed_to_(size_t(size_), 0),
      exposures_seen_(size_t(size_), 0) {
  if (layout_.num_slots < 1 || layout_.num_slots > WindowLayout::kMaxSlots)
    fail(COLL_ERR_INTERNAL, "channel: %d slots per peer (1..%d)", layout_.num_slots,
         WindowLayout::kMaxSlots);
  if (layout_.slot_bytes >= kDirectBit)
    fail(COLL_ERR_INTERNAL, "channel: slot of %zu bytes", layout_.slot_bytes);
  line_peers_.resize(size_t(size_));
  for (int p = 0; p < size_; ++p) line_peers_[size_t(p)] = transport_.line_writes(p);
  staging_.resize(size_t(size_) * WindowLayout::kMaxLineMessage);
}

const volatile uint64_t* Channel::local_word(size_t offset) const {
  return reinterpret_cast<const volatile uint64_t*>(window_ + offset);
}

// Between failed polls the wait policy spins, yields the CPU or naps
// (wait_policy.hpp says when, and why: a yield beside a busy process can
// cost a scheduler tick).
// Every wait ends: at the timeout, when the peer is found dead, or when the
// transport reports an error.
template <class Ready>
void Channel::wait_until(int peer, const char* what, Ready ready) {
  wait_.enter();
  if (ready()) return;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_peer_check = start + std::chrono::milliseconds(10);
  wait_.begin(start);
  for (uint64_t i = 1;; ++i) {
    progress();
    if (ready()) return;
    if ((i & 15) != 0) {
      wait_.idle();
      continue;
    }
    const auto now = Clock::now();
    const double waited = std::chrono::duration<double>(now - start).count();
    if (waited > timeout_s_)
      fail(COLL_ERR_TIMEOUT,
           "rank %d timed out after %.1f s waiting for %s from rank %d "
           "(COLL_TIMEOUT=%g): is every rank calling the same collective?",
           rank_, waited, what, peer, timeout_s_);
    if (now >= next_peer_check) {
      transport_.check_peer(peer);
      next_peer_check = now + std::chrono::milliseconds(10);
    }
    wait_.observe(now);
    wait_.idle();
  }
}

void Channel::progress() {
  Completion wc[16];
  const int n = transport_.poll(wc, 16);
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != 0) {
      transport_.check_peer(wc[i].peer);  // throws the transport's own detail
      fail(wc[i].status, "rank %d: a write to rank %d failed on transport %s", rank_, wc[i].peer,
           transport_.name());
    }
    if (wc[i].context == kCountedContext) --outstanding_;
  }
}

void Channel::post(int peer, uint64_t context, const void* src, size_t len,
                   const MemoryRegion* mr, int flags, uint64_t remote_addr, uint32_t rkey) {
  if (transport_.post_write(peer, context, src, len, const_cast<MemoryRegion*>(mr), flags,
                            remote_addr, rkey) != 0)
    post_failed(peer, len);
  if (flags & kWriteSignaled) ++outstanding_;
}

void Channel::post_failed(int peer, size_t len) {
  const int err = errno;
  transport_.check_peer(peer);  // a peer that is gone is PEER_LOST, not a transport error
  fail_errno(COLL_ERR_TRANSPORT, err, "rank %d: %s write of %zu bytes to rank %d%s", rank_,
             transport_.name(), len, peer,
             err == EPERM ? " (zero-copy needs ptrace permission between ranks on shm: "
                            "set COLL_ZCOPY_THRESHOLD=0 to turn it off)"
                          : "");
}

// Small control words (flags, credits, expose records) are written from
// the stack: transports copy or inline writes of up to 64 bytes at post.
void Channel::post_to_window(int peer, const void* src, size_t len, size_t offset) {
  const RemoteRegion& w = peers_[size_t(peer)];
  post(peer, 0, src, len, nullptr, 0, w.addr + offset, w.rkey);
}

namespace {
bool contains(const MemoryRegion* mr, const void* addr, size_t len) {
  auto a = reinterpret_cast<uintptr_t>(addr), b = reinterpret_cast<uintptr_t>(mr->addr);
  return a >= b && len <= mr->length && a - b <= mr->length - len;
}
}  // namespace

const MemoryRegion* Channel::pinned(const void* addr, size_t len) const {
  for (const MemoryRegion* mr : pins_)
    if (contains(mr, addr, len)) return mr;
  return nullptr;
}

const MemoryRegion* Channel::local_region(const void* src, size_t len) const {
  if (contains(window_mr_, src, len)) return window_mr_;
  if (const MemoryRegion* mr = pinned(src, len)) return mr;
  fail(COLL_ERR_INTERNAL, "rank %d: a send from %p (%zu bytes) that is not registered", rank_,
       src, len);
}

void Channel::post_data(int peer, const void* src, size_t len, uint64_t remote_addr,
                        uint32_t rkey) {
  if (!needs_registration_) {
    post(peer, 0, src, len, nullptr, 0, remote_addr, rkey);
    return;
  }
  // The source must stay registered and unchanged until the write completes
  // (rdma_post_write(3)): every data write is signaled; finish() waits for
  // them before dropping the pins, and release() before a slot we forwarded
  // from can be refilled by its sender.
  const MemoryRegion* mr = local_region(src, len);
  post(peer, kCountedContext, src, len, mr, kWriteSignaled, remote_addr, rkey);
  if (mr == window_mr_) slot_sources_in_flight_ = true;
}

void Channel::wait_credit(int peer) {
  const uint64_t m = sent_[size_t(peer)];
  const uint64_t slots = uint64_t(layout_.num_slots);
  const volatile uint64_t* credit = local_word(layout_.credit(peer));
  wait_until(peer, "a free slot", [&] {
    return m < slots || __atomic_load_n(credit, __ATOMIC_ACQUIRE) >= m + 1 - slots;
  });
}

void Channel::post_flag(int peer, size_t len_field) {
  const uint64_t m = sent_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const uint64_t flag = flag_value(m + 1, len_field);
  post_to_window(peer, &flag, sizeof flag, layout_.ready(rank_, k));
  sent_[size_t(peer)] = m + 1;
}

void Channel::length_mismatch(int peer, uint64_t got, uint64_t want) const {
  fail(COLL_ERR_INVALID_ARG,
       "rank %d received %s message of %llu bytes from rank %d where it expected %s one "
       "of %llu: do all ranks pass the same count, datatype, op and root?",
       rank_, got & kDirectBit ? "a zero-copy" : "an eager",
       static_cast<unsigned long long>(got & ~kDirectBit), peer,
       want & kDirectBit ? "a zero-copy" : "an eager",
       static_cast<unsigned long long>(want & ~kDirectBit));
}

uint64_t Channel::wait_flag(int peer, size_t len_field) {
  const uint64_t m = received_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const volatile uint64_t* ready = local_word(layout_.ready(peer, k));
  const uint64_t want = (m + 1) & 0xffffffffu;
  uint64_t flag = 0;
  wait_until(peer, "a message", [&] {
    flag = __atomic_load_n(ready, __ATOMIC_ACQUIRE);
    return (flag >> 32) == want;
  });
  const uint64_t got = flag & 0xffffffffu;
  if (got != len_field) length_mismatch(peer, got, len_field);
  return m;
}

// A line message: every line is polled on each pass, so that their cache
// misses overlap; a line's payload is read only after its own flag.
const void* Channel::wait_lines(int peer, size_t len) {
  const uint64_t m = received_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const char* base = window_ + layout_.ready(peer, k);
  const size_t lines = len == 0 ? 1 : (len + WindowLayout::kInlineBytes - 1) /
                                          WindowLayout::kInlineBytes;
  const uint64_t expected = flag_value(m + 1, len);
  const uint64_t want = (m + 1) & 0xffffffffu;
  uint64_t first = 0;
  wait_until(peer, "a message", [&] {
    bool rest = true;
    for (size_t j = 1; j < lines; ++j)
      rest &= __atomic_load_n(reinterpret_cast<const uint64_t*>(base + j * 64),
                              __ATOMIC_ACQUIRE) == expected;
    first = __atomic_load_n(reinterpret_cast<const uint64_t*>(base), __ATOMIC_ACQUIRE);
    // A first line of this sequence with another length is a mismatch:
    // stop waiting and report it.
    return (first >> 32) == want && (first != expected || rest);
  });
  if (first != expected) length_mismatch(peer, first & 0xffffffffu, len);
  if (lines == 1) return base + 8;
  char* out = staging_.data() + size_t(peer) * WindowLayout::kMaxLineMessage;
  for (size_t j = 0, at = 0; j < lines; ++j, at += WindowLayout::kInlineBytes)
    std::memcpy(out + at, base + j * 64 + 8, std::min(WindowLayout::kInlineBytes, len - at));
  return out;
}

void Channel::send(int peer, const void* src, size_t len) {
  if (len > layout_.slot_bytes)
    fail(COLL_ERR_INTERNAL, "channel: message of %zu bytes exceeds the %zu byte slot", len,
         layout_.slot_bytes);
  wait_credit(peer);
  if (line_message(peer, len)) {
    const uint64_t m = sent_[size_t(peer)];
    const int k = int(m % uint64_t(layout_.num_slots));
    const RemoteRegion& w = peers_[size_t(peer)];
    if (transport_.post_lines(peer, src, len, flag_value(m + 1, len),
                              w.addr + layout_.ready(rank_, k), w.rkey) != 0)
      post_failed(peer, len);
    sent_[size_t(peer)] = m + 1;
    return;
  }
  if (len > 0) {
    const int k = int(sent_[size_t(peer)] % uint64_t(layout_.num_slots));
    const RemoteRegion& w = peers_[size_t(peer)];
    const size_t at = len <= WindowLayout::kInlineBytes ? layout_.inline_data(rank_, k)
                                                        : layout_.slot(rank_, k);
    post_data(peer, src, len, w.addr + at, w.rkey);
  }
  post_flag(peer, len);
}

const void* Channel::recv(int peer, size_t len) {
  if (line_message(peer, len)) return wait_lines(peer, len);
  const uint64_t m = wait_flag(peer, len);
  const int k = int(m % uint64_t(layout_.num_slots));
  return window_ + (len <= WindowLayout::kInlineBytes ? layout_.inline_data(peer, k)
                                                      : layout_.slot(peer, k));
}

void Channel::release(int peer) {
  // A message forwarded straight from its slot must have left before the
  // slot is handed back.
  if (slot_sources_in_flight_) {
    flush();
    slot_sources_in_flight_ = false;
  }
  const uint64_t consumed = ++received_[size_t(peer)];
  post_to_window(peer, &consumed, sizeof consumed, layout_.credit(rank_));
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

RemoteRegion Channel::exposed_by(int peer) {
  const uint64_t want = ++exposures_seen_[size_t(peer)];
  auto* rec = reinterpret_cast<const volatile ExposeRecord*>(window_ + layout_.expose(peer));
  wait_until(peer, "a zero-copy buffer", [&] {
    return __atomic_load_n(&rec->sequence, __ATOMIC_ACQUIRE) == want;
  });
  RemoteRegion r;
  r.addr = rec->addr;
  r.length = rec->length;
  r.rkey = uint32_t(rec->rkey);
  return r;
}

void Channel::send_direct(int peer, const RemoteRegion& dst, size_t offset, const void* src,
                          size_t len) {
  if (offset > dst.length || len > dst.length - offset)
    fail(COLL_ERR_INVALID_ARG,
         "rank %d: zero-copy write of %zu bytes at offset %zu into the %llu byte buffer of rank "
         "%d: do all ranks pass the same count and datatype?",
         rank_, len, offset, static_cast<unsigned long long>(dst.length), peer);
  if (len >= kDirectBit)
    fail(COLL_ERR_INTERNAL, "channel: direct message of %zu bytes", len);
  wait_credit(peer);
  if (len > 0) post_data(peer, src, len, dst.addr + offset, dst.rkey);
  post_flag(peer, len | kDirectBit);
}

void Channel::recv_direct(int peer, size_t len) {
  wait_flag(peer, len | kDirectBit);
  release(peer);
}

const MemoryRegion* Channel::pin(const void* buf, size_t len) {
  if (len == 0) return nullptr;
  // Pinned already in this call (the communicator pins the user buffers on
  // RDMA, and an algorithm then exposes recvbuf): no second cache lookup,
  // whose page-frame check reads the whole range's page map.
  if (const MemoryRegion* mr = pinned(buf, len)) return mr;
  const MemoryRegion* mr = cache_.acquire(buf, len);
  pins_.push_back(mr);
  return mr;
}

void Channel::flush() {
  wait_until(rank_, "completion of its own writes", [&] { return outstanding_ == 0; });
}

void Channel::finish() {
  flush();
  drop_pins();
}

void Channel::drop_pins() noexcept {
  for (const MemoryRegion* mr : pins_) {
    try {
      cache_.release(mr);
    } catch (const Error&) {
      // Only a region the cache did not hand out throws: not one of ours.
    }
  }
  pins_.clear();
}

void Channel::quiesce() {
  // Rewriting the last credit is harmless: credits are absolute counts.
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || (sent_[size_t(p)] == 0 && received_[size_t(p)] == 0)) continue;
    const uint64_t consumed = received_[size_t(p)];
    const RemoteRegion& w = peers_[size_t(p)];
    post(p, kCountedContext, &consumed, sizeof consumed, nullptr, kWriteSignaled,
         w.addr + layout_.credit(rank_), w.rkey);
  }
  flush();
}

}  // namespace coll
