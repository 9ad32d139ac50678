// The windows of a transport whose peers never map its memory (tcp, where
// the target applies every write itself; rdma, where the HCA does): private
// anonymous mappings, page aligned and zeroed by the kernel, one per
// window, unmapped on free_window - so memory handed out again is fresh
// zero pages - and at teardown for those still allocated.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <map>

#include "error.hpp"

namespace coll {

class AnonymousWindows {
 public:
  explicit AnonymousWindows(const char* transport_name) : transport_name_(transport_name) {}
  AnonymousWindows(const AnonymousWindows&) = delete;
  AnonymousWindows& operator=(const AnonymousWindows&) = delete;
  ~AnonymousWindows() {
    for (const auto& [addr, length] : windows_) munmap(addr, length);
  }

  static size_t page_round(size_t bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return bytes > SIZE_MAX - page ? 0 : (bytes + page - 1) / page * page;
  }

  // Throws Error(COLL_ERR_NO_RESOURCES) when mmap fails,
  // COLL_ERR_INVALID_ARG for 0 bytes.
  void* alloc(size_t bytes) {
    if (bytes == 0) fail(COLL_ERR_INVALID_ARG, "%s transport: a window of 0 bytes", transport_name_);
    const size_t length = page_round(bytes);
    void* p = length == 0 ? MAP_FAILED
                          : mmap(nullptr, length, PROT_READ | PROT_WRITE,
                                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
      fail_errno(COLL_ERR_NO_RESOURCES, length == 0 ? ENOMEM : errno,
                 "%s transport: mmap of a window of %zu bytes (%zu with page rounding, %zu "
                 "bytes in %zu windows allocated already)",
                 transport_name_, bytes, length, bytes_, windows_.size());
    windows_.emplace(p, length);
    bytes_ += length;
    return p;
  }

  // Whether alloc(bytes) returned addr and it is not freed yet.
  bool owns(void* addr, size_t bytes) const {
    auto it = windows_.find(addr);
    return it != windows_.end() && bytes > 0 && it->second == page_round(bytes);
  }

  // Unmaps a window that owns(addr, bytes).
  void release(void* addr) {
    auto it = windows_.find(addr);
    if (it == windows_.end()) return;
    munmap(it->first, it->second);
    bytes_ -= it->second;
    windows_.erase(it);
  }

 private:
  const char* transport_name_;
  std::map<void*, size_t> windows_;  // address -> mapped length
  size_t bytes_ = 0;
};

}  // namespace coll
