// The compiled-in selection table (format: selection.hpp). Provisional
// until measured.
#include "selection.hpp"

namespace coll {

const char* const kDefaultTuning = R"(
# collective  ranks  min_bytes  algorithm
allreduce     *      0          ring
bcast         *      0          ring
)";

}  // namespace coll
