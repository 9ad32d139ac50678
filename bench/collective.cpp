#include "collective.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace bench {
namespace {

using M = Movement;
using L = Layout;
using R = Receivers;
using F = Folded;
using B = BusFactor;

// One row per collective, in enum order (checked below). The sizes follow
// OSU 7.x, the bus-bandwidth factors nccl-tests (README.md explains each).
// clang-format off
constexpr CollectiveTraits kCollectives[] = {
// {collective, name, title,
//  movement      layout          receivers         folded          rooted bus factor}
  {Collective::allreduce, "allreduce", "Allreduce",
   M::reduction, L::vector,      R::all,           F::all,         false, B::twice_all_but_own},
  {Collective::bcast, "bcast", "Bcast",
   M::broadcast, L::vector,      R::all,           F::all,         true,  B::one},
  {Collective::barrier, "barrier", "Barrier",
   M::none,      L::none,        R::all,           F::all,         false, B::none},
  {Collective::reduce, "reduce", "Reduce",
   M::reduction, L::vector,      R::root,          F::all,         true,  B::one},
  {Collective::allgather, "allgather", "Allgather",
   M::gather,    L::blocks,      R::all,           F::all,         false, B::all_but_own},
  {Collective::allgatherv, "allgatherv", "Allgatherv",
   M::gather,    L::blocks,      R::all,           F::all,         false, B::all_but_own},
  {Collective::reduce_scatter_block, "reduce_scatter_block", "Reduce_scatter_block",
   M::reduction, L::split_equal, R::all,           F::all,         false, B::all_but_own},
  {Collective::reduce_scatter, "reduce_scatter", "Reduce_scatter",
   M::reduction, L::split,       R::all,           F::all,         false, B::all_but_own},
  {Collective::gather, "gather", "Gather",
   M::gather,    L::blocks,      R::root,          F::all,         true,  B::all_but_own},
  {Collective::gatherv, "gatherv", "Gatherv",
   M::gather,    L::blocks,      R::root,          F::all,         true,  B::all_but_own},
  {Collective::scatter, "scatter", "Scatter",
   M::scatter,   L::blocks,      R::all,           F::all,         true,  B::all_but_own},
  {Collective::scatterv, "scatterv", "Scatterv",
   M::scatter,   L::blocks,      R::all,           F::all,         true,  B::all_but_own},
  {Collective::alltoall, "alltoall", "Alltoall",
   M::exchange,  L::blocks,      R::all,           F::all,         false, B::all_but_own},
  {Collective::alltoallv, "alltoallv", "Alltoallv",
   M::exchange,  L::blocks,      R::all,           F::all,         false, B::all_but_own},
  {Collective::scan, "scan", "Scan",
   M::reduction, L::vector,      R::all,           F::up_to_self,  false, B::one},
  {Collective::exscan, "exscan", "Exscan",
   M::reduction, L::vector,      R::all_but_first, F::before_self, false, B::one},
};
// clang-format on

constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kCollectives); ++i) {
    if (static_cast<size_t>(kCollectives[i].collective) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kCollectives: one row per Collective, in enum order");
static_assert(kCollectives[std::size(kCollectives) - 1].collective == Collective::exscan,
              "a Collective has no row");

}  // namespace

const CollectiveTraits& traits(Collective collective) {
  const auto index = static_cast<size_t>(collective);
  if (index >= std::size(kCollectives)) throw std::invalid_argument("unknown collective");
  return kCollectives[index];
}

std::span<const CollectiveTraits> all_collectives() { return kCollectives; }

const char* collective_name(Collective collective) { return traits(collective).name; }

const char* collective_title(Collective collective) { return traits(collective).title; }

std::optional<Collective> parse_collective(std::string_view name) {
  for (const CollectiveTraits& row : kCollectives) {
    if (name == row.name) return row.collective;
  }
  return std::nullopt;
}

std::string all_collective_names() {
  std::string names;
  for (const CollectiveTraits& row : kCollectives) {
    if (!names.empty()) names += ", ";
    names += row.name;
  }
  return names;
}

double bus_bandwidth_factor(Collective collective, int ranks) {
  if (ranks <= 0) return 0.0;
  const double all_but_own = static_cast<double>(ranks - 1) / ranks;
  switch (traits(collective).bus_factor) {
    case B::none:
      return 0.0;
    case B::one:
      return 1.0;
    case B::all_but_own:
      return all_but_own;
    case B::twice_all_but_own:
      return 2.0 * all_but_own;
  }
  return 0.0;
}

double algorithm_bytes(Collective collective, size_t bytes, int ranks) {
  const bool whole_buffer = traits(collective).layout == L::blocks;
  return static_cast<double>(bytes) * (whole_buffer ? std::max(ranks, 0) : 1);
}

bool has_message(Collective collective) { return traits(collective).movement != M::none; }

bool takes_op(Collective collective) { return traits(collective).movement == M::reduction; }

bool takes_root(Collective collective) { return traits(collective).rooted; }

size_t buffer_bytes(Collective collective, size_t bytes, int ranks) {
  return traits(collective).layout == L::blocks ? bytes * static_cast<size_t>(std::max(ranks, 1))
                                                : bytes;
}

Message make_message(Collective collective, std::byte* send, std::byte* recv, size_t count,
                     int ranks) {
  Message message{send, recv, count, {}, {}};
  const Layout layout = traits(collective).layout;
  if (layout == L::none || layout == L::vector || ranks <= 0) return message;
  const auto n = static_cast<size_t>(ranks);
  size_t displ = 0;
  for (size_t rank = 0; rank < n; ++rank) {
    size_t block = count;  // Layout::blocks
    if (layout == L::split_equal) block = count / n;
    if (layout == L::split) block = count / n + (rank < count % n ? 1 : 0);
    message.counts.push_back(block);
    message.displs.push_back(displ);
    displ += block;
  }
  return message;
}

}  // namespace bench
