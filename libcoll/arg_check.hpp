// COLL_CHECK_ARGS=1: every collective first agrees on its arguments across
// the communicator.
//
// MPI makes a program that passes mismatched arguments to a collective
// erroneous, and what a rank cannot see alone is not checked by default:
// each rank checks its own arguments (the descriptors, registry.cpp), and
// the channel checks that every message has the length its receiver
// expects, so sizes that differ end in COLL_ERR_INVALID_ARG (or a timeout)
// somewhere; but ranks that pass different roots, or datatypes or
// operators of one size, complete with COLL_SUCCESS and different results.
//
// With the knob, an operation's task first runs an allgather of a
// fixed-size signature of this rank's arguments over the communicator's
// channel (Bruck's allgather, as comm split does), compares, and only then
// runs the algorithm. Every rank holds the same signatures, so every rank
// reaches the same verdict: a mismatch fails the call on all of them with
// COLL_ERR_INVALID_ARG, naming the first rank that differs and both values,
// as an AgreedError, which leaves the communicator usable (the ranks are
// still in step). Counts that MPI pairs across ranks rather than requiring
// equal (gatherv: rank i's sendcount = the root's recvcounts[i]; scatterv;
// alltoallv: sendcounts[j] at i = recvcounts[i] at j) travel as hashes; only
// when they disagree does a second exchange find the pair to name.
#pragma once

#include <cstdint>
#include <vector>

#include "task.hpp"

namespace coll {

class Channel;
struct Operation;

// What one rank passed, as it travels: every byte defined.
struct CallSignature {
  uint64_t seq;    // the call's number on this communicator
  uint64_t count;  // elements; for allgatherv, reduce_scatter: hash of recvcounts
  uint64_t total;  // allgatherv, reduce_scatter: the sum of recvcounts (for messages)
  // The counts MPI pairs across ranks: gatherv, scatterv: this rank's own
  // count (mine) and, at the root, a hash of the per-rank counts (pair);
  // alltoallv: hashes of this rank's (from, to, count) sends and receives.
  uint64_t mine;
  uint64_t pair;
  int32_t collective;
  int32_t datatype;  // -1 where none is significant (barrier)
  int32_t op;        // -1 where not a reduction
  int32_t root;      // -1 where not rooted
  // A call this rank refused on its own arguments (the descriptor's check
  // threw): datatype is kRefused and op the refusal's status, nothing else
  // but seq and collective is set (the arguments may be garbage). Every
  // rank then fails the call with it (issue 31: an argument invalid on one
  // rank is an error on every rank); the messages travel in a second
  // exchange, on that path only, so the signature stays one line (56
  // bytes, WindowLayout::kInlineBytes).
  static constexpr int32_t kRefused = -3;
};

// The communicator's scratch for the exchange: sources and targets of
// one-sided writes, so they live as long as the communicator (an
// operation's writes may still be in flight after its task moved on).
struct ArgCheck {
  explicit ArgCheck(int size) : all(static_cast<size_t>(size)) {}
  CallSignature mine{};
  std::vector<CallSignature> all;
};

// co_await agree_on_arguments(ch, op, scratch): op's arguments (checked,
// as make_collective leaves them) agree at every rank, or every rank
// throws AgreedError naming the first mismatch (COLL_ERR_INVALID_ARG) or
// the first rank that refused the call on its own arguments (its status
// and message; op.refused at that rank, see Communicator::refuse). With
// compare false only refusals count: without COLL_CHECK_ARGS the ranks'
// call numbers may differ (a call that moves nothing at one rank is no
// operation there) and arguments of the same size may (a persistent
// init's agreement, Communicator::agree_at_init).
Task agree_on_arguments(Channel& ch, const Operation& op, ArgCheck& scratch,
                        bool compare = true);

}  // namespace coll
