// The cost model (algorithms/cost_model.hpp) against this machine's
// measurements (the committed calibration CSV) and against the crossovers
// that published libraries chose by measurement at scale.
#include "cost_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "algorithms.hpp"
#include "error.hpp"
#include "selection.hpp"
#include "tree_schedule.hpp"

namespace coll::model {
namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Every flat algorithm of the registry is modelled, under its own name,
// and nothing else is; the hierarchical forms are estimated apart (where
// nodes hold several ranks, as here), never as a flat choice.
TEST(CostModel, ModelsEveryAlgorithmOfTheRegistry) {
  const Params p = with_network(this_machine(), {100, 3, 8});
  for (int i = 0; i < kCollCount; ++i) {
    const CollectiveInfo& info = collective_info(Coll(i));
    std::set<std::string> registry, modelled;
    for (size_t a = 0; a < info.num_algorithms; ++a)
      if (std::string(info.algorithms[a].name) != "hierarchical")
        registry.insert(info.algorithms[a].name);
    for (const Estimate& e : estimates(Coll(i), 64, 1024, p)) {
      if (e.implemented)
        modelled.insert(e.algorithm);
      else
        EXPECT_EQ(e.algorithm, "hierarchical");
      EXPECT_GT(e.seconds, 0) << info.name << " " << e.algorithm;
    }
    EXPECT_EQ(registry, modelled) << info.name;
  }
}

// The linear allgather(v), reduce and reduce_scatter(_block), and the
// direct scan and exscan, are predicted but never chosen (cost_model.cpp
// says why): the selection past the table's rank counts, on this machine
// and on the standard networks, keeps the algorithms it had, whatever the
// size.
TEST(CostModel, LinearSmallCallSchedulesAreNeverChosen) {
  std::vector<Params> profiles{this_machine()};
  for (const Network& net : standard_networks())
    profiles.push_back(with_network(this_machine(), net));
  const std::pair<Coll, const char*> one_step[] = {
      {Coll::kAllgather, "linear"},     {Coll::kAllgatherv, "linear"},
      {Coll::kReduce, "linear"},        {Coll::kReduceScatterBlock, "linear"},
      {Coll::kReduceScatter, "linear"}, {Coll::kScan, "direct"},
      {Coll::kExscan, "direct"}};
  for (const auto& [c, name] : one_step)
    for (const Params& p : profiles)
      for (int n : {2, 3, 9, 12, 16, 64})
        for (size_t bytes : {size_t{4}, size_t{4096}, size_t{65536}, size_t{4} << 20}) {
          EXPECT_GT(predict(c, name, n, bytes, p), 0);
          EXPECT_NE(best(c, n, bytes, p).algorithm, name)
              << collective_info(c).name << " n=" << n << " bytes=" << bytes;
        }
}

// The model's double binary tree height stands for tree_schedule.hpp's.
TEST(CostModel, TreeHeightIsTheSchedulesWithinOneLevel) {
  for (int n = 2; n <= 300; ++n) {
    int h = 0;
    while ((2 << h) <= n) ++h;
    EXPECT_LE(std::abs(tree::dtree_height(n, 0) - h), 1) << n;
  }
}

// Latency grows with size and with ranks; more bandwidth never costs.
TEST(CostModel, MonotoneInSizeRanksAndBandwidth) {
  for (int i = 0; i < kCollCount; ++i) {
    const Coll c = Coll(i);
    for (const Network& net : standard_networks()) {
      const Params p = with_network(this_machine(), net);
      Network faster = net;
      faster.gbit_per_s *= 2;
      const Params q = with_network(this_machine(), faster);
      for (const Estimate& e : estimates(c, 1024, 4096, p)) {
        const double bigger = predict(c, e.algorithm, 1024, 65536, p);
        const double more = predict(c, e.algorithm, 8192, 4096, p);
        EXPECT_GE(bigger, e.seconds * 0.999) << collective_info(c).name << " " << e.algorithm;
        EXPECT_GE(more, e.seconds * 0.999) << collective_info(c).name << " " << e.algorithm;
        EXPECT_LE(predict(c, e.algorithm, 1024, 4096, q), e.seconds * 1.001);
      }
    }
  }
}

// A flat two-rank exchange is one message: the formulas reduce to Hockney.
TEST(CostModel, TwoRanksAreHockney) {
  Params p;
  p.alpha_intra = 1e-6;
  p.beta_intra = 1e-9;
  p.gamma = 0.5e-9;
  const size_t b = 4096;
  EXPECT_DOUBLE_EQ(predict(Coll::kBcast, "ring", 2, b, p), 1e-6 + 1e-9 * b);
  EXPECT_DOUBLE_EQ(predict(Coll::kBcast, "binomial", 2, b, p), 1e-6 + 1e-9 * b);
  EXPECT_DOUBLE_EQ(predict(Coll::kAllreduce, "recursive_doubling", 2, b, p),
                   1e-6 + 1e-9 * b + 0.5e-9 * b);
  EXPECT_DOUBLE_EQ(predict(Coll::kBarrier, "dissemination", 2, 0, p), 1e-6);
  // Chunks of a slot each pay alpha: 4 slots.
  EXPECT_DOUBLE_EQ(predict(Coll::kAllgather, "ring", 2, 4 * p.slot_bytes, p),
                   4e-6 + 1e-9 * 4 * double(p.slot_bytes));
}

// The NIC is shared: recursive doubling at a distance beyond a node sends
// every rank of the node across at once.
TEST(CostModel, RanksOfANodeShareItsLink) {
  Params flat = with_network(this_machine(), {100, 1, 1});
  Params packed = with_network(this_machine(), {100, 1, 16});
  const size_t b = 1 << 20;
  const double one = predict(Coll::kAllreduce, "recursive_doubling", 1024, b, flat);
  const double shared = predict(Coll::kAllreduce, "recursive_doubling", 1024, b, packed);
  EXPECT_GT(shared, 4 * one);  // 6 of 10 steps leave the node, 16 ranks share the link
  // The ring leaves a node at one rank only: no sharing.
  EXPECT_LT(predict(Coll::kAllreduce, "ring", 1024, b, packed),
            predict(Coll::kAllreduce, "ring", 1024, b, flat) * 1.01);
}

TEST(CostModel, ParamsFileRoundTripsAndBadLinesAreNamed) {
  const Params p = this_machine();
  const Params q = parse_params(format_params(p), "t");
  EXPECT_NEAR(q.alpha_intra, p.alpha_intra, p.alpha_intra * 1e-3);
  EXPECT_NEAR(q.beta_intra, p.beta_intra, p.beta_intra * 1e-3);
  EXPECT_NEAR(q.gamma, p.gamma, p.gamma * 1e-3);
  try {
    parse_params("alpha_intra 1e-6\nbeta 3\n", "f.txt");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("f.txt: line 2: unknown name 'beta'"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_params("gamma -1\n", "f"), Error);
  EXPECT_THROW(parse_params("gamma\n", "f"), Error);
}

// The built-in parameters are those of the committed fit.
TEST(CostModel, BuiltInParametersAreTheCommittedFit) {
  const Params file = parse_params(read(COLL_MODEL_PARAMS_FILE), COLL_MODEL_PARAMS_FILE);
  const Params p = this_machine();
  EXPECT_NEAR(p.alpha_intra, file.alpha_intra, file.alpha_intra * 0.01);
  EXPECT_NEAR(p.beta_intra, file.beta_intra, file.beta_intra * 0.01);
  EXPECT_NEAR(p.gamma, file.gamma, file.gamma * 0.01 + 1e-15);
}

// --- against this machine -------------------------------------------------

struct Row {
  Coll c;
  std::string algorithm;
  int np;
  size_t bytes;
  double seconds;
};

std::vector<Row> calibration_rows() {
  std::vector<Row> rows;
  std::istringstream lines(read(COLL_MODEL_CALIBRATION_CSV));
  std::string line;
  std::map<std::string, size_t> col;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::stringstream s(line);
    for (std::string x; std::getline(s, x, ',');) f.push_back(x);
    if (!f.empty() && f[0] == "collective") {
      for (size_t i = 0; i < f.size(); ++i) col[f[i]] = i;
      continue;
    }
    if (f.size() <= col["algorithm"]) continue;
    const CollectiveInfo* c = find_collective(f[col["collective"]]);
    if (!c) continue;
    const std::string& size = f[col["size_bytes"]];
    rows.push_back({c->id, f[col["algorithm"]], std::stoi(f[col["np"]]),
                    size.empty() ? 0 : size_t(std::stoull(size)),
                    std::stod(f[col["avg_us"]]) * 1e-6});
  }
  return rows;
}

// Predicted against measured, with the built-in (fitted) parameters.
//
// The bounds. At np 2 (a core per rank) each call is a few messages and
// the model is Hockney's, fitted to these very rows: within 2x (what an
// alpha-beta fit of shared memory reaches: the copy bandwidth changes
// with the cache level a size fits in), and the geometric mean of
// predicted/measured within 2x of 1. At np 4 there are 2 ranks per core:
// every wait can cost a context switch, which the model does not know, so
// the latency-bound sizes (below 64 KiB) are only bounded one way - the
// model must not predict more than 2x what was measured - and the
// bandwidth-bound sizes, where the copies dominate, within 4x. The
// committed run was taken while another build ran on the 2 cores (load
// 5-30): some sizes caught a context switch (7-10 us on a 0.3 us call; the
// recursive-doubling job of np 2 almost throughout), so a quarter of each
// group's rows may miss the bound; more would mean the model is wrong.
TEST(CostModel, PredictsThisMachinesMeasurements) {
  const std::vector<Row> rows = calibration_rows();
  ASSERT_GT(rows.size(), 200u);
  const Params p = this_machine();
  double log_sum = 0;
  int groups[3] = {0, 0, 0}, misses[3] = {0, 0, 0};
  for (const Row& r : rows) {
    const double t = predict(r.c, r.algorithm, r.np, r.bytes, p);
    ASSERT_GT(t, 0) << collective_info(r.c).name << " " << r.algorithm;
    const double ratio = t / r.seconds;  // predicted / measured
    int g = 0;
    bool ok = false;
    if (r.np == 2) {
      g = 0, ok = ratio < 2 && ratio > 0.5;
      log_sum += std::log(ratio);
    } else if (r.bytes < 65536) {
      g = 1, ok = ratio < 2;
    } else {
      g = 2, ok = ratio < 4 && ratio > 0.25;
    }
    ++groups[g];
    if (!ok) {
      ++misses[g];
      std::printf("outside the bound: %s %s np %d %zu B: measured %.2f us, predicted %.2f us\n",
                  collective_info(r.c).name, r.algorithm.c_str(), r.np, r.bytes, r.seconds * 1e6,
                  t * 1e6);
    }
  }
  for (int g = 0; g < 3; ++g) {
    ASSERT_GT(groups[g], 20) << g;
    EXPECT_LE(misses[g], groups[g] / 4) << "group " << g << " (np 2; np 4 small; np 4 large)";
  }
  const double geomean = std::exp(log_sum / groups[0]);
  EXPECT_GT(geomean, 0.5);
  EXPECT_LT(geomean, 2.0);
}

// --- against published crossovers ---------------------------------------
//
// What libraries tuned by measurement chose on their clusters; the model,
// with this machine's shared memory within nodes and a network between,
// must switch in the same direction and within a factor of the published
// size. A crossover between a latency-bound and a bandwidth-bound
// algorithm sits near a multiple of alpha / beta, the bytes a link moves
// in one message latency: about 1-6 KB on the clusters of these rules
// (Myrinet MX at 2 Gb/s and a few us, Open MPI's Grig; Gigabit Ethernet
// at 30-50 us, MPICH's 2005 paper) against 37-50 KB on the profiles here
// (100 Gb/s at 3 us, 400 Gb/s at 1 us). So the model's crossovers may lie
// up to about 50x above the published ones, and not far below: the bounds
// are published / 4 .. published x 64.

constexpr double kBelow = 4, kAbove = 64;

void expect_near(size_t got, double published, const std::string& what) {
  ASSERT_GT(got, 0u) << what << ": no crossover (published " << published << ")";
  EXPECT_GT(double(got), published / kBelow) << what;
  EXPECT_LT(double(got), published * kAbove) << what;
}

// Open MPI tuned (ompi/mca/coll/tuned/coll_tuned_decision_fixed.c,
// ompi_coll_tuned_allreduce_intra_dec_fixed, 1.6 series; measured on the
// Grig cluster at UTK, MX): recursive doubling below 10000 bytes, ring
// above. MPICH (Thakur, Rabenseifner, Gropp 2005, section 4.4;
// MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE = 2048 in mpich_cvars.c): recursive
// doubling up to 2 KiB, Rabenseifner's reduce-scatter + allgather above.
TEST(PublishedCrossovers, AllreduceRecursiveDoublingForShortThenBandwidthAlgorithms) {
  for (const Network& net : {Network{100, 3, 1}, Network{200, 2, 8}, Network{400, 1, 1}}) {
    const Params p = with_network(this_machine(), net);
    for (int n : {64, 1024}) {
      const std::string what = strfmt("%g Gb/s %d ppn n=%d", net.gbit_per_s, net.ranks_per_node, n);
      // Recursive doubling wins the smallest sizes.
      EXPECT_LT(predict(Coll::kAllreduce, "recursive_doubling", n, 8, p),
                predict(Coll::kAllreduce, "rabenseifner", n, 8, p))
          << what;
      EXPECT_LT(predict(Coll::kAllreduce, "recursive_doubling", n, 8, p),
                predict(Coll::kAllreduce, "ring", n, 8, p))
          << what;
      expect_near(crossover(Coll::kAllreduce, "recursive_doubling", "rabenseifner", n, p), 2048,
                  what + " rd->rabenseifner vs MPICH 2048");
    }
    // Open MPI's ring rule was measured on up to 64 nodes; the ring's
    // latency grows with n (2 (n - 1) alpha), so its crossover moves up with
    // the rank count.
    const std::string what = strfmt("%g Gb/s %d ppn", net.gbit_per_s, net.ranks_per_node);
    const size_t at64 = crossover(Coll::kAllreduce, "recursive_doubling", "ring", 64, p);
    expect_near(at64, 10000, what + " n=64 rd->ring vs Open MPI 10000");
    EXPECT_GT(
        crossover(Coll::kAllreduce, "recursive_doubling", "ring", 1024, p, 4, size_t{1} << 32),
        4 * at64)
        << what;
  }
}

// MPICH bcast (Thakur et al. 2005, section 4.1; mpich_cvars.c:
// MPIR_CVAR_BCAST_SHORT_MSG_SIZE 12288, MPIR_CVAR_BCAST_LONG_MSG_SIZE
// 524288, MPIR_CVAR_BCAST_MIN_PROCS 8): binomial below 12 KiB or under 8
// processes; van de Geijn's scatter + allgather above, the allgather by
// recursive doubling up to 512 KiB and by a ring beyond. libcoll's
// scatter_allgather is the ring form (n - 1 allgather steps), so its
// crossover is MPICH's long-message one, 512 KiB, at 64 ranks; and with
// n alpha of latency it moves up with the rank count. Open MPI tuned
// (ompi_coll_tuned_bcast_intra_dec_fixed): binomial below 2048 bytes,
// split binary trees to 370728 bytes, a pipeline (chain) beyond.
TEST(PublishedCrossovers, BcastBinomialForShortScatterAllgatherForLong) {
  for (const Network& net : {Network{100, 3, 1}, Network{200, 2, 8}, Network{400, 1, 1}}) {
    const Params p = with_network(this_machine(), net);
    const std::string what = strfmt("%g Gb/s %d ppn", net.gbit_per_s, net.ranks_per_node);
    EXPECT_LT(predict(Coll::kBcast, "binomial", 64, 8, p),
              predict(Coll::kBcast, "scatter_allgather", 64, 8, p))
        << what;
    const size_t at64 = crossover(Coll::kBcast, "binomial", "scatter_allgather", 64, p);
    ASSERT_GT(at64, 0u) << what;
    EXPECT_GT(double(at64), 524288.0 / kBelow) << what << " vs MPICH 524288";
    EXPECT_LT(double(at64), 524288.0 * kBelow) << what << " vs MPICH 524288";
    const size_t at1024 =
        crossover(Coll::kBcast, "binomial", "scatter_allgather", 1024, p, 4, size_t{1} << 32);
    EXPECT_GT(at1024, 4 * at64) << what;
    // Trees beat binomial in the middle (Open MPI's split binary tree from
    // 2 KiB, on Myrinet MX): the double binary tree pipelines where
    // binomial resends. (At 400 Gb/s and 1 us, alpha / beta is 50 KB, past
    // the bound's 64x of MX's ~1 KB: not asked there.)
    if (net.gbit_per_s < 400) {
      const size_t tree = crossover(Coll::kBcast, "binomial", "tree", 64, p);
      expect_near(tree, 2048, what + " binomial->tree vs Open MPI 2048");
    }
  }
  // Few processes: binomial up to long messages (MIN_PROCS 8).
  const Params p = with_network(this_machine(), {100, 3, 1});
  EXPECT_GE(crossover(Coll::kBcast, "binomial", "scatter_allgather", 4, p), size_t{12288});
}

// NCCL (issue NVIDIA/nccl#790, #471; the 2.4 blog "Massively scale your
// deep learning training with NCCL 2.4"): the double binary tree has
// logarithmic latency and is used for small and medium messages at scale,
// the ring (linear latency, best bandwidth) for large ones. With this
// model's pipelined trees the ring keeps a bandwidth edge only at small
// rank counts; at scale the tree must win the medium sizes and the ring
// must lose the small ones by far.
TEST(PublishedCrossovers, NcclTreeForSmallAndMediumAtScaleRingLosesLatency) {
  for (const Network& net : {Network{100, 3, 8}, Network{400, 1, 8}}) {
    const Params p = with_network(this_machine(), net);
    for (int n : {1024, 8192}) {
      const std::string what = strfmt("%g Gb/s n=%d", net.gbit_per_s, n);
      EXPECT_LT(predict(Coll::kAllreduce, "tree", n, 64 * 1024, p),
                predict(Coll::kAllreduce, "ring", n, 64 * 1024, p))
          << what;
      EXPECT_LT(predict(Coll::kAllreduce, "tree", n, 1024, p),
                predict(Coll::kAllreduce, "ring", n, 1024, p) / 10)
          << what;
    }
  }
}

// Open MPI tuned (ompi_coll_tuned_alltoall_intra_dec_fixed): Bruck below
// 200-byte blocks on more than 12 processes, linear below 3000, pairwise
// above. MPICH (MPIR_CVAR_ALLTOALL_SHORT_MSG_SIZE 256): Bruck for blocks
// up to 256 bytes.
TEST(PublishedCrossovers, AlltoallBruckForSmallBlocksPairwiseForLarge) {
  for (const Network& net : {Network{100, 3, 1}, Network{200, 2, 8}}) {
    const Params p = with_network(this_machine(), net);
    const int n = 1024;
    EXPECT_LT(predict(Coll::kAlltoall, "bruck", n, 8, p),
              predict(Coll::kAlltoall, "pairwise", n, 8, p));
    expect_near(crossover(Coll::kAlltoall, "bruck", "pairwise", n, p), 256,
                strfmt("%g Gb/s bruck->pairwise vs MPICH 256 / Open MPI 200", net.gbit_per_s));
  }
}

// MPICH allgather (mpich_cvars.c: MPIR_CVAR_ALLGATHER_SHORT_MSG_SIZE 81920,
// on the total n x block): Bruck / recursive doubling below 80 KiB in all,
// the ring above.
TEST(PublishedCrossovers, AllgatherBruckForShortRingForLong) {
  const Params p = with_network(this_machine(), {100, 3, 1});
  const int n = 64;
  EXPECT_LT(predict(Coll::kAllgather, "bruck", n, 8, p),
            predict(Coll::kAllgather, "ring", n, 8, p));
  expect_near(crossover(Coll::kAllgather, "bruck", "ring", n, p) * size_t(n), 81920,
              "bruck->ring (total) vs MPICH 81920");
}

// --- the selection's use of it -------------------------------------------

TEST(ModelSelection, PastTheTunedRanksTheModelChooses) {
  const Selection s;
  const Params p = this_machine();
  for (int n : {kDefaultTuningMaxRanks + 1, 100, 1024, 65536}) {
    for (size_t b : {size_t{4}, size_t{4096}, size_t{1} << 20}) {
      for (Coll c : {Coll::kAllreduce, Coll::kBcast, Coll::kAllgather, Coll::kAlltoall}) {
        // The table samples four sizes per octave and keeps an algorithm
        // while it is within 5% of the best: at a sample (b is one here)
        // its choice costs at most 5% more than the model's best.
        const double chosen = predict(c, s.algorithm(c, n, b).name, n, b, p);
        EXPECT_LE(chosen, best(c, n, b, p).seconds * 1.05)
            << collective_info(c).name << " n=" << n << " b=" << b;
      }
    }
  }
  // Within the tuned ranks the table stays.
  const SelectionTable defaults = SelectionTable::parse(kDefaultTuning, "d");
  EXPECT_EQ(&s.algorithm(Coll::kAllreduce, 4, 8), defaults.find(Coll::kAllreduce, 4, 8)->algorithm);
  // What the model cannot key (no size every rank knows) keeps the table.
  EXPECT_STREQ(s.algorithm(Coll::kAlltoallv, 1024, 0).name, "linear");
}

TEST(ModelSelection, TuningFileWinsOverTheModelAndBoundsItsRanges) {
  const Selection s(SelectionTable::parse("allreduce 16+ 64K tree\n", "t"));
  EXPECT_STREQ(s.algorithm(Coll::kAllreduce, 1024, 1 << 20).name, "tree");
  const Choice below = s.choice(Coll::kAllreduce, 1024, 1000);
  EXPECT_LT(below.max_bytes, size_t{65536});
  EXPECT_EQ(below.algorithm, &Selection().algorithm(Coll::kAllreduce, 1024, 1000));
}

TEST(ModelSelection, ChoicesHoldOverTheirWholeRange) {
  const Selection s;
  for (int n : {9, 1000, 8192}) {
    for (size_t bytes = 0; bytes <= (size_t{1} << 34); bytes = bytes ? bytes * 3 : 1) {
      const Choice c = s.choice(Coll::kAllreduce, n, bytes);
      SCOPED_TRACE(strfmt("n=%d bytes=%zu", n, bytes));
      EXPECT_LE(c.min_bytes, bytes);
      EXPECT_GE(c.max_bytes, bytes);
      EXPECT_EQ(s.choice(Coll::kAllreduce, n, c.min_bytes).algorithm, c.algorithm);
      EXPECT_EQ(s.choice(Coll::kAllreduce, n, c.max_bytes).algorithm, c.algorithm);
      if (c.max_bytes != SIZE_MAX) {
        EXPECT_EQ(s.choice(Coll::kAllreduce, n, c.max_bytes + 1).min_bytes, c.max_bytes + 1);
      }
    }
  }
}

}  // namespace
}  // namespace coll::model
