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
// The value-index pairs (COLL_FLOAT_INT ... COLL_LONG_DOUBLE_INT).
inline bool is_pair_type(int datatype) {
  return datatype >= COLL_FLOAT_INT && datatype <= COLL_LONG_DOUBLE_INT;
}
namespace detail {
inline constexpr size_t kDatatypeSizes[COLL_DATATYPE_COUNT] = {
    1, 2, 4, 8, 1, 2, 4, 8, 4, 8, 2, 2,
    sizeof(coll_float_int_t), sizeof(coll_double_int_t), sizeof(coll_long_int_t),
    sizeof(coll_2int_t), sizeof(coll_short_int_t), sizeof(coll_long_double_int_t)};
}
// 0 for an unknown datatype.
inline size_t datatype_size(int datatype) {
  return valid_datatype(datatype) ? detail::kDatatypeSizes[datatype] : 0;
}
const char* datatype_name(int datatype);
const char* op_name(int op);
// Why reduce_function(datatype, op) is nullptr for a valid datatype and
// op: the rule broken ("integer types only", ...), for messages.
const char* op_rule(int datatype, int op);

// What an algorithm calls: dst = a op b for count elements, `a` the
// operand of the lower ranks. dst may alias a or b exactly. Either a
// built-in kernel, or a user's function (coll_op_create), which computes
// inout = in op inout and so needs its higher operand in the destination.
struct Reducer {
  ReduceFn fn = nullptr;
  coll_user_fn* user = nullptr;
  void* ctx = nullptr;
  int datatype = 0;
  size_t elem_size = 0;

  explicit operator bool() const { return fn || user; }
  void operator()(void* dst, const void* a, const void* b, size_t count) const {
    if (fn) [[likely]]
      fn(dst, a, b, count);
    else
      apply_user(dst, a, b, count);
  }

 private:
  void apply_user(void* dst, const void* a, const void* b, size_t count) const;
};

// The reduction for (datatype, op), or nullptr when the pair is invalid
// (unknown, a bitwise or logical op on a floating type, MAXLOC / MINLOC on
// anything but a pair type, any other op on a pair type).
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
