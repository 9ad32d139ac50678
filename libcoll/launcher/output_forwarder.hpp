// OutputForwarder: reads each rank's stdout and stderr from pipes and
// writes them, whole lines at a time, to collrun's own stdout and stderr.
#pragma once

#include <poll.h>

#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/unique_fd.hpp"
#include "line_buffer.hpp"

namespace collrun {

class OutputForwarder {
 public:
  explicit OutputForwarder(bool tag_output) : tag_output_(tag_output) {}

  // The write ends a rank's stdout and stderr go to.
  struct ChildEnds {
    coll::UniqueFd out;
    coll::UniqueFd err;
  };
  // Throws std::system_error when pipes cannot be made.
  ChildEnds add_rank(int rank);

  // poll() integration: append this forwarder's descriptors, then hand the
  // same vector back after poll().
  void add_pollfds(std::vector<pollfd>& fds);
  void handle(const std::vector<pollfd>& fds);

  // After a rank exited everything it wrote is in its pipes: forward it and
  // close them. (A process the rank left behind may hold the pipes open;
  // its later output is not waited for.)
  void drain_rank(int rank);
  void drain_all();

 private:
  struct Stream {
    int rank;
    int target_fd;  // 1 or 2
    coll::UniqueFd fd;
    LineBuffer buffer;
  };

  // False at end of stream (or error); the stream is then closed.
  bool read_some(Stream& stream);
  void close_stream(Stream& stream);
  void write_out(int target_fd, std::string_view bytes);

  bool tag_output_;
  std::vector<Stream> streams_;
  size_t first_pollfd_ = 0;
  std::vector<size_t> polled_streams_;
  bool target_broken_[3] = {false, false, false};
};

}  // namespace collrun
