#include "datatype.hpp"

#include <cstdint>
#include <type_traits>

namespace coll {
namespace {

// Integer SUM and PROD are computed in an unsigned type at least as wide
// as int so that overflow wraps (two's complement) instead of being
// undefined behaviour; small types would otherwise be promoted to int.
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned,
                                std::make_unsigned_t<T>>;

struct Sum {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
    else
      return a + b;
  }
};
struct Prod {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>)
      return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
    else
      return a * b;
  }
};
struct Min {
  template <class T>
  static T apply(T a, T b) { return b < a ? b : a; }
};
struct Max {
  template <class T>
  static T apply(T a, T b) { return a < b ? b : a; }
};
struct Band {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>(a & b); }
};
struct Bor {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>(a | b); }
};
struct Bxor {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>(a ^ b); }
};

template <class T, class Op>
void reduce(void* dst, const void* a, const void* b, size_t count) {
  T* d = static_cast<T*>(dst);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < count; ++i) d[i] = Op::apply(x[i], y[i]);
}

template <class T>
ReduceFn for_op(int op) {
  switch (op) {
    case COLL_SUM: return reduce<T, Sum>;
    case COLL_PROD: return reduce<T, Prod>;
    case COLL_MIN: return reduce<T, Min>;
    case COLL_MAX: return reduce<T, Max>;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case COLL_BAND: return reduce<T, Band>;
      case COLL_BOR: return reduce<T, Bor>;
      case COLL_BXOR: return reduce<T, Bxor>;
      default: break;
    }
  }
  return nullptr;
}

struct TypeInfo {
  const char* name;
  size_t size;
  bool integer;
};

constexpr TypeInfo kTypes[COLL_DATATYPE_COUNT] = {
    {"int8", 1, true},    {"int16", 2, true},   {"int32", 4, true},
    {"int64", 8, true},   {"uint8", 1, true},   {"uint16", 2, true},
    {"uint32", 4, true},  {"uint64", 8, true},  {"float", 4, false},
    {"double", 8, false},
};

constexpr const char* kOps[COLL_OP_COUNT] = {"sum", "prod", "min", "max",
                                             "band", "bor", "bxor"};

}  // namespace

bool valid_datatype(int datatype) {
  return datatype >= 0 && datatype < COLL_DATATYPE_COUNT;
}
bool valid_op(int op) { return op >= 0 && op < COLL_OP_COUNT; }
bool is_integer_type(int datatype) {
  return valid_datatype(datatype) && kTypes[datatype].integer;
}
size_t datatype_size(int datatype) {
  return valid_datatype(datatype) ? kTypes[datatype].size : 0;
}
const char* datatype_name(int datatype) {
  return valid_datatype(datatype) ? kTypes[datatype].name : "unknown";
}
const char* op_name(int op) { return valid_op(op) ? kOps[op] : "unknown"; }

ReduceFn reduce_function(int datatype, int op) {
  switch (datatype) {
    case COLL_INT8: return for_op<int8_t>(op);
    case COLL_INT16: return for_op<int16_t>(op);
    case COLL_INT32: return for_op<int32_t>(op);
    case COLL_INT64: return for_op<int64_t>(op);
    case COLL_UINT8: return for_op<uint8_t>(op);
    case COLL_UINT16: return for_op<uint16_t>(op);
    case COLL_UINT32: return for_op<uint32_t>(op);
    case COLL_UINT64: return for_op<uint64_t>(op);
    case COLL_FLOAT: return for_op<float>(op);
    case COLL_DOUBLE: return for_op<double>(op);
    default: return nullptr;
  }
}

}  // namespace coll
