#include "collective.hpp"

namespace bench {

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::allreduce:
      return "allreduce";
    case Collective::bcast:
      return "bcast";
    case Collective::barrier:
      return "barrier";
  }
  return "unknown";
}

const char* collective_title(Collective collective) {
  switch (collective) {
    case Collective::allreduce:
      return "Allreduce";
    case Collective::bcast:
      return "Bcast";
    case Collective::barrier:
      return "Barrier";
  }
  return "Unknown";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (Collective collective : {Collective::allreduce, Collective::bcast, Collective::barrier}) {
    if (name == collective_name(collective)) return collective;
  }
  return std::nullopt;
}

double bus_bandwidth_factor(Collective collective, int ranks) {
  switch (collective) {
    case Collective::allreduce:
      return ranks > 0 ? 2.0 * (ranks - 1) / ranks : 0.0;
    case Collective::bcast:
      return 1.0;
    case Collective::barrier:
      return 0.0;
  }
  return 0.0;
}

bool has_message(Collective collective) { return collective != Collective::barrier; }

}  // namespace bench
