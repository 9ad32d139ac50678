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

using AllreduceFn = void (*)(Channel&, const AllreduceArgs&);
using BcastFn = void (*)(Channel&, const BcastArgs&);

void ring_allreduce(Channel& ch, const AllreduceArgs& args);
void ring_bcast(Channel& ch, const BcastArgs& args);
void dissemination_barrier(Channel& ch);

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

// The automatic choice for a call of `bytes` bytes on nranks ranks.
const AllreduceAlgorithm& choose_allreduce(int nranks, size_t bytes);
const BcastAlgorithm& choose_bcast(int nranks, size_t bytes);

}  // namespace coll
