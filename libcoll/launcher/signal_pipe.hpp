// SignalPipe: the self-pipe trick. The handler only writes the signal
// number into a pipe; collrun's poll() loop reads it and acts, so signals
// never interrupt collrun in the middle of anything.
#pragma once

#include <initializer_list>
#include <vector>

#include "bootstrap/unique_fd.hpp"

namespace collrun {

class SignalPipe {
 public:
  // Installs handlers for `signals`; one SignalPipe per process. Throws
  // std::system_error on failure.
  explicit SignalPipe(std::initializer_list<int> signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  int read_fd() const { return read_end_.get(); }
  // The signals that arrived since the last call, in order.
  std::vector<int> take();

 private:
  coll::UniqueFd read_end_;
  coll::UniqueFd write_end_;
  std::vector<int> signals_;
};

}  // namespace collrun
