// What the benchmark measures: a collective, the workload it carries
// (datatype, operator, root) and the buffers of one message size.
#pragma once

#include <coll/coll.h>

#include <cstddef>
#include <optional>
#include <string_view>

namespace bench {

// barrier is timed as osu_barrier times it: no message, no size sweep.
enum class Collective { allreduce, bcast, barrier };

// "allreduce": the name on the command line, in CSV/JSON and for
// coll_comm_last_algorithm().
const char* collective_name(Collective collective);
// "Allreduce": the name in the table title.
const char* collective_title(Collective collective);
std::optional<Collective> parse_collective(std::string_view name);

// Bus bandwidth = algorithm bandwidth x this factor, as nccl-tests defines it
// (doc/PERFORMANCE.md): the fraction of the links' capacity the collective
// uses, comparable across rank counts. Allreduce moves 2(n-1)/n of the
// message through each rank, broadcast moves it once; barrier moves none (0).
double bus_bandwidth_factor(Collective collective, int ranks);

// False for barrier: no message, so no size sweep, bandwidth or validation.
bool has_message(Collective collective);

// Fixed for a whole run of the benchmark.
struct Workload {
  coll_datatype_t datatype = COLL_FLOAT;
  coll_op_t op = COLL_SUM;  // allreduce only
  int root = 0;             // bcast only
};

// One message size. Allreduce reduces send into recv; bcast broadcasts send
// from the root (recv is unused), so one buffer is the whole message as in
// osu_bcast. Barrier carries no message (count 0).
struct Message {
  std::byte* send = nullptr;
  std::byte* recv = nullptr;
  size_t count = 0;  // elements of Workload::datatype
};

}  // namespace bench
