#include "aligned_buffer.hpp"

#include <unistd.h>

#include <new>

namespace bench {

AlignedBuffer::AlignedBuffer(size_t bytes) : size_(bytes) {
  const long page = sysconf(_SC_PAGESIZE);
  const size_t alignment = page > 0 ? static_cast<size_t>(page) : 4096;
  // aligned_alloc wants a multiple of the alignment, and at least one byte.
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* pointer = std::aligned_alloc(alignment, rounded ? rounded : alignment);
  if (!pointer) throw std::bad_alloc();
  data_.reset(static_cast<std::byte*>(pointer));
}

AlignedBuffer::AlignedBuffer(size_t bytes, void* (*alloc)(size_t), void (*release)(void*))
    : data_(nullptr, Free{release}), size_(bytes) {
  void* pointer = alloc(bytes ? bytes : 1);
  if (!pointer) throw std::bad_alloc();
  data_.reset(static_cast<std::byte*>(pointer));
}

}  // namespace bench
