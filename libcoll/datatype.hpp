// Datatypes and reduction operators, type-erased for the algorithms: an
// algorithm sees only an element size and a ReduceFn.
#pragma once

#include <coll/coll.h>

#include <cstddef>
#include <string>
#include <vector>

#include "reduce_kernels.hpp"

namespace coll {

// In line (every call checks its datatype; a call into the library for a
// range check and a table read showed on a small collective).
inline bool valid_datatype(int datatype) { return datatype >= 0 && datatype < COLL_DATATYPE_COUNT; }
inline bool valid_op(int op) { return op >= 0 && op < COLL_OP_COUNT; }
bool is_integer_type(int datatype);
namespace detail {
inline constexpr size_t kDatatypeSizes[COLL_DATATYPE_COUNT] = {1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 2, 2};
}
// 0 for an unknown datatype.
inline size_t datatype_size(int datatype) {
  return valid_datatype(datatype) ? detail::kDatatypeSizes[datatype] : 0;
}
const char* datatype_name(int datatype);
const char* op_name(int op);

// The reduction for (datatype, op), or nullptr when the pair is invalid
// (unknown, or a bitwise op on a floating type).
ReduceFn reduce_function(int datatype, int op);

// The kernel sets this build has and this CPU runs, narrowest first
// ("baseline", then "avx2", "avx512" where available).
std::vector<std::string> reduce_kernel_sets();
// Makes reduce_function() return kernels of the set `isa` ("" or "auto":
// the widest); throws coll::Error(COLL_ERR_INVALID_ARG) for a set that is
// not in reduce_kernel_sets(). Set at coll_init (COLL_REDUCE_KERNELS).
void select_reduce_kernels(const std::string& isa);
const char* reduce_kernels_name();

}  // namespace coll
