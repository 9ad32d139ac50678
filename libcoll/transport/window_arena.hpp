// WindowArena: the bookkeeping of the shm transport's window arena (a
// range of the rank's shared segment that alloc_window carves windows
// out of). Offsets only: the owner of the memory reserves and releases the
// pages (shm_transport.cpp). First fit over a free list in address order;
// a range given back is merged with its free neighbours, so an arena whose
// windows are all freed is one free range again.
#pragma once

#include <cstddef>
#include <map>
#include <optional>

namespace coll {

class WindowArena {
 public:
  // Manages [0, bytes).
  explicit WindowArena(size_t bytes);

  // The offset of the first free range that holds `bytes`, now in use;
  // nullopt when none does (or bytes is 0).
  std::optional<size_t> take(size_t bytes);
  // Gives back the range that take(bytes) returned at `offset`: false, and
  // nothing changes, when no range of that offset and size is in use.
  bool give_back(size_t offset, size_t bytes);
  // Whether take(bytes) returned `offset` and it was not given back since.
  bool in_use(size_t offset, size_t bytes) const;

  size_t capacity() const { return capacity_; }
  size_t free_bytes() const { return free_bytes_; }
  size_t free_ranges() const { return free_.size(); }
  size_t largest_free() const;
  size_t ranges_in_use() const { return used_.size(); }

 private:
  size_t capacity_;
  size_t free_bytes_;
  std::map<size_t, size_t> free_;  // offset -> length, never adjacent
  std::map<size_t, size_t> used_;  // offset -> length
};

}  // namespace coll
