// What the algorithms of the rooted, v- and all-to-all collectives share:
// the per-rank blocks of a buffer, temporary memory, and moving a byte range
// between two ranks in slot-sized chunks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "algorithms.hpp"
#include "channel.hpp"

namespace coll {

// The blocks of a buffer, one per rank, in elements: `uniform` each, block i
// at i * uniform (allgather, gather, scatter, alltoall), or counts[i] at
// displs[i] (the v-collectives; the caller's arrays).
struct Blocks {
  const size_t* counts = nullptr;  // nullptr: uniform
  const size_t* displs = nullptr;
  size_t uniform = 0;

  static Blocks same(size_t count) { return {nullptr, nullptr, count}; }
  static Blocks given(const size_t* counts, const size_t* displs) { return {counts, displs, 0}; }
  size_t count(int i) const { return counts ? counts[i] : uniform; }
  size_t displ(int i) const { return counts ? displs[i] : size_t(i) * uniform; }
};

// Large temporary buffers kept for the next operation (every Scratch of
// Scratch::kPooledFrom bytes or more): fresh memory of several MiB costs a
// page fault and a cleared page per 4 KiB at every call - the reproducible
// modes' rows (owner_schedule.hpp) took longer to fault in than to sum. At most
// kMaxBuffers buffers and kMaxBytes in all stay, the one given back last
// first (the buffers it displaces are freed: a program that moves to
// larger calls keeps its newest size); the best fit is taken. The pool is
// never destroyed (a Scratch may go after static destructors), so its
// buffers stay reachable.
class ScratchPool {
 public:
  static constexpr size_t kMaxBuffers = 4;
  static constexpr size_t kMaxBytes = size_t(128) << 20;

  // Memory of at least `bytes` (its capacity in `capacity`).
  static char* take(size_t bytes, size_t& capacity) {
    ScratchPool& p = get();
    {
      std::lock_guard<std::mutex> lock(p.mu_);
      size_t best = p.free_.size();
      for (size_t i = 0; i < p.free_.size(); ++i)
        if (p.free_[i].capacity >= bytes &&
            (best == p.free_.size() || p.free_[i].capacity < p.free_[best].capacity))
          best = i;
      if (best < p.free_.size()) {
        const Buffer b = p.free_[best];
        p.free_.erase(p.free_.begin() + ptrdiff_t(best));
        p.bytes_ -= b.capacity;
        capacity = b.capacity;
        return b.mem;
      }
    }
    capacity = bytes;
    return static_cast<char*>(::operator new(bytes, std::align_val_t(64)));
  }
  // Back to the pool (the oldest buffers freed to make room), or freed
  // where it alone is larger than the pool.
  static void give(char* mem, size_t capacity) {
    std::vector<Buffer> evicted;
    ScratchPool& p = get();
    {
      std::lock_guard<std::mutex> lock(p.mu_);
      if (capacity <= kMaxBytes) {
        while (!p.free_.empty() &&
               (p.free_.size() >= kMaxBuffers || p.bytes_ + capacity > kMaxBytes)) {
          evicted.push_back(p.free_.front());
          p.bytes_ -= p.free_.front().capacity;
          p.free_.erase(p.free_.begin());
        }
        p.free_.push_back({mem, capacity});
        p.bytes_ += capacity;
        mem = nullptr;
      }
    }
    for (const Buffer& b : evicted) ::operator delete(b.mem, std::align_val_t(64));
    if (mem) ::operator delete(mem, std::align_val_t(64));
  }

 private:
  struct Buffer {
    char* mem;
    size_t capacity;
  };
  static ScratchPool& get() {
    static ScratchPool* const pool = new ScratchPool;  // never destroyed
    return *pool;
  }
  std::mutex mu_;
  std::vector<Buffer> free_;
  size_t bytes_ = 0;
};

// Temporary memory of one run of an algorithm, freed with its coroutine
// frame (or, from kPooledFrom bytes, given back to ScratchPool). Sends may come from
// it: it is pinned for the operation where the transport needs local
// registration, and an algorithm that sends from it flushes before it
// returns (the frame, and the memory, go before the operation's final
// flush).
class Scratch {
 public:
  Scratch() = default;
  Scratch(Channel& ch, size_t bytes) { allocate(ch, bytes); }
  // From kPooledFrom bytes on through ScratchPool: glibc maps blocks above
  // its mmap threshold (dynamic, at most 32 MiB) fresh at every call and
  // unmaps them at free, so a reduce_scatter of 64 MiB at np 4 (the ring's
  // and recursive halving's accumulator: the whole input) paid 16384 page
  // faults a call: 53 ms native, 300-400 ms under torch's progress thread,
  // against 30 ms for an allreduce of the same bytes. Below it glibc's heap
  // serves the block again from call to call.
  static constexpr size_t kPooledFrom = size_t(1) << 20;
  void allocate(Channel& ch, size_t bytes) {
    allocate_local(bytes);
    if (mem_ && ch.needs_local_registration()) ch.pin(mem_.get(), bytes);
  }
  // Memory that no send reads (only this rank's own reductions): never
  // pinned, so a persistent operation's starts stay clear of the
  // registration cache (tests/mp/comm_test.c checks it on RDMA).
  void allocate_local(size_t bytes) {
    if (bytes == 0) return;
    size_t pooled = 0;  // the pool buffer's capacity; 0: from operator new
    char* mem = bytes >= kPooledFrom
                    ? ScratchPool::take(bytes, pooled)
                    : static_cast<char*>(::operator new(bytes, std::align_val_t(64)));
    mem_ = std::unique_ptr<char, Free>(mem, Free{pooled});
    bytes_ = bytes;
  }
  char* get() const { return mem_.get(); }
  size_t size() const { return bytes_; }

 private:
  struct Free {
    size_t pooled;  // the capacity of a ScratchPool buffer; 0 (value-initialised): not pooled
    void operator()(char* p) const {
      if (pooled)
        ScratchPool::give(p, pooled);
      else
        ::operator delete(p, std::align_val_t(64));
    }
  };
  std::unique_ptr<char, Free> mem_;
  size_t bytes_ = 0;
};

// The number of slot-sized chunks of a message of len bytes (none for 0).
inline size_t chunks_of(size_t len, size_t chunk) { return (len + chunk - 1) / chunk; }

// The waits of the one-step schedules' synchronous forms (NowFn: linear
// allgather(v), alltoall(v), reduce_scatter(_block)), each within the
// polls' budget. A credit on every pair this rank sends a block to
// (tx.count(p) > 0): each waits for the release of an earlier call's
// message, nothing of this call. Sizes: anything with count(rank).
template <class Sizes>
bool credits_now(Channel& ch, const Sizes& tx, Polls& polls) {
  const int n = ch.size(), r = ch.rank();
  for (int k = 1; k < n; ++k) {
    const int p = (r + k) % n;
    if (tx.count(p) > 0)
      while (!ch.can_send(p))
        if (!polls.next()) return false;
  }
  return true;
}

// Every peer's non-empty block of this call (rx.count(p) * es bytes) is
// there, looked at in the coroutines' receive order (r - 1, r - 2, ...).
inline bool blocks_there_now(Channel& ch, Blocks rx, size_t es, Polls& polls) {
  const int n = ch.size(), r = ch.rank();
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    const size_t len = rx.count(p) * es;
    if (len > 0)
      while (!ch.message(p, len))
        if (!polls.next()) return false;
  }
  return true;
}

// Then each of them copied to its place in out (rx.displ) and released,
// in that order.
inline void take_blocks_now(Channel& ch, Blocks rx, size_t es, char* out) {
  const int n = ch.size(), r = ch.rank();
  for (int k = 1; k < n; ++k) {
    const int p = (r + n - k) % n;
    const size_t len = rx.count(p) * es;
    if (len == 0) continue;
    std::memcpy(out + rx.displ(p) * es, ch.message(p, len), len);
    ch.release_now(p);
  }
}

// The root's wait in the synchronous forms (NowFn) of the linear rooted
// algorithms: polls until ready(i, len) holds for every other rank i whose
// block (len bytes, at_root) is not empty, in the coroutine's order. False
// if a block exceeds a slot (the coroutine chunks it) or the polls run out.
template <class Ready>
bool poll_every_block(int n, int root, Blocks at_root, size_t elem_size, size_t slot,
                      Polls& polls, Ready ready) {
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    const size_t len = at_root.count(i) * elem_size;
    if (len > slot) return false;
    if (len > 0)
      while (!ready(i, len))
        if (!polls.next()) return false;
  }
  return true;
}

// A take for exchange(): copies each received chunk to dst + its offset.
struct CopyTo {
  char* dst;
  void operator()(size_t at, const void* data, size_t len) const {
    std::memcpy(dst + at, data, len);
  }
};

// Sends tx_len bytes from tx to `to` and receives rx_len bytes from `from`
// (to and from may be one rank, or -1 for no send / no receive), in
// slot-sized chunks: chunk c of the send, then chunk c of the receive. An
// empty side sends or expects no message at all. take(at, data, len)
// consumes each received chunk (at: its offset in the rx stream) before
// its slot goes back. flush_first: take overwrites the chunk just sent
// (in-place exchanges), which Channel::send wants unchanged until a flush.
//
// The order is the one the deadlock arguments of the callers rest on:
// within one exchange, a receive of chunk c waits for the peer's send of
// chunk c, which the peer makes before its own receive of chunk c.
template <class Take>
Task exchange(Channel& ch, int to, const char* tx, size_t tx_len, int from, size_t rx_len,
              Take take, bool flush_first = false) {
  const size_t chunk = ch.slot_bytes();
  if (to < 0) tx_len = 0;
  if (from < 0) rx_len = 0;
  const size_t n = std::max(chunks_of(tx_len, chunk), chunks_of(rx_len, chunk));
  for (size_t c = 0; c < n; ++c) {
    const size_t off = c * chunk;
    if (off < tx_len) co_await ch.send(to, tx + off, std::min(chunk, tx_len - off));
    if (off < rx_len) {
      const size_t len = std::min(chunk, rx_len - off);
      const void* data = co_await ch.recv(from, len);
      if (flush_first) co_await ch.flush();
      take(off, data, len);
      co_await ch.release(from);
    }
  }
}

// One direction only.
inline Task send_bytes(Channel& ch, int to, const char* src, size_t len) {
  return exchange(ch, to, src, len, -1, 0, CopyTo{nullptr});
}
template <class Take>
Task recv_bytes(Channel& ch, int from, size_t len, Take take) {
  return exchange(ch, -1, nullptr, 0, from, len, take);
}

}  // namespace coll
