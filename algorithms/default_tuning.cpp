// The compiled-in selection table (format: selection.hpp).
//
// Measured on the development machine (2 cores, shared with other work;
// shm transport, default 128 KiB x 4 slots), np 2..8, 4 B - 4 MiB, float
// sum, bcast from rank 0. In each run every algorithm and the automatic
// choice ran interleaved in one process, in a random order per iteration,
// each after a barrier; a run scores an algorithm by the median over
// iterations of each rank's latency, averaged over the ranks. Runs were
// repeated while the machine's background load changed (9 runs at np 3 and
// 5..8, 24 at np 2 and 4), and the winners changed with it; so an
// algorithm's score at a size is the geometric mean over the runs of its
// time divided by the run's best time, and the table takes the least. It
// switches to a new algorithm only when the current one scores more than
// 5% worse there and at the next size, or more than 15% worse at one size.
// With more ranks than cores (np >= 3 here) every wait costs a context
// switch, which favours algorithms with few messages (recursive doubling,
// binomial trees) over the pipelines (ring, tree); on machines with a core
// per rank, and across nodes, tune with algorithms/tune.sh and
// COLL_TUNING_FILE.
//
// linear (the root writes to every rank) was measured later, at np 4 only,
// in one interleaved run on a quiet machine (after waits stopped spinning
// when ranks outnumber cores): within 1% of the best bcast at every size
// but 512 KiB (1.21), where scatter_allgather is best (binomial was
// 1.03-1.92 below 256 KiB). The bcast rules for np 3-4 come from it.
//
// Rank counts above 8 take the rules of 8; one rank runs no algorithm
// (any name does).
#include "selection.hpp"

namespace coll {

const char* const kDefaultTuning = R"(
# collective  ranks  min_bytes  algorithm
allreduce     *      0          ring
allreduce     2      0          recursive_doubling
allreduce     2      32K        ring
allreduce     2      512K       rabenseifner
allreduce     2      2M         tree
allreduce     3      0          recursive_doubling
allreduce     3      128K       binomial
allreduce     3      1M         rabenseifner
allreduce     4      0          recursive_doubling
allreduce     4      64K        rabenseifner
allreduce     5      0          binomial
allreduce     5      16         recursive_doubling
allreduce     5      32K        binomial
allreduce     5      2M         tree
allreduce     6      0          recursive_doubling
allreduce     6      32K        binomial
allreduce     6      4M         tree
allreduce     7      0          recursive_doubling
allreduce     7      32K        binomial
allreduce     8+     0          recursive_doubling
allreduce     8+     16K        binomial

bcast         *      0          ring
bcast         2      0          ring
bcast         2      512K       scatter_allgather
bcast         3-4    0          linear
bcast         3-4    256K       scatter_allgather
bcast         3-4    1M         linear
bcast         5+     0          binomial

# tree: rank 0 leaves first, and two waves when ranks outnumber cores
# (barrier.cpp); dissemination on COLL_BARRIER_ALGO.
barrier       *      0          tree

allgather     *      0          ring
allgather     3+     0          bruck
allgather     3+     16K        ring
allgatherv    *      0          ring
allgatherv    3+     0          bruck
allgatherv    3+     16K        ring

reduce        *      0          binomial
reduce        3+     256K       reduce_scatter_gather

reduce_scatter_block  *  0      recursive_halving
reduce_scatter_block  *  64K    ring
reduce_scatter        *  0      recursive_halving
reduce_scatter        *  64K    ring

gather        *      0          linear
gather        5+     0          binomial
gather        5+     8K         linear
gatherv       *      0          linear
scatter       *      0          linear
scatter       5+     0          binomial
scatter       5+     8K         linear
scatterv      *      0          linear

alltoall      *      0          linear
alltoall      *      32K        pairwise
alltoall      9+     0          bruck
alltoall      9+     512        linear
alltoallv     *      0          linear
alltoallv     9+     0          pairwise

scan          *      0          recursive_doubling
scan          *      256K       linear
exscan        *      0          recursive_doubling
exscan        *      256K       linear
)";

}  // namespace coll
