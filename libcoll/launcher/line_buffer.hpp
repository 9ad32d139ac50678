// LineBuffer: turns the bytes a rank writes to a pipe into whole lines, so
// that lines of different ranks never interleave in collrun's output.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace collrun {

class LineBuffer {
 public:
  // A line longer than this is cut (a '\n' is added) rather than held.
  static constexpr size_t kDefaultMaxLine = size_t{1} << 20;

  // `prefix` starts every line written ("" when not tagging output).
  explicit LineBuffer(std::string prefix, size_t max_line = kDefaultMaxLine)
      : prefix_(std::move(prefix)), max_line_(max_line > 0 ? max_line : 1) {}

  // Takes bytes read from the pipe; returns the complete lines among them,
  // each prefixed and ending in '\n', ready for one write.
  std::string feed(std::string_view bytes);

  // At end of stream: the unterminated rest, prefixed; a '\n' is added when
  // tagging so that the next tagged line starts on a line of its own.
  std::string finish();

  size_t pending_bytes() const { return partial_.size(); }

 private:
  std::string prefix_;
  size_t max_line_;
  std::string partial_;  // bytes after the last '\n' seen
};

}  // namespace collrun
