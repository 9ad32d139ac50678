#include "task.hpp"

namespace coll {

FramePool::~FramePool() {
  for (FreeFrame*& head : free_)
    while (head) ::operator delete(std::exchange(head, head->next));
}

namespace detail {

// A frame may be allocated by one thread and freed by another (a progress
// thread finishing a task): it then joins the second thread's pool, which
// is still this process's memory.
FramePool& thread_frame_pool() {
  thread_local FramePool pool;
  return pool;
}

}  // namespace detail
}  // namespace coll
