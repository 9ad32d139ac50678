// The collectives and their algorithms: one generic registry. Algorithms
// are written on Channel (send / recv / release, co_awaited) only: no
// transport header is included.
//
// A collective is one descriptor (registry.cpp): its name, the knob that
// forces an algorithm (COLL_<NAME>_ALGO), its argument check, what happens
// on one rank or with no data, the user buffers a call touches, and its
// algorithms. Dispatch, forcing, coll_comm_last_algorithm, the tuning file
// (selection.hpp) and the benchmark all read it. Adding a collective:
// collective_list.hpp says what.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "collective_list.hpp"
#include "datatype.hpp"
#include "task.hpp"

namespace coll {

class Channel;

enum class Coll {
#define COLL_ENUMERATOR(Id, name) k##Id,
  COLL_COLLECTIVES(COLL_ENUMERATOR)
#undef COLL_ENUMERATOR
};
#define COLL_ONE(Id, name) +1
inline constexpr int kCollCount = 0 COLL_COLLECTIVES(COLL_ONE);
#undef COLL_ONE
// Each collective's name (its descriptor's, the knobs' and the tuning
// file's), indexed by Coll.
#define COLL_NAME(Id, name) #name,
inline constexpr const char* kCollNames[kCollCount] = {COLL_COLLECTIVES(COLL_NAME)};
#undef COLL_NAME

// The arguments of any collective (the union of what they take, as UCC's
// ucc_coll_args). The API fills the raw fields; the descriptor's check
// validates them and fills the derived ones.
//
// The count and displacement arrays are the caller's (MPI keeps them valid
// until the operation completes, and for the life of a persistent
// request), so Args points at them; every one has comm-size entries, in
// elements. Where a collective or this rank does not use one, it is
// nullptr or ignored.
struct Args {
  // raw
  // COLL_IN_PLACE: the check replaces it with where this rank's input
  // already is (recvbuf, or its block of recvbuf), and sets in_place.
  const void* sendbuf = nullptr;
  // scatter(v) at the root: COLL_IN_PLACE, replaced by the root's block of
  // sendbuf.
  void* recvbuf = nullptr;
  // Elements: allreduce, bcast, reduce, scan, exscan: the vector;
  // allgather, gather, scatter, alltoall: per rank; reduce_scatter_block:
  // each rank's block of the result (recvcount). The v-collectives and
  // reduce_scatter pass none: their check sets it to what this rank moves
  // in all (the descriptor's `empty` reads it).
  size_t count = 0;
  int datatype = 0;
  int op = 0;
  int root = 0;
  size_t sendcount = 0;                // allgatherv, gatherv
  size_t recvcount = 0;                // scatterv
  const size_t* sendcounts = nullptr;  // scatterv (root), alltoallv
  const size_t* sdispls = nullptr;     // scatterv (root: displs), alltoallv
  const size_t* recvcounts = nullptr;  // allgatherv, gatherv (root), reduce_scatter, alltoallv
  const size_t* rdispls = nullptr;     // allgatherv, gatherv (root: displs), alltoallv
  // derived
  size_t elem_size = 0;  // bytes per element
  Reducer reduce = {};
  // False for a user operator made with commute = 0: the call then runs
  // in_order_algorithm (the operands must meet in rank order).
  bool commutative = true;
  // The bytes of the call at this rank (non-zero whenever it touches a user
  // buffer): the registrations and the zero-copy choice go by it.
  size_t bytes = 0;
  // What the selection table is keyed by: a size every rank of the call
  // computes alike, so that all choose the same algorithm (the message of
  // allreduce, bcast, reduce, scan; the per-rank block of allgather,
  // gather, scatter, alltoall, reduce_scatter_block; the mean block of
  // allgatherv and reduce_scatter; 0 where no rank knows the others' sizes:
  // gatherv, scatterv, alltoallv).
  size_t select_bytes = 0;
  bool in_place = false;  // COLL_IN_PLACE was passed

  size_t count_bytes() const { return count * elem_size; }
};

// The communicator runs an algorithm only with at least two ranks and, for
// the collectives that carry data, at least one element: a call on one rank
// or of no data is handled by the descriptor's `local`. It flushes the
// channel after the algorithm returns, so an algorithm flushes only where it
// overwrites the source of a send.
using AlgorithmFn = Task (*)(Channel&, const Args&);

// The polls a synchronous form (NowFn) may spend waiting: the polls a wait
// spins before anything else (none where ranks outnumber CPUs: the peer
// needs ours to run), each of which drives the transport (tcp applies
// incoming frames there). Bounded: these polls check no timeout and no
// dead peer; the coroutine's waits do.
struct Polls {
  uint64_t left = 0;
  void (*drive)(void*) = nullptr;
  void* arg = nullptr;
  // One more poll, if any is left (driving the transport first).
  bool next() {
    if (left == 0) return false;
    --left;
    drive(arg);
    return true;
  }
};

// The same algorithm as one synchronous call, for the smallest messages
// (optional). It runs this rank's part in the coroutine's order without
// suspending, polling (polls.next()) where it waits. A broadcast's form
// waits for every credit and message of its part before it does anything,
// and does nothing if they do not come within the polls: what it waits for
// never waits for this rank. An exchange cannot wait for its partner's
// message before sending its own (both would wait), so its form sends
// first, and when a message it needs does not come within the polls it
// hands the call over in `rest`: a coroutine of the same algorithm that
// continues from exactly that point. Returns true when the call is done;
// false otherwise, with `rest` empty (nothing was done: the coroutine runs
// from the start) or set. args outlives the call (`rest` refers to it).
// Every step is one the coroutine would take, in its order, so the
// coroutine's deadlock argument covers it. What it saves is the
// coroutine's frame and the engine's queue and pacing: on a small blocking
// call they were half the instructions. Called only where writes complete
// at post (Channel::completes_at_post: no release or flush ever waits),
// for blocking calls on an idle communicator that move something (a call of
// no data never becomes an operation: Communicator::check_and_choose).
using NowFn = bool (*)(Channel&, const Args&, Polls& polls, Task& rest);

struct Algorithm {
  const char* name;
  AlgorithmFn run;
  NowFn now = nullptr;
};

struct CollectiveInfo {
  Coll id;
  const char* name;  // "allreduce"
  const char* knob;  // "COLL_ALLREDUCE_ALGO"
  // Validates args for a communicator of comm_size ranks and fills the
  // derived fields; throws Error(COLL_ERR_INVALID_ARG) with the values.
  void (*check)(Args& args, int comm_size, int comm_rank);
  // True when the call moves nothing (count 0): it then returns at once.
  bool (*empty)(const Args& args);
  // The call on a communicator of one rank.
  void (*local)(const Args& args);
  // The user buffers of the call (pinned where the transport needs it).
  std::vector<std::pair<const void*, size_t>> (*buffers)(const Args& args, int comm_size);
  const Algorithm* algorithms;
  size_t num_algorithms;
  // The algorithm an automatic choice gives way to where the call goes
  // zero-copy and that spares copies (Channel::zero_copy_spares_copies), or
  // nullptr: see zero_copy_choice.
  const Algorithm* zero_copy = nullptr;
};

const CollectiveInfo& collective_info(Coll c);
// By name ("allreduce"): nullptr when unknown.
const CollectiveInfo* find_collective(const std::string& name);
// Every collective's name, ", "-separated, for messages.
std::string collective_names();

// Lookup by name: nullptr when the name is unknown.
const Algorithm* lookup_algorithm(Coll c, const std::string& name);
// Throws coll::Error(COLL_ERR_INVALID_ARG) "<knob>=<name>: unknown algorithm
// (valid: ..., auto)".
const Algorithm& find_algorithm(Coll c, const std::string& name);
// The valid names, ", "-separated, for messages.
std::string algorithm_names(Coll c);

// The automatic choice for a call of `bytes` bytes on nranks ranks, from
// the selection table (selection.hpp): the compiled-in defaults, overridden
// by the file COLL_TUNING_FILE names.
const Algorithm& choose_algorithm(Coll c, int nranks, size_t bytes);
// What a call runs in place of the automatic choice `chosen` (the
// table's) where it goes zero-copy and that spares copies outright
// (Channel::zero_copy_spares_copies: tcp, RDMA): the collective's
// zero-copy algorithm where it has one, else `chosen`. bcast only: its
// ring writes straight into the receivers' buffers, which at 2 ranks is
// the least any bcast can move (one write of the message), while the
// table's choices (scatter_allgather from 512 KiB at 2-4 ranks) were
// measured on shm without zero-copy and copy every byte through the
// windows: over tcp they lost to Open MPI's tcp BTL where the ring tied
// or won (docs/architecture.md, "Window layout", has the figures: quiet,
// beside a busy process and as an unprivileged user). Not on shm, whose
// zero-copy (CMA) costs what the machine makes it cost (shm_transport.cpp:
// on an Intel VM the ring with CMA lost 1.45x to scatter_allgather at
// 4 MiB). Allreduce keeps the table's: its zero-copy ring only tied the
// table's choices over tcp (np 2 and 4, 512 KiB-4 MiB).
const Algorithm& zero_copy_choice(const Algorithm& chosen, Coll c);
// The algorithm a reduction runs with a non-commutative user operator,
// whatever the table or COLL_<NAME>_ALGO say: one whose every reduction
// combines two runs of consecutive ranks, the lower run's operand first
// (Reducer: `a` is the lower ranks'), so the result is x0 op x1 op ... in
// rank order. Which algorithms keep the order (registry.cpp says why for
// each): allreduce, scan and exscan recursive_doubling; reduce and
// reduce_scatter(_block) in_order (in_order_reduce.cpp: recursive
// doubling's association, by recursive doubling or by owner). nullptr for
// a collective that does not reduce.
const Algorithm* in_order_algorithm(Coll c);
// Builds the selection table now (reads COLL_TUNING_FILE when it is set), so
// that a bad file fails coll_init rather than the first collective;
// oversubscribed (some host's ranks outnumber its CPUs, alike at every rank)
// puts kOversubscribedTuning's rules before the defaults (selection.hpp).
void load_selection(bool oversubscribed);

// Algorithms, one per file (each with its deadlock argument on top).
Task ring_allreduce(Channel& ch, const Args& args);
Task tree_allreduce(Channel& ch, const Args& args);
Task binomial_allreduce(Channel& ch, const Args& args);
Task recursive_doubling_allreduce(Channel& ch, const Args& args);
bool recursive_doubling_allreduce_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task rabenseifner_allreduce(Channel& ch, const Args& args);
Task direct_allreduce(Channel& ch, const Args& args);
// Across hosts (algorithms/hierarchy.hpp): the automatic choice where a
// communicator has a hierarchy; elsewhere, forced, the table's flat one.
Task hierarchical_allreduce(Channel& ch, const Args& args);
Task hierarchical_bcast(Channel& ch, const Args& args);
Task hierarchical_barrier(Channel& ch, const Args& args);
Task hierarchical_reduce(Channel& ch, const Args& args);
Task ring_bcast(Channel& ch, const Args& args);
bool ring_bcast_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task binomial_bcast(Channel& ch, const Args& args);
Task tree_bcast(Channel& ch, const Args& args);
Task scatter_allgather_bcast(Channel& ch, const Args& args);
Task linear_bcast(Channel& ch, const Args& args);
bool linear_bcast_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task tree_barrier(Channel& ch, const Args& args);
bool tree_barrier_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task dissemination_barrier(Channel& ch, const Args& args);
bool dissemination_barrier_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task ring_allgather(Channel& ch, const Args& args);
Task bruck_allgather(Channel& ch, const Args& args);
Task ring_allgatherv(Channel& ch, const Args& args);
Task bruck_allgatherv(Channel& ch, const Args& args);
Task linear_allgather(Channel& ch, const Args& args);
Task linear_allgatherv(Channel& ch, const Args& args);
bool linear_allgather_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
bool linear_allgatherv_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
// Bruck's allgather among some of ch's ranks only: members[i] is the
// channel rank at position i of the result, me this rank's position; the
// other ranks take no part (coll_comm_create_group's exchange). Not an
// Algorithm: internal use, on raw bytes (args.count bytes of COLL_UINT8).
Task bruck_allgather_among(Channel& ch, const std::vector<int>& members, int me, const Args& args);
Task binomial_reduce(Channel& ch, const Args& args);
bool binomial_reduce_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task linear_reduce(Channel& ch, const Args& args);
bool linear_reduce_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task reduce_scatter_gather_reduce(Channel& ch, const Args& args);
Task ring_reduce_scatter_block(Channel& ch, const Args& args);
Task recursive_halving_reduce_scatter_block(Channel& ch, const Args& args);
Task ring_reduce_scatter(Channel& ch, const Args& args);
Task recursive_halving_reduce_scatter(Channel& ch, const Args& args);
Task linear_reduce_scatter_block(Channel& ch, const Args& args);
Task linear_reduce_scatter(Channel& ch, const Args& args);
bool linear_reduce_scatter_block_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
bool linear_reduce_scatter_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task binomial_gather(Channel& ch, const Args& args);
Task linear_gather(Channel& ch, const Args& args);
Task linear_gatherv(Channel& ch, const Args& args);
bool linear_gather_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
bool linear_gatherv_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task binomial_scatter(Channel& ch, const Args& args);
Task linear_scatter(Channel& ch, const Args& args);
Task linear_scatterv(Channel& ch, const Args& args);
bool linear_scatter_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
bool linear_scatterv_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task pairwise_alltoall(Channel& ch, const Args& args);
Task linear_alltoall(Channel& ch, const Args& args);
bool linear_alltoall_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task bruck_alltoall(Channel& ch, const Args& args);
Task pairwise_alltoallv(Channel& ch, const Args& args);
Task linear_alltoallv(Channel& ch, const Args& args);
bool linear_alltoallv_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
Task recursive_doubling_scan(Channel& ch, const Args& args);
Task linear_scan(Channel& ch, const Args& args);
Task recursive_doubling_exscan(Channel& ch, const Args& args);
Task linear_exscan(Channel& ch, const Args& args);
Task direct_scan(Channel& ch, const Args& args);
Task direct_exscan(Channel& ch, const Args& args);
bool direct_scan_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
bool direct_exscan_now(Channel& ch, const Args& args, Polls& polls, Task& rest);
// COLL_REPRODUCIBLE=exact (exact_reduction.cpp): the exact-sum algorithm
// of allreduce, reduce or reduce_scatter(_block) for a call whose datatype
// and operator it sums exactly (float, double, float16, bfloat16 SUM), or
// nullptr (also on 2^21 ranks or more: the accumulators' headroom).
// exact_local is that definition at one rank.
const Algorithm* exact_algorithm(Coll c, const Args& args, int nranks);
void exact_local(Coll c, const Args& args);
Task exact_allreduce(Channel& ch, const Args& args);
Task exact_reduce(Channel& ch, const Args& args);
Task exact_reduce_scatter_block(Channel& ch, const Args& args);
Task exact_reduce_scatter(Channel& ch, const Args& args);
// in_order_algorithm's: non-commutative user operators, and
// COLL_REPRODUCIBLE=order (in_order_reduce.cpp).
Task in_order_reduce(Channel& ch, const Args& args);
Task in_order_reduce_scatter_block(Channel& ch, const Args& args);
Task in_order_reduce_scatter(Channel& ch, const Args& args);

}  // namespace coll
