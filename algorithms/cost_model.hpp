// An alpha-beta-gamma cost model of every algorithm in this folder, and of
// the hierarchical forms (reduce within a node, across nodes among one
// leader per node, broadcast within the node) that libcoll does not run
// yet. Pure schedule math, like the *_schedule.hpp: no transport, no
// channel. It exists to say what this 2-core machine cannot measure: which
// algorithm wins, and how long a call takes, at thousands of ranks on a
// real network (bench/coll_model prints it; the selection consults it past
// the rank counts the built-in table was tuned at).
//
// The cost of one message of m bytes is Hockney's alpha + beta m, with the
// parameters of the link it crosses: within a node (shared memory) or
// between nodes. As in Thakur, Rabenseifner and Gropp, "Optimization of
// Collective Communication Operations in MPICH" (IJHPCA 2005), every
// message a rank sends or receives in sequence costs its alpha: a root
// that writes to n - 1 ranks pays (n - 1) alpha. gamma is the time per byte
// of one reduction (out = a op b). On top of Hockney, two effects of the
// hierarchy that decide the choice at scale (the LogGP-ish part):
//  - placement: ranks are placed in blocks of ranks_per_node, so a partner
//    at distance d is on another node only for some d;
//  - NIC sharing: when k ranks of one node send to other nodes in the same
//    step, they share its link, so each pays k beta_inter per byte.
// Contention for memory bandwidth within a node is not modelled, nor
// ranks that outnumber cores (on this machine, np >= 3), nor the overlap of
// a chunk's latency with the next chunk's transfer (the channel keeps
// num_slots chunks in flight): a slot-sized chunk is a message and pays
// alpha, which is pessimistic for multi-slot messages by at most about
// alpha per slot.
//
// Sizes are the selection's (Args::select_bytes): the vector of allreduce,
// bcast, reduce, scan; the per-rank block of allgather, gather, scatter,
// alltoall and reduce_scatter_block. Elements are elem_size bytes (float).
//
// The formulas, per algorithm, are in docs/architecture.md ("Cost model")
// and next to each function in cost_model.cpp.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "algorithms.hpp"

namespace coll::model {

struct Params {
  double alpha_intra = 0;  // s per message between two ranks of one node
  double beta_intra = 0;   // s per byte between two ranks of one node (copy included)
  double alpha_inter = 0;  // s per message between nodes
  double beta_inter = 0;   // s per byte through one node's network link
  double gamma = 0;        // s per byte of one reduction
  // Ranks per node, placed in blocks (ranks 0 .. k-1 on the first node);
  // 0: every rank on one node.
  int ranks_per_node = 0;
  size_t slot_bytes = 128 * 1024;  // the channel's default slot (COLL_SLOT_SIZE)
  size_t elem_size = 4;
};

// The parameters fitted on this machine's shared memory (bench/calibrate-model.sh;
// the values and the file they came from: cost_model.cpp), all ranks on
// one node.
Params this_machine();

// A network profile: this machine's shared memory within a node, and
// between nodes a link of gbit_per_s with latency_us per message.
struct Network {
  double gbit_per_s;
  double latency_us;
  int ranks_per_node;
};
Params with_network(const Params& intra, const Network& net);

// The profiles bench/coll_model prints and docs/architecture.md tabulates.
std::vector<Network> standard_networks();

struct Estimate {
  std::string algorithm;  // a registry name, or "hierarchical"
  double seconds;
  // false for the hierarchical forms: best() chooses among the flat
  // algorithms, as the selection does (a communicator across hosts takes
  // the hierarchical ones anyway: Communicator::build_hierarchy).
  bool implemented;
  // Whether best() may take it: false for the hierarchical forms, and for
  // the flat algorithms the model predicts but does not choose (the linear
  // allgather(v), reduce and reduce_scatter(_block): cost_model.cpp says
  // why).
  bool chosen = true;
};

// Every algorithm of collective c that the model knows (the registry's, in
// its order, then the hierarchical form where one is modelled), at n ranks
// and `bytes` (select_bytes). Empty for n < 2.
std::vector<Estimate> estimates(Coll c, int n, size_t bytes, const Params& p);
// One algorithm by name; a negative value when the model does not know it.
double predict(Coll c, const std::string& algorithm, int n, size_t bytes, const Params& p);
// The cheapest implemented algorithm (the first of equals, in registry
// order); `incumbent` instead while it is within 5% of the cheapest, so
// that a sweep over sizes does not flap between near-equals (the tuning
// table switches on 5% too).
Estimate best(Coll c, int n, size_t bytes, const Params& p, const std::string& incumbent = "");

// Whether the model can choose for c: false where the selection key is 0
// because no rank knows every size (gatherv, scatterv, alltoallv).
bool chooses(Coll c);

// The smallest size in [lo, hi] (on a grid of 8 points per octave) at
// which algorithm `to` is cheaper than `from` (lo itself when it already
// is there); 0 when there is none.
size_t crossover(Coll c, const std::string& from, const std::string& to, int n, const Params& p,
                 size_t lo = 4, size_t hi = size_t{4} << 20);

// Where the cheapest implemented algorithm changes between lo and hi.
struct Switch {
  size_t bytes;  // the first size (on the grid) where `to` is best
  std::string from, to;
};
std::vector<Switch> switches(Coll c, int n, const Params& p, size_t lo = 4,
                             size_t hi = size_t{4} << 20);

// A measured latency (bench/coll_bench's CSV: collective, np, size_bytes,
// avg_us, algorithm).
struct Measurement {
  Coll collective;
  std::string algorithm;
  int ranks;
  size_t bytes;
  double seconds;
};

// alpha_intra, beta_intra and gamma fitted to measurements on one node by
// least squares on the relative error (every size weighs alike): on one
// node each prediction is A alpha + B beta + G gamma, with A, B, G the
// model's counts for the call. A parameter the fit would make negative is
// fixed at 0 and the others refitted; then the fit is made again without
// the rows it misses by more than 3x (noise). The rest of `base` is kept.
Params fit(const std::vector<Measurement>& data, const Params& base);

// A parameters file (bench/calibrate-model.sh writes it): "name value"
// lines, '#' comments. Throws Error(COLL_ERR_INVALID_ARG) naming the line.
Params parse_params(const std::string& text, const std::string& origin);
std::string format_params(const Params& p);

}  // namespace coll::model
