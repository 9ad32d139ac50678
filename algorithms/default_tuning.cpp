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
// 1.03-1.92 below 256 KiB). The bcast rules for np 3-4 came from it.
//
// Then re-measured against Open MPI tuned in the same job under
// MPI_Barrier (bench/knob_ab.sh: OSU average, rotating root; the slots
// grown to 512 KiB since np 3-4 is oversubscribed here; medians of 8-10
// alternating runs), where linear's root writing every copy in turn lost:
// at np 4 quiet, libcoll / Open MPI 16-128 KiB linear 1.14-1.71, ring
// 0.67-0.82; 1-4 MiB linear 1.15-1.26, ring 0.91-1.00 (256 KiB-512 KiB
// scatter_allgather 0.72-0.96 stays best); np 3 quiet 32-128 KiB linear
// 0.68-0.90, ring 0.49-0.58, 1-4 MiB linear 1.07-1.23, ring 1.04-1.10.
// Beside a busy process at np 4 ring won 16-128 KiB too (0.81-0.86 against
// 0.97-1.40); at 1-2 MiB linear did better there (0.35-0.48 against
// 0.53-0.55), but both beat Open MPI, and quiet only ring did. Below
// 64 KiB the way users measure decided otherwise: bench/compare.sh at np 4
// (against the best of Open MPI tuned and coll/han, OSU average /
// synchronized start, 3 alternating runs each) gave linear 0.65-0.70 /
// 0.62-0.66 at 16 KiB and 0.71-0.82 / 0.69-0.72 at 32 KiB, ring
// 0.82-0.88 / 0.86-0.92 and 0.78-0.92 / 0.87-0.94 (over tcp too ring lost
// there: 1.25-1.35); at 64 KiB they tied (ring 0.85-0.88 / 0.89-0.93,
// linear 0.89-1.04 / 0.74-0.83), at 128 KiB ring won (0.77-0.81 / 0.86-0.94
// against 1.16-1.26 / 1.04-1.13). So ring from 64 KiB.
//
// The collectives of issue 12 (reduce, allgather(v), reduce_scatter(_block),
// gather(v), scatter(v), alltoall(v), scan, exscan) were measured more
// roughly: np 2-6 and 8, 8 B - 4 MiB per rank's block (float sum), each
// algorithm forced in its own job, three runs at np 2, 4 and 8 and two at
// np 3, 5 and 6, on the loaded 2-core machine; the score is the median
// over the runs of the mean over ranks of each rank's median latency.
// Measured this way (more ranks than cores) the algorithms with the fewest
// waits win almost everywhere: the linear gather, scatter, alltoall(v) and
// chain scan (whose early ranks leave early, which the mean over ranks
// rewards), the binomial reduce (reduce_scatter_gather lost by 1.1-9x at
// every size), Bruck's allgather only at np 4-7 below 16 KiB (at np 8 the
// ring won), recursive halving but at np 2-3. exscan and the v-variants
// take the rules of their uniform siblings (by the mean block). On
// machines with a core per rank, and across nodes, the log-step
// algorithms (bruck, recursive_doubling, binomial gather/scatter,
// reduce_scatter_gather for large reduces) are expected to do better than
// here: tune with COLL_TUNING_FILE and the COLL_<NAME>_ALGO knobs.
//
// The linear (one-step) allgather(v), reduce and reduce_scatter(_block)
// (issue 32 item 2) were measured the way MPI users measure:
// bench/shim-compare.sh at np 4 (coll_bench_mpi's MPI calls served
// through the PMPI shim, OSU's loop, against the better of Open MPI tuned
// and coll/han, 5 alternating repeats, the machine shared with another
// developer's builds and tests: spreads of 0.2-10x), the shim as it was
// and the shim with COLL_<NAME>_ALGO=linear alternating in one session.
// The median ratio fell at 47 of 55 points and the median latency at 48
// (reduce 4 B - 4 KiB 19-27 us against 22-68; allgatherv 64 B 55 against
// 142); it rose for allgather(v) at 2-4 KiB blocks (134-171 us against
// 83-103, though both move the same bytes; not looked into), so linear
// only below 2 KiB a block there (bench/results/shim-2026-12-06-linear-ab/). Only np 4 was measured: the
// other rank counts keep their rules.
// At np 2 (2026-12-07, quiet, the same script, --np 2 --repeats 5,
// 4 B - 64 KiB, COLL_<NAME>_ALGO=linear for the four against the ring and
// recursive halving's ring in one alternation) linear's median latency was
// lower or level at 52 of 60 points (allgather 16 KiB 3.72 us against 4.42,
// reduce_scatter_block 2-4 KiB 0.84-1.16 against 1.02-1.41), its median
// ratio to the best peer lower at 49 of 60, and reduce_scatter's
// small sizes came to 1.02-1.11 from 1.14-1.34
// (a second alternation, 7 repeats, the ring forced against linear: lower
// at 53 of 60, geometric mean 0.80 against 0.89;
// bench/results/shim-2026-12-07-opal-yield/np2-linear.md): linear below
// 64 KiB at np 2.
//
// The direct (one-step) scan and exscan (issue 32) against the chain, at
// np 3 and 4 only: build/bench/coll_bench -b scan,exscan -m 4:8192 (float
// sum, 1000 iterations) under collrun with COLL_SCAN_ALGO and
// COLL_EXSCAN_ALGO both linear or both direct, alternating, 33 runs a
// side at np 3 and 21 at np 4, the 2-core machine shared with another
// developer's builds. Every run came out in one of two modes that held
// for all its sizes, whatever the algorithm: about 0.2-1 us (the ranks'
// waits spinning on the two cores) or about 4-9 us (context switches);
// at np 4 almost always the second. At np 4 direct won at every size, in
// that mode median 4.5-7.3 us against 6.6-9.9 (scan) and 4.2-6.2 against
// 7.5-9.1 (exscan), its pooled median 0.50-0.88 of the chain's (scan)
// and 0.47-0.92 (exscan). At np 3 the slow mode (7-9 us) left the two
// level or direct ahead (by up to 20%); in the fast one direct's scan
// was level to 128 B (0.31-0.40 us against 0.34-0.39), 15-17% behind at
// 256-512 B and 1.3-1.8x behind from 1 KiB, its exscan ahead to 4 KiB
// (0.33-0.57 against 0.41-0.67) and behind at 8 KiB: so direct below
// 8 KiB at np 4, below 256 B (scan) and 1 KiB (exscan) at np 3, the
// chain from there (and at every other rank count: unmeasured); the runs are in
// bench/results/scan-direct-2026-12-06/. Through the PMPI shim
// (bench/shim-compare.sh --np 4 --repeats 3 -b scan,exscan, the shim with
// these rules against the shim with the chain forced and Open MPI tuned,
// on the same loaded machine: spreads of 0.01-570x) direct's median
// latency was lower at 21 of 22 points (scan 4 B - 4 KiB 22-41 us against
// 34-164, exscan 18-66 against 45-110); exscan below 512 B stays 1.5-5x
// behind tuned's 9-22 us (bench/results/shim-2026-12-06-scan-ab/).
//
// The barrier decides where the next collective's ranks start, which
// OSU's loop (a barrier, then the timed call) measures. Through the shim
// (bench/shim-compare.sh --np 3 --repeats 5 -b all -c, 4 B - 4 KiB,
// COLL_BARRIER_ALGO=dissemination against the tree in one alternation,
// against the better of Open MPI tuned and han; the machine shared with
// other developers' builds and tests), at np 3 the tree's root-first
// release made the root of reduce, gather and gatherv wait for a rank not
// yet scheduled: 8-26 us a call against Open MPI's 0.2-0.5, ratios up to
// 160x; with dissemination those were 0.3-2.6 us. Over all 16
// collectives the geometric mean of the ratio fell from 0.58 to 0.42 and
// the points above 2x from 31 to 21, though alltoall, allreduce and exscan
// rose (1.17 -> 1.60, 1.18 -> 1.34, 0.09 -> 0.96 in geometric mean) and the
// points above 1x went from 67 to 73 of 166. At np 4 dissemination made
// bcast and scatter 10-45x slower (the tree: 0.2-0.5x the peers) and at
// np 2 bcast and scatter 1.4-1.5x the peers (the tree: 0.5-0.7x), while
// there the tree's own barrier is 3x tuned's (two message latencies
// against one): both kept the tree.
//
// np 2 again after the shim's waits stopped yielding twice and the small
// calls at np 2 got synchronous forms and one-step schedules (quiet,
// bench/shim-compare.sh --np 2 -b all -c, 4 B - 64 KiB,
// COLL_BARRIER_ALGO against the default in one alternation, twice): the
// barrier's own ratio to the best peer 1.51-1.54 with the tree,
// 0.85-0.91 with dissemination; allgather(v), allreduce, alltoall(v),
// gather(v), reduce and reduce_scatter(_block) 0.02-0.05 lower in
// geometric mean with dissemination, bcast, scan, exscan and scatter(v),
// whose root the tree lets leave first, 0.15-0.25 higher. The points above
// 1 went 68 -> 47 of 226 in one run and 61 -> 75 in the other; the
// geometric mean over all was lower with the tree in both (0.777 / 0.793,
// 0.782 / 0.836; bench/results/shim-2026-12-07-opal-yield/np2-barrier.md):
// np 2 keeps the tree.
//
// The direct (one-step) allreduce at np 3 (issue 32), through the shim
// (bench/shim-compare.sh --np "3 4" --repeats 5 -b allreduce -c, against
// the shim with recursive doubling and the better of Open MPI tuned and
// han in one alternation; quiet, after the shim's waits stopped yielding
// twice): at np 3 4-256 B direct 0.77-0.86 of the best peer against
// recursive doubling's 1.11-1.24 (whose fold in and out makes three
// dependent steps of one), 512 B - 32 KiB 0.32-0.59 against 0.36-0.70,
// level at 64 KiB (0.52 / 0.51), behind from 128 KiB (0.67-0.73 against
// 0.60): so direct below 64 KiB at np 3. At np 4 the two were level
// (0.96-1.41 against 1.05-1.25 to 256 B, 0.32-0.64 both to 8 KiB):
// recursive doubling, which has a synchronous form, stays. np 5 and 6
// (3 repeats) looked better with direct below 2 KiB, but noisily: not
// taken (bench/results/shim-2026-12-07-opal-yield/allreduce-direct.md).
//
// Rank counts above 8 (kDefaultTuningMaxRanks) take the cost model's
// choices (selection.cpp, cost_model.hpp: this machine's shared-memory
// parameters, every rank on one node) instead of stretching the rules of 8
// to any rank count; the rules below that say "8+" or "*" still apply to
// the collectives the model cannot choose for (gatherv, scatterv,
// alltoallv: no size every rank knows). One rank runs no algorithm (any
// name does).
#include "selection.hpp"

namespace coll {

const int kDefaultTuningMaxRanks = 8;

const char* const kDefaultTuning = R"(
# collective  ranks  min_bytes  algorithm
allreduce     *      0          ring
allreduce     2      0          recursive_doubling
allreduce     2      32K        ring
allreduce     2      512K       rabenseifner
allreduce     2      2M         tree
allreduce     3      0          direct
allreduce     3      64K        recursive_doubling
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
bcast         3-4    64K        ring
bcast         3-4    256K       scatter_allgather
bcast         3-4    1M         ring
bcast         5+     0          binomial

# tree: rank 0 leaves first, and two waves when ranks outnumber cores
# (barrier.cpp); dissemination at 3 ranks (see the top of this file).
barrier       *      0          tree
barrier       3      0          dissemination

allgather     *      0          ring
allgather     4-7    0          bruck
allgather     4-7    16K        ring
allgather     4      0          linear
allgather     4      2K         bruck
allgather     3      0          linear
allgather     3      8K         ring
allgather     2      0          linear
allgather     2      64K        ring
allgatherv    *      0          ring
allgatherv    4-7    0          bruck
allgatherv    4-7    16K        ring
allgatherv    4      0          linear
allgatherv    4      2K         bruck
allgatherv    3      0          linear
allgatherv    3      8K         ring
allgatherv    2      0          linear
allgatherv    2      64K        ring

# The rules below were measured more roughly (see the top of this file).
reduce        *      0          binomial
reduce        4      0          linear
reduce        4      8K         binomial

reduce_scatter_block  *    0      recursive_halving
reduce_scatter_block  2-3  0      ring
reduce_scatter_block  5    256K   ring
reduce_scatter_block  4    0      linear
reduce_scatter_block  4    2K     recursive_halving
reduce_scatter_block  3    0      linear
reduce_scatter_block  3    2K     ring
reduce_scatter_block  2    0      linear
reduce_scatter_block  2    64K    ring
reduce_scatter        *    0      recursive_halving
reduce_scatter        2-3  0      ring
reduce_scatter        5    256K   ring
reduce_scatter        4    0      linear
reduce_scatter        4    2K     recursive_halving
reduce_scatter        3    0      linear
reduce_scatter        3    2K     ring
reduce_scatter        2    0      linear
reduce_scatter        2    64K    ring

gather        *      0          linear
gatherv       *      0          linear
scatter       *      0          linear
scatterv      *      0          linear

alltoall      *      0          linear
alltoall      3      32K        pairwise
alltoall      5      1M         pairwise
# No size is known to every rank of an alltoallv: rank counts only.
alltoallv     *      0          linear

scan          *      0          linear
scan          3      0          direct
scan          3      256        linear
scan          4      0          direct
scan          4      8K         linear
exscan        *      0          linear
exscan        3      0          direct
exscan        3      1K         linear
exscan        4      0          direct
exscan        4      8K         linear
)";

// Oversubscribed (ranks outnumber a host's CPUs: np 3-4 on the 2-core
// development machine) the ring and scatter-allgather bcasts wait on a
// chain of ranks that take turns on the CPUs, while linear's root writes
// every copy itself and its receivers each wait once. Measured 2026-12-07
// through the shim (bench/shim-compare.sh, OSU's loop, shim with the
// defaults above against COLL_BCAST_ALGO=linear, alternating with Open MPI
// tuned and han; bench/results/shim-2026-12-07-bcast-linear/): against the
// best peer, 64 KiB - 4 MiB, 9 repeats quiet, the defaults 0.33-1.25 at
// np 3 and 0.74-2.18 at np 4 (64-128 KiB: 2.16-2.18), linear 0.31-0.76 and
// 0.32-0.79; beside a busy process (5 repeats) the defaults 0.48-1.86 and
// 1.57-2.81, linear 0.10-2.20 (1.02 at np 3 512 KiB, over 1 at 4 MiB
// only) and 0.17-1.40. Not for machines with a core per rank, where the
// ring's pipeline moves a large message at one copy's speed and linear's
// root at n - 1 copies': the defaults above stay theirs.
const char* const kOversubscribedTuning = R"(
bcast         3-4    0          linear
)";

}  // namespace coll
