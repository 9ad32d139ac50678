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

  std::byte* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* pointer) const { std::free(pointer); }
  };
  std::unique_ptr<std::byte[], Free> data_;
  size_t size_;
};

}  // namespace bench
