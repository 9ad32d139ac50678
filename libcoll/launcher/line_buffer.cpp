#include "line_buffer.hpp"

namespace collrun {

std::string LineBuffer::feed(std::string_view bytes) {
  std::string ready;
  while (!bytes.empty()) {
    size_t newline = bytes.find('\n');
    size_t room = max_line_ > partial_.size() ? max_line_ - partial_.size() : 0;
    if (newline == std::string_view::npos && bytes.size() <= room) {
      partial_.append(bytes);
      break;
    }
    if (newline != std::string_view::npos && newline <= room) {
      ready += prefix_;
      ready += partial_;
      ready.append(bytes.substr(0, newline + 1));
      partial_.clear();
      bytes.remove_prefix(newline + 1);
      continue;
    }
    // Too long to hold: cut it here, as whole lines of its own.
    ready += prefix_;
    ready += partial_;
    ready.append(bytes.substr(0, room));
    ready += '\n';
    partial_.clear();
    bytes.remove_prefix(room);
  }
  return ready;
}

std::string LineBuffer::finish() {
  if (partial_.empty()) return std::string();
  std::string rest = prefix_ + partial_;
  if (!prefix_.empty()) rest += '\n';
  partial_.clear();
  return rest;
}

}  // namespace collrun
