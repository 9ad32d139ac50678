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

// 1 + (shift + k) mod modulus for k = (i + t) mod kPeriod.
template <typename T>
Pattern<T> input_pattern(size_t shift, size_t modulus = ValueCheck::kPeriod) {
  Pattern<T> pattern{};
  for (size_t k = 0; k < pattern.size(); ++k) {
    pattern[k] = static_cast<T>(1 + (shift + k) % modulus);
  }
  return pattern;
}

// Rank r's values are shifted by 3r: 3 is odd, so the patterns of eight
// consecutive ranks differ, and a block from the wrong rank fails.
size_t rank_shift(int rank) { return 3 * static_cast<size_t>(rank); }

// Alltoall's block from rank `from` to rank `to`: shifted by 3 from + to,
// so that the blocks a rank sends differ (by to), and so do the blocks it
// receives (by 3 from).
size_t exchange_shift(int from, int to) { return rank_shift(from) + static_cast<size_t>(to); }

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
      case COLL_LAND:
        return static_cast<T>(x != 0 && y != 0);
      case COLL_LOR:
        return static_cast<T>(x != 0 || y != 0);
      case COLL_LXOR:
        return static_cast<T>((x != 0) != (y != 0));
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

// The inputs of ranks [first, end) combined (end > first).
template <typename T>
Pattern<T> reduction_pattern(coll_op_t op, int first, int end) {
  Pattern<T> result = input_pattern<T>(rank_shift(first), value_modulus(op));
  for (int rank = first + 1; rank < end; ++rank) {
    const Pattern<T> input = input_pattern<T>(rank_shift(rank), value_modulus(op));
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

template <typename T>
std::byte* block_at(std::byte* buffer, size_t displ) {
  return buffer + displ * sizeof(T);
}

// Fills block j of the message's layout with the pattern shifted by
// shift_of(j).
template <typename T, typename ShiftOf>
void fill_blocks(std::byte* buffer, const Message& message, ShiftOf shift_of, size_t iteration) {
  for (size_t j = 0; j < message.counts.size(); ++j) {
    fill(block_at<T>(buffer, message.displs[j]), message.counts[j],
         input_pattern<T>(shift_of(static_cast<int>(j))), iteration);
  }
}

template <typename T, typename ShiftOf>
bool blocks_match(std::byte* buffer, const Message& message, ShiftOf shift_of, size_t iteration) {
  for (size_t j = 0; j < message.counts.size(); ++j) {
    if (!matches(block_at<T>(buffer, message.displs[j]), message.counts[j],
                 input_pattern<T>(shift_of(static_cast<int>(j))), iteration)) {
      return false;
    }
  }
  return true;
}

// reduce_scatter(_block): rank r's result is block r of the vector.
bool splits_result(Collective collective) {
  const Layout layout = traits(collective).layout;
  return layout == Layout::split || layout == Layout::split_equal;
}

size_t total_count(const Message& message) {
  size_t total = 0;
  for (size_t count : message.counts) total += count;
  return total;
}

}  // namespace

ValueCheck::ValueCheck(const Workload& workload, int rank, int ranks)
    : workload_(workload), rank_(rank), ranks_(ranks) {}

bool ValueCheck::receives(Collective collective) const {
  switch (traits(collective).receivers) {
    case Receivers::all:
      return true;
    case Receivers::root:
      return rank_ == workload_.root;
    case Receivers::all_but_first:
      return rank_ != 0;
  }
  return false;
}

void ValueCheck::prepare(Collective collective, const Message& message, size_t iteration) const {
  const CollectiveTraits& info = traits(collective);
  const bool receiver = receives(collective);
  const bool root = rank_ == workload_.root;
  const coll_datatype_t datatype = workload_.datatype;
  visit_datatype(datatype, [&]<typename T>(TypeTag<T>) {
    switch (info.movement) {
      case Movement::none:
        break;
      case Movement::reduction:
        fill(message.send, message.count,
             input_pattern<T>(rank_shift(rank_), value_modulus(workload_.op)), iteration);
        if (receiver) poison(message.recv, result_count(collective, message), datatype);
        break;
      case Movement::broadcast:
        if (root) {
          fill(message.send, message.count, input_pattern<T>(rank_shift(rank_)), iteration);
        } else {
          poison(message.send, message.count, datatype);
        }
        break;
      case Movement::gather:
        fill(message.send, message.count, input_pattern<T>(rank_shift(rank_)), iteration);
        if (receiver) poison(message.recv, total_count(message), datatype);
        break;
      case Movement::scatter:
        // The root's block j holds what rank j must receive.
        if (root) fill_blocks<T>(message.send, message, rank_shift, iteration);
        poison(message.recv, message.count, datatype);
        break;
      case Movement::exchange:
        fill_blocks<T>(
            message.send, message, [&](int to) { return exchange_shift(rank_, to); }, iteration);
        poison(message.recv, total_count(message), datatype);
        break;
    }
  });
}

bool ValueCheck::verify(Collective collective, const Message& message, size_t iteration) const {
  const CollectiveTraits& info = traits(collective);
  if (!receives(collective)) return true;  // nothing this rank must hold
  return visit_datatype(workload_.datatype, [&]<typename T>(TypeTag<T>) {
    switch (info.movement) {
      case Movement::none:
        return true;
      case Movement::reduction: {
        // Ranks 0..end-1: every rank's input, or a prefix for the scans.
        const int end = info.folded == Folded::all          ? ranks_
                        : info.folded == Folded::up_to_self ? rank_ + 1
                                                            : rank_;
        // reduce_scatter: this rank's block, at its place in the vector.
        const size_t offset =
            splits_result(collective) ? message.displs[static_cast<size_t>(rank_)] : 0;
        return matches(message.recv, result_count(collective, message),
                       reduction_pattern<T>(workload_.op, 0, end), iteration + offset);
      }
      case Movement::broadcast:
        // The root's buffer must come back unchanged too.
        return matches(message.send, message.count, input_pattern<T>(rank_shift(workload_.root)),
                       iteration);
      case Movement::gather:
        return blocks_match<T>(message.recv, message, rank_shift, iteration);
      case Movement::scatter:
        return matches(message.recv, message.count, input_pattern<T>(rank_shift(rank_)), iteration);
      case Movement::exchange:
        return blocks_match<T>(
            message.recv, message, [&](int from) { return exchange_shift(from, rank_); },
            iteration);
    }
    return false;
  });
}

size_t ValueCheck::result_count(Collective collective, const Message& message) const {
  if (splits_result(collective)) {
    return message.counts[static_cast<size_t>(rank_)];
  }
  return message.count;
}

}  // namespace bench
