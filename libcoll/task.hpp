// Task: a collective operation as resumable state (a C++20 coroutine).
//
// An algorithm is written as straight-line code against the Channel, and
// every point where it may have to wait is a `co_await`. When the thing it
// waits for is there already (the common case on a quiet machine), the
// await does not suspend at all; otherwise the coroutine suspends, records
// what it waits for in a Blocker, and control returns to the progress
// engine, which polls the blocker and resumes the coroutine when it is
// satisfied. So one implementation of each algorithm serves blocking calls
// (start + wait), non-blocking calls (start now, advance in later calls)
// and persistent ones (a fresh task at every start).
//
// Why coroutines and not explicit state machines (UCC's `goto` phases):
// measured here, a suspension and a resumption cost a few nanoseconds, the
// frames come from a per-thread pool (no malloc on the hot path), and the
// algorithms keep the shape in which their deadlock arguments are written.
//
// Tasks nest: an algorithm may `co_await` a helper that is itself a Task
// (the recursive-doubling frame, for one). The outermost task of a chain is
// its root; the root promise remembers which coroutine of the chain is
// suspended (the leaf) and on what (the blocker), so the engine resumes the
// innermost one directly.
//
// A task starts suspended; step() runs it until it blocks or finishes. An
// exception thrown inside (coll::Error from the channel) ends the task; the
// root's error() hands it to the engine.
#pragma once

#include <coroutine>
#include <cstddef>
#include <exception>
#include <new>
#include <utility>

namespace coll {

// What a suspended task waits for. poll() is called by the engine (after it
// has driven the transport) and returns true once the wait is over; by then
// it has also done whatever the wait was for (taken the credit, read the
// flag). peer is a communicator rank, or -1 for a wait on this rank alone.
class Channel;

struct Blocker {
  bool (*poll)(Blocker*) = nullptr;
  int peer = -1;
  const char* what = "";
  // Whether only a write of `peer` can end the wait (a message, a credit, a
  // buffer): then a peer that has left (finalized) will never end it. False
  // for waits on this rank's own writes, which a peer that left after its
  // part of the operation does not hold up.
  bool from_peer = true;
  // The channel `peer` is a rank of, when it is not the operation's own
  // communicator's (a hierarchical algorithm waits on its sub-channels):
  // the engine checks that peer there. nullptr: the communicator's.
  const Channel* channel = nullptr;
};

class Communicator;

// Free lists of coroutine frames, by size class (64-byte steps up to
// 4 KiB; larger frames go to operator new). The frames of an operation's
// own coroutines (the algorithm, whose first parameter is the channel, and
// the communicator's wrapper) come from that communicator's pool, which
// only the thread advancing the communicator touches; every other frame
// (nested helpers, lambdas) from the thread's pool. A thread_local in a
// shared library costs a __tls_get_addr call (about 15 ns here) on every
// access, and a small collective allocates and frees two frames.
class FramePool {
 public:
  static constexpr size_t kGranule = 64;
  static constexpr size_t kClasses = 64;
  FramePool() = default;
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;
  ~FramePool();
  void* allocate(size_t bytes) {
    const size_t c = (bytes + kGranule - 1) / kGranule;
    if (c >= kClasses) return ::operator new(bytes);
    if (FreeFrame* f = free_[c]) {
      free_[c] = f->next;
      return f;
    }
    return ::operator new(c * kGranule);
  }
  void release(void* block, size_t bytes) noexcept {
    const size_t c = (bytes + kGranule - 1) / kGranule;
    if (c >= kClasses) {
      ::operator delete(block);
      return;
    }
    auto* f = static_cast<FreeFrame*>(block);
    f->next = free_[c];
    free_[c] = f;
  }

 private:
  struct FreeFrame {
    FreeFrame* next;
  };
  FreeFrame* free_[kClasses] = {};
};

FramePool* frame_pool_of(Channel& ch);
FramePool* frame_pool_of(Communicator& comm);

namespace detail {

// The pool of frames that have no communicator of their own.
FramePool& thread_frame_pool();

// A frame is preceded by the pool it came from (nullptr: the thread's); 16
// bytes keep the frame aligned for anything a coroutine holds.
inline constexpr size_t kFrameHeader = 16;
inline void* frame_allocate(size_t bytes, FramePool* pool) {
  FramePool& p = pool ? *pool : thread_frame_pool();
  char* block = static_cast<char*>(p.allocate(bytes + kFrameHeader));
  *reinterpret_cast<FramePool**>(block) = pool;
  return block + kFrameHeader;
}
inline void frame_release(void* frame, size_t bytes) noexcept {
  char* block = static_cast<char*>(frame) - kFrameHeader;
  FramePool* pool = *reinterpret_cast<FramePool**>(block);
  (pool ? *pool : thread_frame_pool()).release(block, bytes + kFrameHeader);
}

struct PromiseBase {
  PromiseBase* root = this;
  // Root only: the suspended coroutine of the chain and what it waits for.
  std::coroutine_handle<> leaf;
  Blocker* blocked = nullptr;
  // A nested task: the coroutine that awaits it.
  std::coroutine_handle<> continuation;
  std::exception_ptr error;

  static void* operator new(size_t bytes) { return frame_allocate(bytes, nullptr); }
  // Coroutines whose first parameter is a channel or a communicator (the
  // compiler passes the coroutine's parameters to operator new when such
  // an overload matches them).
  template <class... Rest>
  static void* operator new(size_t bytes, Channel& ch, Rest&&...) {
    return frame_allocate(bytes, frame_pool_of(ch));
  }
  template <class... Rest>
  static void* operator new(size_t bytes, Communicator& comm, Rest&&...) {
    return frame_allocate(bytes, frame_pool_of(comm));
  }
  static void operator delete(void* frame, size_t bytes) noexcept { frame_release(frame, bytes); }
};

}  // namespace detail

class [[nodiscard]] Task {
 public:
  struct promise_type : detail::PromiseBase {
    Task get_return_object() {
      return Task(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() noexcept { return false; }
      // A nested task hands control back to its parent (symmetric
      // transfer: no stack growth); a root returns to the engine.
      std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept {
        promise_type& p = h.promise();
        if (!p.continuation) return std::noop_coroutine();
        p.root->leaf = p.continuation;
        return p.continuation;
      }
      void await_resume() noexcept {}
    };
    FinalAwaiter final_suspend() noexcept { return {}; }
    void return_void() {}
    void unhandled_exception() { error = std::current_exception(); }
  };
  using Handle = std::coroutine_handle<promise_type>;

  Task() = default;
  explicit Task(Handle h) : h_(h) {}
  Task(Task&& other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
  Task& operator=(Task&& other) noexcept {
    std::swap(h_, other.h_);
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (h_) h_.destroy();
  }

  explicit operator bool() const { return bool(h_); }
  bool done() const { return !h_ || h_.done(); }
  // Root only: runs the chain until it blocks or the root finishes.
  // Returns done().
  bool step() {
    promise_type& p = h_.promise();
    if (!p.leaf) p.leaf = h_;
    p.blocked = nullptr;
    p.leaf.resume();
    return h_.done();
  }
  // Root only: what the suspended chain waits for (nullptr when done).
  Blocker* blocked() const { return h_ && !h_.done() ? h_.promise().blocked : nullptr; }
  std::exception_ptr error() const { return h_ ? h_.promise().error : nullptr; }
  // Whether error() is set, without copying an exception_ptr (an atomic
  // reference count each way: measurable on a small collective's path).
  bool failed() const { return h_ && bool(h_.promise().error); }

  // Awaited as a nested task: run it now, inside the parent's chain.
  bool await_ready() const noexcept { return false; }
  template <class Promise>
  std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> parent) noexcept {
    promise_type& child = h_.promise();
    child.continuation = parent;
    child.root = parent.promise().root;
    child.root->leaf = h_;
    return h_;
  }
  void await_resume() const {
    if (h_.promise().error) std::rethrow_exception(h_.promise().error);
  }

 private:
  Handle h_;
};

// The awaiter of every channel wait: Derived::try_now() makes one
// non-blocking attempt (and on success does the work the wait was for);
// await_resume() hands out the result. A wait that succeeds at once never
// suspends.
template <class Derived>
struct Wait : Blocker {
  Wait(int waited_peer, const char* description, const Channel* on = nullptr) {
    peer = waited_peer;
    what = description;
    channel = on;
    poll = [](Blocker* b) { return static_cast<Derived*>(b)->try_now(); };
  }
  bool await_ready() { return static_cast<Derived*>(this)->try_now(); }
  template <class Promise>
  void await_suspend(std::coroutine_handle<Promise> h) noexcept {
    detail::PromiseBase* root = h.promise().root;
    root->leaf = h;
    root->blocked = this;
  }
};

}  // namespace coll
