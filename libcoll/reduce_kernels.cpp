// The reduction kernels (reduce_kernels.hpp). This file is compiled once
// per instruction set; COLL_KERNEL_TABLE names the table it defines and
// COLL_KERNEL_ISA its instruction set. Keep it free of inline functions
// from headers: the linker may keep any one build's copy of such a
// function for the whole library, and an AVX-512 copy would then run on
// CPUs without AVX-512.
#include "reduce_kernels.hpp"

#include <cstdint>
#include <type_traits>

#include "float16.hpp"

// The F16C kernels for COLL_FLOAT16 are built with the AVX2 and AVX-512
// tables only: the baseline table stays the portable scalar code that they
// are checked against. F16C is not implied by AVX2, so the table takes them
// only where the CPU has it (cpu_has_f16c). The intrinsics are always-inline (no
// out-of-line copy for the linker to share between builds).
#if defined(__x86_64__) && defined(__AVX2__)
#define COLL_F16C_KERNELS 1
#include <immintrin.h>
#endif

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
// MPI's logical operators: an operand is true when nonzero, the result is
// 1 or 0 of the operands' type. Written with bitwise operators on 0/1
// values (no short-circuit branch) so that the loops vectorise.
struct Land {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>((a != 0) & (b != 0)); }
};
struct Lor {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>((a != 0) | (b != 0)); }
};
struct Lxor {
  template <class T>
  static T apply(T a, T b) { return static_cast<T>((a != 0) ^ (b != 0)); }
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

// The 16-bit floats (float16.hpp): each element is widened to float,
// reduced by the float operator and rounded back to nearest even, so that
// every rank and every table gives the same bits (float's 24 bits are at
// least 2p + 2 for both formats' p of 11 and 8, so for SUM and PROD the
// double rounding still gives the correctly rounded result).
// A NaN operand or result gives Format::kQuietNan, whatever the payloads:
// which payload IEEE 754 arithmetic passes on depends on the operand order,
// and the algorithms may combine ranks in either order.
template <class Format, class Op>
struct Widened {
  static uint16_t apply(uint16_t a, uint16_t b) {
    const float x = Format::to_float(a), y = Format::to_float(b);
    const float r = Op::apply(x, y);
    if (x != x || y != y || r != r) return Format::kQuietNan;
    return Format::from_float(r);
  }
};

#if defined(COLL_F16C_KERNELS)
// Eight COLL_FLOAT16 elements at a time, with the same semantics as
// Widened<Float16, Op>: the float operations are the scalar ones (MINPS and
// MAXPS return their second operand unless the first compares less /
// greater, which is Min::apply(x, y) = y < x ? y : x with y first), and
// VCVTPS2PH with _MM_FROUND_TO_NEAREST_INT rounds to nearest even as
// Float16::from_float does.
template <class Op>
__attribute__((target("f16c"))) __m128i reduce8_f16c(__m128i a, __m128i b) {
  const __m256 x = _mm256_cvtph_ps(a), y = _mm256_cvtph_ps(b);
  __m256 r;
  if constexpr (std::is_same_v<Op, Sum>)
    r = _mm256_add_ps(x, y);
  else if constexpr (std::is_same_v<Op, Prod>)
    r = _mm256_mul_ps(x, y);
  else if constexpr (std::is_same_v<Op, Min>)
    r = _mm256_min_ps(y, x);
  else
    r = _mm256_max_ps(y, x);
  const __m256 nan =
      _mm256_or_ps(_mm256_cmp_ps(x, y, _CMP_UNORD_Q), _mm256_cmp_ps(r, r, _CMP_UNORD_Q));
  r = _mm256_blendv_ps(r, _mm256_set1_ps(Float16::to_float(Float16::kQuietNan)), nan);
  return _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT);
}

// The tail goes through the same eight-lane code, padded, so that no
// element takes another path. dst may equal a or b: each group is loaded
// before it is stored.
template <class Op>
__attribute__((target("f16c"))) void reduce_f16c(void* dst, const void* a, const void* b,
                                                 size_t count) {
  auto* d = static_cast<uint16_t*>(dst);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i r = reduce8_f16c<Op>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)),
                                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), r);
  }
  if (i == count) return;
  uint16_t tx[8] = {}, ty[8] = {}, td[8];
  __builtin_memcpy(tx, x + i, (count - i) * sizeof(uint16_t));
  __builtin_memcpy(ty, y + i, (count - i) * sizeof(uint16_t));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(td),
                   reduce8_f16c<Op>(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tx)),
                                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(ty))));
  __builtin_memcpy(d + i, td, (count - i) * sizeof(uint16_t));
}
#endif

// MAXLOC / MINLOC on a value-index pair P (coll_float_int_t, ...): the pair
// with the better value wins, and of equal (or unordered: NaN) values the
// lower index (MPI's rule). The winner is copied whole, padding included,
// so the result is the bits of one of the operands. Elements are copied in
// and out with memcpy: a pair in a window slot or a user's buffer need not
// be aligned as its struct (long double's is 16, which SSE moves assume).
template <class P, bool kMax>
void reduce_loc(void* dst, const void* a, const void* b, size_t count) {
  auto* d = static_cast<char*>(dst);
  const auto* x = static_cast<const char*>(a);
  const auto* y = static_cast<const char*>(b);
  for (size_t i = 0; i < count; ++i) {
    P p, q;
    __builtin_memcpy(&p, x + i * sizeof(P), sizeof(P));
    __builtin_memcpy(&q, y + i * sizeof(P), sizeof(P));
    const bool q_better = kMax ? p.value < q.value : q.value < p.value;
    const bool p_better = kMax ? q.value < p.value : p.value < q.value;
    const bool take_q = q_better || (!p_better && q.index < p.index);
    __builtin_memcpy(d + i * sizeof(P), take_q ? &q : &p, sizeof(P));
  }
}

template <class P>
void fill_pair(ReduceFn* row) {
  row[COLL_MAXLOC] = reduce_loc<P, true>;
  row[COLL_MINLOC] = reduce_loc<P, false>;
}

template <class Format>
void fill_widened(ReduceFn* row) {
#if defined(COLL_F16C_KERNELS)
  if constexpr (std::is_same_v<Format, Float16>) {
    if (cpu_has_f16c()) {
      row[COLL_SUM] = reduce_f16c<Sum>;
      row[COLL_PROD] = reduce_f16c<Prod>;
      row[COLL_MIN] = reduce_f16c<Min>;
      row[COLL_MAX] = reduce_f16c<Max>;
      return;
    }
  }
#endif
  row[COLL_SUM] = reduce<uint16_t, Widened<Format, Sum>>;
  row[COLL_PROD] = reduce<uint16_t, Widened<Format, Prod>>;
  row[COLL_MIN] = reduce<uint16_t, Widened<Format, Min>>;
  row[COLL_MAX] = reduce<uint16_t, Widened<Format, Max>>;
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
    row[COLL_LAND] = reduce<T, Land>;
    row[COLL_LOR] = reduce<T, Lor>;
    row[COLL_LXOR] = reduce<T, Lxor>;
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
  fill_widened<Float16>(t.fn[COLL_FLOAT16]);
  fill_widened<BFloat16>(t.fn[COLL_BFLOAT16]);
  fill_pair<coll_float_int_t>(t.fn[COLL_FLOAT_INT]);
  fill_pair<coll_double_int_t>(t.fn[COLL_DOUBLE_INT]);
  fill_pair<coll_long_int_t>(t.fn[COLL_LONG_INT]);
  fill_pair<coll_2int_t>(t.fn[COLL_2INT]);
  fill_pair<coll_short_int_t>(t.fn[COLL_SHORT_INT]);
  fill_pair<coll_long_double_int_t>(t.fn[COLL_LONG_DOUBLE_INT]);
  return t;
}

}  // namespace

const ReduceTable& COLL_KERNEL_TABLE() {
  static const ReduceTable table = make_table();
  return table;
}

}  // namespace coll
