// The reduction kernels (reduce_kernels.hpp). This file is compiled once
// per instruction set; COLL_KERNEL_TABLE names the table it defines and
// COLL_KERNEL_ISA its instruction set. Keep it free of inline functions
// from headers: the linker may keep any one build's copy of such a
// function for the whole library, and an AVX-512 copy would then run on
// CPUs without AVX-512.
#include "reduce_kernels.hpp"

#include <cstdint>
#include <type_traits>

#ifndef COLL_KERNEL_TABLE
#error "compile with -DCOLL_KERNEL_TABLE=<function name> -DCOLL_KERNEL_ISA=<name>"
#endif

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

// Three loops, so that each vectorises without a run-time overlap check:
// in place (dst == a, the common case inside the algorithms), dst == b, and
// disjoint.
template <class T, class Op>
void reduce(void* dst, const void* a, const void* b, size_t count) {
  T* __restrict d = static_cast<T*>(dst);
  if (dst == a) {
    const T* __restrict y = static_cast<const T*>(b);
    for (size_t i = 0; i < count; ++i) d[i] = Op::apply(d[i], y[i]);
  } else if (dst == b) {
    const T* __restrict x = static_cast<const T*>(a);
    for (size_t i = 0; i < count; ++i) d[i] = Op::apply(x[i], d[i]);
  } else {
    const T* __restrict x = static_cast<const T*>(a);
    const T* __restrict y = static_cast<const T*>(b);
    for (size_t i = 0; i < count; ++i) d[i] = Op::apply(x[i], y[i]);
  }
}

template <class T>
void fill(ReduceFn* row) {
  row[COLL_SUM] = reduce<T, Sum>;
  row[COLL_PROD] = reduce<T, Prod>;
  row[COLL_MIN] = reduce<T, Min>;
  row[COLL_MAX] = reduce<T, Max>;
  if constexpr (std::is_integral_v<T>) {
    row[COLL_BAND] = reduce<T, Band>;
    row[COLL_BOR] = reduce<T, Bor>;
    row[COLL_BXOR] = reduce<T, Bxor>;
  }
}

ReduceTable make_table() {
  ReduceTable t{COLL_KERNEL_ISA, {}};
  fill<int8_t>(t.fn[COLL_INT8]);
  fill<int16_t>(t.fn[COLL_INT16]);
  fill<int32_t>(t.fn[COLL_INT32]);
  fill<int64_t>(t.fn[COLL_INT64]);
  fill<uint8_t>(t.fn[COLL_UINT8]);
  fill<uint16_t>(t.fn[COLL_UINT16]);
  fill<uint32_t>(t.fn[COLL_UINT32]);
  fill<uint64_t>(t.fn[COLL_UINT64]);
  fill<float>(t.fn[COLL_FLOAT]);
  fill<double>(t.fn[COLL_DOUBLE]);
  return t;
}

}  // namespace

const ReduceTable& COLL_KERNEL_TABLE() {
  static const ReduceTable table = make_table();
  return table;
}

}  // namespace coll
