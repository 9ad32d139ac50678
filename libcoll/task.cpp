#include "task.hpp"

#include <new>

namespace coll::detail {
namespace {

// Size classes of 64 bytes up to 4 KiB; larger frames go to operator new.
constexpr size_t kGranule = 64;
constexpr size_t kClasses = 64;

struct FreeFrame {
  FreeFrame* next;
};

// Frames freed by this thread, by size class. A frame may be allocated by
// one thread and freed by another (a progress thread finishing a task): it
// then joins the second thread's list, which is still this process's
// memory. A thread's list is returned at thread exit.
struct FramePool {
  FreeFrame* free[kClasses] = {};
  ~FramePool() {
    for (FreeFrame*& head : free)
      while (head) ::operator delete(std::exchange(head, head->next));
  }
};

thread_local FramePool pool;

size_t size_class(size_t bytes) { return (bytes + kGranule - 1) / kGranule; }

}  // namespace

void* frame_allocate(size_t bytes) {
  const size_t c = size_class(bytes);
  if (c >= kClasses) return ::operator new(bytes);
  if (FreeFrame* f = pool.free[c]) {
    pool.free[c] = f->next;
    return f;
  }
  return ::operator new(c * kGranule);
}

void frame_release(void* frame, size_t bytes) noexcept {
  const size_t c = size_class(bytes);
  if (c >= kClasses) {
    ::operator delete(frame);
    return;
  }
  auto* f = static_cast<FreeFrame*>(frame);
  f->next = pool.free[c];
  pool.free[c] = f;
}

}  // namespace coll::detail
