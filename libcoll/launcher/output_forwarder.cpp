#include "output_forwarder.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace collrun {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// A rank's leftover process could keep writing into a pipe forever; a drain
// forwards at most this much.
constexpr size_t kMaxDrainBytes = size_t{64} << 20;

std::string tag(int rank, const char* stream) {
  return "[1," + std::to_string(rank) + "]<" + stream + ">:";
}

}  // namespace

OutputForwarder::ChildEnds OutputForwarder::add_rank(int rank) {
  ChildEnds ends;
  for (int target : {1, 2}) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::generic_category(),
                              "pipe for the output of rank " + std::to_string(rank));
    coll::UniqueFd read_end(fds[0]);
    coll::UniqueFd write_end(fds[1]);
    // Only collrun's end is non-blocking: the two ends are separate open
    // file descriptions, so the rank's writes stay blocking.
    ::fcntl(read_end.get(), F_SETFL, ::fcntl(read_end.get(), F_GETFL) | O_NONBLOCK);
    std::string prefix = tag_output_ ? tag(rank, target == 1 ? "stdout" : "stderr") : "";
    streams_.push_back(Stream{rank, target, std::move(read_end), LineBuffer(prefix)});
    (target == 1 ? ends.out : ends.err) = std::move(write_end);
  }
  return ends;
}

void OutputForwarder::add_pollfds(std::vector<pollfd>& fds) {
  first_pollfd_ = fds.size();
  polled_streams_.clear();
  for (size_t i = 0; i < streams_.size(); ++i) {
    if (!streams_[i].fd) continue;
    fds.push_back(pollfd{streams_[i].fd.get(), POLLIN, 0});
    polled_streams_.push_back(i);
  }
}

void OutputForwarder::handle(const std::vector<pollfd>& fds) {
  for (size_t k = 0; k < polled_streams_.size(); ++k) {
    const pollfd& p = fds[first_pollfd_ + k];
    Stream& stream = streams_[polled_streams_[k]];
    // One read per wake-up keeps a chatty rank from starving the others.
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) && stream.fd) read_some(stream);
  }
}

void OutputForwarder::drain_rank(int rank) {
  for (Stream& stream : streams_) {
    if (stream.rank != rank || !stream.fd) continue;
    size_t before = 0;
    while (stream.fd && before < kMaxDrainBytes && read_some(stream)) before += kReadChunk;
    close_stream(stream);
  }
}

void OutputForwarder::drain_all() {
  for (Stream& stream : streams_)
    if (stream.fd) drain_rank(stream.rank);
}

bool OutputForwarder::read_some(Stream& stream) {
  char chunk[kReadChunk];
  ssize_t n;
  do {
    n = ::read(stream.fd.get(), chunk, sizeof chunk);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    write_out(stream.target_fd,
              stream.buffer.feed(std::string_view(chunk, static_cast<size_t>(n))));
    return true;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  close_stream(stream);  // end of stream, or an error that ends it
  return false;
}

void OutputForwarder::close_stream(Stream& stream) {
  if (!stream.fd) return;
  write_out(stream.target_fd, stream.buffer.finish());
  stream.fd.reset();
}

void OutputForwarder::write_out(int target_fd, std::string_view bytes) {
  if (target_broken_[target_fd]) return;
  while (!bytes.empty()) {
    ssize_t n = ::write(target_fd, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Our stdout was handed to us non-blocking: wait until it drains.
      pollfd p{target_fd, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    // EPIPE (the reader went away) or another error: output is lost from
    // now on, but the job goes on (SIGPIPE is ignored in collrun).
    target_broken_[target_fd] = true;
    return;
  }
}

}  // namespace collrun
