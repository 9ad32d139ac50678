// Datatypes and reduction operators, type-erased for the algorithms: an
// algorithm sees only an element size and a ReduceFn.
#pragma once

#include <coll/coll.h>

#include <cstddef>

namespace coll {

// dst[i] = a[i] op b[i] for i < count. dst may alias a or b.
using ReduceFn = void (*)(void* dst, const void* a, const void* b,
                          size_t count);

bool valid_datatype(int datatype);
bool valid_op(int op);
bool is_integer_type(int datatype);
size_t datatype_size(int datatype);  // 0 for an unknown datatype
const char* datatype_name(int datatype);
const char* op_name(int op);

// The reduction for (datatype, op), or nullptr when the pair is invalid
// (unknown, or a bitwise op on a floating type).
ReduceFn reduce_function(int datatype, int op);

}  // namespace coll
