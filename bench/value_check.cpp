#include "value_check.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "datatypes.hpp"

namespace bench {
namespace {

template <typename T>
using Pattern = std::array<T, ValueCheck::kPeriod>;

// Products of values in {1, 2} are powers of two: exact in every datatype.
size_t value_modulus(coll_op_t op) { return op == COLL_PROD ? 2 : ValueCheck::kPeriod; }

// v(rank, k) for k = (i + t) mod kPeriod.
template <typename T>
Pattern<T> input_pattern(int rank, size_t modulus) {
  Pattern<T> pattern{};
  for (size_t k = 0; k < pattern.size(); ++k) {
    pattern[k] = static_cast<T>(1 + (3 * static_cast<size_t>(rank) + k) % modulus);
  }
  return pattern;
}

// a op b in T, with the wrap-around of the library's integer SUM and PROD:
// computed in uint64_t, where overflow is defined, then narrowed (modular
// since C++20).
template <typename T>
T reduce(coll_op_t op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const auto x = static_cast<uint64_t>(a);
    const auto y = static_cast<uint64_t>(b);
    switch (op) {
      case COLL_SUM:
        return static_cast<T>(x + y);
      case COLL_PROD:
        return static_cast<T>(x * y);
      case COLL_BAND:
        return static_cast<T>(x & y);
      case COLL_BOR:
        return static_cast<T>(x | y);
      case COLL_BXOR:
        return static_cast<T>(x ^ y);
      default:
        break;
    }
  } else {
    switch (op) {
      case COLL_SUM:
        return a + b;
      case COLL_PROD:
        return a * b;
      default:
        break;
    }
  }
  if (op == COLL_MIN) return b < a ? b : a;
  if (op == COLL_MAX) return a < b ? b : a;
  throw std::invalid_argument(std::string("operator ") + op_name(op) +
                              " does not apply to this datatype");
}

template <typename T>
Pattern<T> allreduce_pattern(coll_op_t op, int ranks) {
  Pattern<T> result = input_pattern<T>(0, value_modulus(op));
  for (int rank = 1; rank < ranks; ++rank) {
    const Pattern<T> input = input_pattern<T>(rank, value_modulus(op));
    for (size_t k = 0; k < result.size(); ++k) {
      result[k] = reduce(op, result[k], input[k]);
    }
  }
  return result;
}

template <typename T>
void fill(std::byte* buffer, size_t count, const Pattern<T>& pattern, size_t iteration) {
  T* elements = reinterpret_cast<T*>(buffer);
  for (size_t i = 0; i < count; ++i) {
    elements[i] = pattern[(i + iteration) % ValueCheck::kPeriod];
  }
}

template <typename T>
bool matches(const std::byte* buffer, size_t count, const Pattern<T>& pattern, size_t iteration) {
  const T* elements = reinterpret_cast<const T*>(buffer);
  for (size_t i = 0; i < count; ++i) {
    if (elements[i] != pattern[(i + iteration) % ValueCheck::kPeriod]) {
      return false;
    }
  }
  return true;
}

void poison(std::byte* buffer, size_t count, coll_datatype_t datatype) {
  std::memset(buffer, ValueCheck::kPoison, count * coll_datatype_size(datatype));
}

}  // namespace

ValueCheck::ValueCheck(const Workload& workload, int rank, int ranks)
    : workload_(workload), rank_(rank), ranks_(ranks) {}

void ValueCheck::prepare(Collective collective, const Message& message, size_t iteration) const {
  visit_datatype(workload_.datatype, [&]<typename T>(TypeTag<T>) {
    switch (collective) {
      case Collective::allreduce:
        fill(message.send, message.count, input_pattern<T>(rank_, value_modulus(workload_.op)),
             iteration);
        poison(message.recv, message.count, workload_.datatype);
        break;
      case Collective::bcast:
        if (rank_ == workload_.root) {
          fill(message.send, message.count, input_pattern<T>(workload_.root, kPeriod), iteration);
        } else {
          poison(message.send, message.count, workload_.datatype);
        }
        break;
      case Collective::barrier:
        break;  // no message
    }
  });
}

bool ValueCheck::verify(Collective collective, const Message& message, size_t iteration) const {
  return visit_datatype(workload_.datatype, [&]<typename T>(TypeTag<T>) {
    switch (collective) {
      case Collective::allreduce:
        return matches(message.recv, message.count, allreduce_pattern<T>(workload_.op, ranks_),
                       iteration);
      case Collective::bcast:
        // The root's buffer must come back unchanged too.
        return matches(message.send, message.count, input_pattern<T>(workload_.root, kPeriod),
                       iteration);
      case Collective::barrier:
        return true;  // no message
    }
    return false;
  });
}

}  // namespace bench
