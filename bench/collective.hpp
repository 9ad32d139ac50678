// What the benchmark measures: a collective, the workload it carries
// (datatype, operator, root) and the buffers of one message size.
//
// Every property of a collective that the benchmark needs (its names, how
// its data moves, which options apply, its bandwidth convention) is one row
// of a table in collective.cpp, so that adding a collective is adding a row
// (and its call in each runner), not a case in every function.
#pragma once

#include <coll/coll.h>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

// In the order of include/coll/coll.h, which is also the order of -b all.
// barrier is timed as osu_barrier times it: no message, no size sweep.
enum class Collective {
  allreduce,
  bcast,
  barrier,
  reduce,
  allgather,
  allgatherv,
  reduce_scatter_block,
  reduce_scatter,
  gather,
  gatherv,
  scatter,
  scatterv,
  alltoall,
  alltoallv,
  scan,
  exscan,
};

// How the data of a collective moves; the validation values and the
// buffer layout follow from it.
enum class Movement {
  none,       // barrier
  reduction,  // inputs combined with the operator
  broadcast,  // the root's vector to every rank
  gather,     // every rank's block to the receivers, block j from rank j
  scatter,    // block j of the root's send buffer to rank j
  exchange,   // alltoall: block j of rank i's send buffer to block i of rank j's
};

// Which ranks hold a result (and so have their output poisoned and checked).
enum class Receivers {
  all,
  root,
  all_but_first,  // exscan: rank 0's output is left as it was
};

// Reductions: whose inputs rank r's result combines.
enum class Folded {
  all,         // allreduce, reduce, reduce_scatter(_block)
  up_to_self,  // scan: ranks 0..r
  before_self  // exscan: ranks 0..r-1
};

// Bus bandwidth = algorithm bandwidth x this factor, as nccl-tests defines it
// (doc/PERFORMANCE.md): the fraction of the links' capacity the collective
// uses, comparable across rank counts and to the link speed.
enum class BusFactor {
  none,               // barrier: no message (0)
  one,                // bcast, reduce, scan, exscan: the vector crosses each link once
  all_but_own,        // (n-1)/n: allgather, reduce_scatter, alltoall, gather, scatter
  twice_all_but_own,  // 2(n-1)/n: allreduce (a reduce-scatter, then an allgather)
};

// How the size column maps onto the buffers (make_message).
enum class Layout {
  none,    // barrier
  vector,  // one vector of the size at every rank
  // The size is one rank's block (OSU's convention for allgather, gather,
  // scatter, alltoall and their v-variants): a buffer of ranks blocks holds
  // ranks x size, and the algorithm bandwidth counts all of it, as
  // nccl-tests does.
  blocks,
  // The size is the whole vector, cut into one block per rank
  // (osu_reduce_scatter): count / ranks each, the first count % ranks ranks
  // one element more.
  split,
  // As split, with equal blocks of count / ranks (reduce_scatter_block);
  // the last count % ranks elements are not part of the call.
  split_equal,
};

struct CollectiveTraits {
  Collective collective;
  const char* name;   // "allreduce": command line, CSV/JSON, coll_comm_last_algorithm()
  const char* title;  // "Allreduce": the table title, as OSU's; the MPI function is MPI_<title>
  Movement movement;
  Layout layout;
  Receivers receivers;
  Folded folded;  // reductions only
  bool rooted;    // takes -r
  BusFactor bus_factor;
};

const CollectiveTraits& traits(Collective collective);
// Every collective, in enum order.
std::span<const CollectiveTraits> all_collectives();

const char* collective_name(Collective collective);
const char* collective_title(Collective collective);
std::optional<Collective> parse_collective(std::string_view name);
// "allreduce, bcast, ...": for usage and error text.
std::string all_collective_names();

double bus_bandwidth_factor(Collective collective, int ranks);
// The bytes the algorithm bandwidth divides by the latency, for a row of
// `bytes` (the size column) on `ranks` ranks: bytes, or ranks x bytes where
// the size is one rank's block.
double algorithm_bytes(Collective collective, size_t bytes, int ranks);

// False for barrier: no message, so no size sweep, bandwidth or validation.
bool has_message(Collective collective);
// -o and -r apply.
bool takes_op(Collective collective);
bool takes_root(Collective collective);
// The largest buffer the collective needs for a row of `bytes`, on `ranks`.
size_t buffer_bytes(Collective collective, size_t bytes, int ranks);

// Fixed for a whole run of the benchmark.
struct Workload {
  coll_datatype_t datatype = COLL_FLOAT;
  coll_op_t op = COLL_SUM;  // the reductions only
  int root = 0;             // the rooted collectives only
};

// One message size: the buffers of one rank and how the collective lays
// the blocks of the ranks out in them (make_message).
//
//   allreduce, reduce, scan, exscan  send: count elements; recv: count
//   bcast                            send: count, in place (recv unused), as osu_bcast
//   allgather(v), gather(v)          send: count; recv: block j (counts[j] at
//                                    displs[j]) from rank j
//   scatter(v)                       send: block j for rank j; recv: count
//   alltoall(v)                      send: block j for rank j; recv: block j
//                                    from rank j
//   reduce_scatter(_block)           send: count (the whole vector); recv:
//                                    counts[rank], block rank of the result
//                                    (at displs[rank] in the vector)
// Barrier carries no message (count 0).
struct Message {
  std::byte* send = nullptr;
  std::byte* recv = nullptr;
  size_t count = 0;  // elements of Workload::datatype: the size column
  // Per rank, in elements; empty for the collectives without blocks.
  std::vector<size_t> counts;
  std::vector<size_t> displs;
};

// The message of `count` elements for `collective` on `ranks` ranks. The
// v-variants get equal counts, as OSU's osu_allgatherv, osu_gatherv,
// osu_scatterv and osu_alltoallv; reduce_scatter gets count / ranks each,
// the first count % ranks ranks one more (osu_reduce_scatter);
// reduce_scatter_block count / ranks each (the rest of the vector is not
// part of the call).
Message make_message(Collective collective, std::byte* send, std::byte* recv, size_t count,
                     int ranks);

}  // namespace bench
