#include "datatypes.hpp"

#include <array>

namespace bench {
namespace {

constexpr std::array<const char*, COLL_DATATYPE_COUNT> kDatatypeNames = {
    "int8",      "int16",      "int32",    "int64",   "uint8",   "uint16",
    "uint32",    "uint64",     "float",    "double",  "float16", "bfloat16",
    "float_int", "double_int", "long_int", "2int",    "short_int", "long_double_int"};
static_assert(kDatatypeNames.back() != nullptr, "a name for every datatype");

constexpr std::array<const char*, COLL_OP_COUNT> kOpNames = {
    "sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "lxor", "maxloc", "minloc"};
static_assert(kOpNames.back() != nullptr, "a name for every operator");

// The names at the indices that keep(index) accepts.
template <size_t N, typename Keep>
std::string join(const std::array<const char*, N>& names, Keep keep) {
  std::string joined;
  for (size_t i = 0; i < N; ++i) {
    if (!keep(i)) continue;
    if (!joined.empty()) joined += ", ";
    joined += names[i];
  }
  return joined;
}

}  // namespace

const char* datatype_name(coll_datatype_t datatype) {
  const auto index = static_cast<size_t>(datatype);
  return index < kDatatypeNames.size() ? kDatatypeNames[index] : "unknown";
}

std::optional<coll_datatype_t> parse_datatype(std::string_view name) {
  for (size_t i = 0; i < kDatatypeNames.size(); ++i) {
    if (name == kDatatypeNames[i]) return static_cast<coll_datatype_t>(i);
  }
  return std::nullopt;
}

bool is_floating(coll_datatype_t datatype) {
  return datatype == COLL_FLOAT || datatype == COLL_DOUBLE || datatype == COLL_FLOAT16 ||
         datatype == COLL_BFLOAT16;
}

bool has_element_type(coll_datatype_t datatype) {
  return datatype >= COLL_INT8 && datatype <= COLL_DOUBLE;
}

bool is_pair(coll_datatype_t datatype) {
  return datatype >= COLL_FLOAT_INT && datatype <= COLL_LONG_DOUBLE_INT;
}

const char* op_name(coll_op_t op) {
  const auto index = static_cast<size_t>(op);
  return index < kOpNames.size() ? kOpNames[index] : "unknown";
}

std::optional<coll_op_t> parse_op(std::string_view name) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (name == kOpNames[i]) return static_cast<coll_op_t>(i);
  }
  return std::nullopt;
}

bool is_bitwise(coll_op_t op) { return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR; }
bool is_logical(coll_op_t op) { return op == COLL_LAND || op == COLL_LOR || op == COLL_LXOR; }
bool integers_only(coll_op_t op) { return is_bitwise(op) || is_logical(op); }
bool is_loc(coll_op_t op) { return op == COLL_MAXLOC || op == COLL_MINLOC; }
bool op_applies(coll_op_t op, coll_datatype_t datatype) {
  if (is_loc(op)) return is_pair(datatype);
  if (is_pair(datatype)) return false;
  return !(integers_only(op) && is_floating(datatype));
}

std::string all_datatype_names() {
  return join(kDatatypeNames,
              [](size_t i) { return has_element_type(static_cast<coll_datatype_t>(i)); });
}
std::string all_op_names() {
  return join(kOpNames, [](size_t) { return true; });
}

}  // namespace bench
