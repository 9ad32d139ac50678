// A page-aligned byte buffer, as OSU allocates its message buffers: the
// alignment is the same for every size and every library, and registration
// of the buffer covers whole pages.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace bench {

class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes);  // throws std::bad_alloc
  // From a library's allocator instead (MPI_Alloc_mem, coll_mem_alloc:
  // Session::alloc_mem); release gives it back.
  AlignedBuffer(size_t bytes, void* (*alloc)(size_t), void (*release)(void*));

  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void (*release)(void*);  // nullptr (the value-initialized deleter): std::free
    void operator()(std::byte* pointer) const { release ? release(pointer) : std::free(pointer); }
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t size_;
};

}  // namespace bench
