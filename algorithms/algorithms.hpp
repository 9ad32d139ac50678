// The collective algorithms and their registry. Algorithms are written on
// Channel (send / recv / release) only: no transport header is included.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "datatype.hpp"

namespace coll {

class Channel;

struct AllreduceArgs {
  const void* sendbuf;  // == recvbuf when in place
  void* recvbuf;
  size_t count;      // elements
  size_t elem_size;  // bytes per element
  ReduceFn reduce;
};

struct BcastArgs {
  void* buf;
  size_t bytes;
  int root;
};

// The communicator runs an algorithm only with at least two ranks and at
// least one element: a call on one rank or of no data never reaches it.
// It flushes the channel after the algorithm returns (Channel::finish), so
// an algorithm flushes only where it overwrites the source of a send.
using AllreduceFn = void (*)(Channel&, const AllreduceArgs&);
using BcastFn = void (*)(Channel&, const BcastArgs&);

void ring_allreduce(Channel& ch, const AllreduceArgs& args);
void ring_bcast(Channel& ch, const BcastArgs& args);
void dissemination_barrier(Channel& ch);
void tree_barrier(Channel& ch);

void tree_allreduce(Channel& ch, const AllreduceArgs& args);
void binomial_allreduce(Channel& ch, const AllreduceArgs& args);
void recursive_doubling_allreduce(Channel& ch, const AllreduceArgs& args);
void rabenseifner_allreduce(Channel& ch, const AllreduceArgs& args);
void binomial_bcast(Channel& ch, const BcastArgs& args);
void tree_bcast(Channel& ch, const BcastArgs& args);
void scatter_allgather_bcast(Channel& ch, const BcastArgs& args);
void linear_bcast(Channel& ch, const BcastArgs& args);

struct AllreduceAlgorithm {
  const char* name;
  AllreduceFn run;
};
struct BcastAlgorithm {
  const char* name;
  BcastFn run;
};

// Lookup by name; throws coll::Error(COLL_ERR_INVALID_ARG) listing the
// valid names when the name is unknown.
const AllreduceAlgorithm& find_allreduce(const std::string& name);
const BcastAlgorithm& find_bcast(const std::string& name);

// Lookup by name: nullptr when the name is unknown.
const AllreduceAlgorithm* lookup_allreduce(const std::string& name);
const BcastAlgorithm* lookup_bcast(const std::string& name);
// The valid names, ", "-separated, for messages.
std::string allreduce_names();
std::string bcast_names();

// The automatic choice for a call of `bytes` bytes on nranks ranks, from
// the selection table (selection.hpp): the compiled-in defaults, overridden
// by the file COLL_TUNING_FILE names. The file is read at the first call;
// a bad file throws coll::Error(COLL_ERR_INVALID_ARG) naming the file and
// line (at every call until it is fixed).
const AllreduceAlgorithm& choose_allreduce(int nranks, size_t bytes);
const BcastAlgorithm& choose_bcast(int nranks, size_t bytes);
// Builds the selection table now (reads COLL_TUNING_FILE when it is set), so
// that a bad file fails coll_init rather than the first collective; throws
// as choose_* would.
void load_selection();

}  // namespace coll
