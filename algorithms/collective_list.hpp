// The collectives libcoll implements, listed once (issue 34): X(Id, name)
// for each, in the order of Coll (algorithms.hpp), which is the order of
// the registry's descriptors (registry.cpp), of the cost model's table
// (cost_model.cpp) and of every per-collective array indexed by Coll. The
// enum, kCollCount and kCollNames come from this list; the rows kept by
// hand elsewhere (the descriptors, the model's table, the benchmark's
// Collective, the shim's functions) are checked against it by
// tests/unit/collective_rows_test.cpp and, where a constant expression
// can, at compile time.
//
// Adding a collective: a line here (at the end: Coll's values are in
// the tuning file's and the bench's outputs only by name, but keep
// them stable), its descriptor in registry.cpp and its model row in
// cost_model.cpp in this order, its algorithm files, its default rules in
// default_tuning.cpp, its entry points in the API and the shim, its man
// page; the rows test names what is missing.
#pragma once

#define COLL_COLLECTIVES(X)                      \
  X(Allreduce, allreduce)                        \
  X(Bcast, bcast)                                \
  X(Barrier, barrier)                            \
  X(Allgather, allgather)                        \
  X(Reduce, reduce)                              \
  X(Allgatherv, allgatherv)                      \
  X(ReduceScatterBlock, reduce_scatter_block)    \
  X(ReduceScatter, reduce_scatter)               \
  X(Gather, gather)                              \
  X(Gatherv, gatherv)                            \
  X(Scatter, scatter)                            \
  X(Scatterv, scatterv)                          \
  X(Alltoall, alltoall)                          \
  X(Alltoallv, alltoallv)                        \
  X(Scan, scan)                                  \
  X(Exscan, exscan)
