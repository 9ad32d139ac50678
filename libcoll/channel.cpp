#include "channel.hpp"

#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstring>

#include "error.hpp"

namespace coll {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Context of the signaled writes of quiesce(); registrations are pointers
// and never 1.
constexpr uint64_t kQuiesceContext = 1;

inline uint64_t flag_value(uint64_t sequence, size_t len) {
  return ((sequence & 0xffffffffu) << 32) | uint64_t(len);
}

}  // namespace

Channel::Channel(Transport& transport, const WindowLayout& layout,
                 MemoryRegion* window_mr, std::vector<RemoteRegion> peer_windows,
                 double timeout_s, SourceRegistrar registrar)
    : transport_(transport),
      layout_(layout),
      window_mr_(window_mr),
      peers_(std::move(peer_windows)),
      timeout_s_(timeout_s),
      registrar_(std::move(registrar)),
      rank_(transport.rank()),
      size_(transport.size()),
      window_(static_cast<char*>(window_mr->addr)),
      sent_(size_t(size_), 0),
      received_(size_t(size_), 0) {
  if (layout_.num_slots < 1 || layout_.num_slots > WindowLayout::kMaxSlots)
    fail(COLL_ERR_INTERNAL, "channel: %d slots per peer (1..%d)", layout_.num_slots,
         WindowLayout::kMaxSlots);
}

const volatile uint64_t* Channel::local_word(size_t offset) const {
  return reinterpret_cast<const volatile uint64_t*>(window_ + offset);
}

// Spins briefly, then yields the CPU (ranks may outnumber cores: a
// descheduled peer must get to run), then sleeps in short naps when the
// wait is long. Every wait ends: at the timeout, or when the peer is found
// dead, or when the transport reports an error.
template <class Ready>
void Channel::wait_until(int peer, const char* what, Ready ready) {
  if (ready()) return;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_peer_check = start + std::chrono::milliseconds(10);
  for (uint64_t i = 1;; ++i) {
    progress();
    if (ready()) return;
    if (i < 64) {
      cpu_relax();
      continue;
    }
    if ((i & 15) != 0) {
      sched_yield();
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
    if (waited > 0.5) {
      struct timespec nap = {0, 50 * 1000};
      nanosleep(&nap, nullptr);
    } else {
      sched_yield();
    }
  }
}

void Channel::progress() {
  Completion wc[16];
  int n = transport_.poll(wc, 16);
  for (int i = 0; i < n; ++i) {
    if (wc[i].status != 0)
      fail(wc[i].status, "rank %d: a write to rank %d failed on transport %s", rank_,
           wc[i].peer, transport_.name());
    if (wc[i].context == 0) continue;
    if (wc[i].context != kQuiesceContext)
      registrar_.release(reinterpret_cast<const MemoryRegion*>(wc[i].context));
    --outstanding_;
  }
}

void Channel::post(int peer, uint64_t context, const void* src, size_t len,
                   const MemoryRegion* mr, int flags, size_t remote_offset) {
  const RemoteRegion& w = peers_[size_t(peer)];
  if (transport_.post_write(peer, context, src, len, const_cast<MemoryRegion*>(mr), flags,
                            w.addr + remote_offset, w.rkey) != 0)
    fail_errno(COLL_ERR_TRANSPORT, errno, "rank %d: %s post_write of %zu bytes to rank %d",
               rank_, transport_.name(), len, peer);
}

void Channel::send(int peer, const void* src, size_t len) {
  if (len > layout_.slot_bytes)
    fail(COLL_ERR_INTERNAL, "channel: message of %zu bytes exceeds the %zu byte slot", len,
         layout_.slot_bytes);
  const uint64_t m = sent_[size_t(peer)];
  const uint64_t slots = uint64_t(layout_.num_slots);
  const volatile uint64_t* credit = local_word(layout_.credit(peer));
  wait_until(peer, "a free slot", [&] {
    return m < slots || __atomic_load_n(credit, __ATOMIC_ACQUIRE) >= m + 1 - slots;
  });
  const int k = int(m % slots);
  if (len > 0) {
    if (!transport_.needs_local_registration()) {
      post(peer, 0, src, len, nullptr, 0, layout_.slot(rank_, k));
    } else {
      auto s = reinterpret_cast<uintptr_t>(src);
      auto w = reinterpret_cast<uintptr_t>(window_mr_->addr);
      if (s >= w && s - w + len <= window_mr_->length) {
        post(peer, 0, src, len, window_mr_, 0, layout_.slot(rank_, k));
      } else {
        // The source stays registered (and referenced in the cache) until
        // its completion comes back: rdma_post_write(3).
        const MemoryRegion* mr = registrar_.acquire(src, len);
        try {
          post(peer, reinterpret_cast<uint64_t>(mr), src, len, mr, kWriteSignaled,
               layout_.slot(rank_, k));
        } catch (...) {
          registrar_.release(mr);
          throw;
        }
        ++outstanding_;
      }
    }
  }
  // The flag after the data: 8 bytes from the stack, copied (or inlined) at
  // post time.
  const uint64_t flag = flag_value(m + 1, len);
  post(peer, 0, &flag, sizeof flag, nullptr, 0, layout_.ready(rank_, k));
  sent_[size_t(peer)] = m + 1;
}

const void* Channel::recv(int peer, size_t len) {
  const uint64_t m = received_[size_t(peer)];
  const int k = int(m % uint64_t(layout_.num_slots));
  const volatile uint64_t* ready = local_word(layout_.ready(peer, k));
  const uint64_t want = (m + 1) & 0xffffffffu;
  uint64_t flag = 0;
  wait_until(peer, "a message", [&] {
    flag = __atomic_load_n(ready, __ATOMIC_ACQUIRE);
    return (flag >> 32) == want;
  });
  const size_t got = size_t(flag & 0xffffffffu);
  if (got != len)
    fail(COLL_ERR_INVALID_ARG,
         "rank %d received %zu bytes from rank %d where it expected %zu: do all ranks "
         "pass the same count, datatype, op and root?",
         rank_, got, peer, len);
  return window_ + layout_.slot(peer, k);
}

void Channel::release(int peer) {
  const uint64_t consumed = ++received_[size_t(peer)];
  post(peer, 0, &consumed, sizeof consumed, nullptr, 0, layout_.credit(rank_));
}

void Channel::flush() {
  wait_until(rank_, "completion of its own writes", [&] { return outstanding_ == 0; });
}

void Channel::quiesce() {
  // Rewriting the last credit is harmless: credits are absolute counts.
  for (int p = 0; p < size_; ++p) {
    if (p == rank_ || (sent_[size_t(p)] == 0 && received_[size_t(p)] == 0)) continue;
    const uint64_t consumed = received_[size_t(p)];
    post(p, kQuiesceContext, &consumed, sizeof consumed, nullptr, kWriteSignaled,
         layout_.credit(rank_));
    ++outstanding_;
  }
  flush();
}

}  // namespace coll
