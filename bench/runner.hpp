// One library's way to run the benchmarked collectives. The timing loop,
// validation and report are written once against this interface, so that
// libcoll and Open MPI are measured by the same code.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include "collective.hpp"

namespace bench {

// A library call failed: the run cannot go on.
struct LibraryError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Runner {
 public:
  virtual ~Runner() = default;

  virtual const char* library() const = 0;  // "libcoll", "mpi"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual void barrier() = 0;
  // Called once per message size, before any run() of it, outside the
  // timer: a library that needs the message in its own form (MPI's int
  // counts) converts it here rather than in every timed call.
  virtual void prepare(Collective, const Message&) {}
  virtual void run(Collective collective, const Workload& workload, const Message& message) = 0;
  // The algorithm the last collective of this kind ran; "" if unknown.
  virtual std::string algorithm(Collective collective) const = 0;
  // values[i] = op over all ranks of values[i], on every rank.
  virtual void allreduce_doubles(double* values, size_t count, coll_op_t op) = 0;
};

}  // namespace bench
