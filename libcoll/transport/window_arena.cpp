#include "transport/window_arena.hpp"

#include <algorithm>
#include <iterator>

namespace coll {

WindowArena::WindowArena(size_t bytes) : capacity_(bytes), free_bytes_(bytes) {
  if (bytes > 0) free_.emplace(0, bytes);
}

std::optional<size_t> WindowArena::take(size_t bytes) {
  if (bytes == 0) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    const size_t offset = it->first, rest = it->second - bytes;
    free_.erase(it);
    if (rest > 0) free_.emplace(offset + bytes, rest);
    used_.emplace(offset, bytes);
    free_bytes_ -= bytes;
    return offset;
  }
  return std::nullopt;
}

bool WindowArena::give_back(size_t offset, size_t bytes) {
  auto used = used_.find(offset);
  if (used == used_.end() || used->second != bytes) return false;
  used_.erase(used);
  free_bytes_ += bytes;
  auto next = free_.lower_bound(offset);
  size_t begin = offset, end = offset + bytes;
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && next->first == end) {
    end += next->second;
    free_.erase(next);
  }
  free_.emplace(begin, end - begin);
  return true;
}

bool WindowArena::in_use(size_t offset, size_t bytes) const {
  auto used = used_.find(offset);
  return used != used_.end() && used->second == bytes;
}

size_t WindowArena::largest_free() const {
  size_t largest = 0;
  for (const auto& [offset, length] : free_) largest = std::max(largest, length);
  return largest;
}

}  // namespace coll
