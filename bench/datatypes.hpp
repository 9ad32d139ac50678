// The benchmark's view of libcoll's datatypes and operators: their names on
// the command line and in reports, and a dispatch from coll_datatype_t to the
// C++ element type so that typed code is written once, as a template.
#pragma once

#include <coll/coll.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace bench {

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls visit(TypeTag<T>{}) where T is the element type of datatype. The
// 16-bit floats have no C++20 arithmetic type, so no element type here
// (has_element_type): visiting one throws std::invalid_argument.
template <typename Visitor>
decltype(auto) visit_datatype(coll_datatype_t datatype, Visitor&& visit) {
  switch (datatype) {
    case COLL_INT8:
      return visit(TypeTag<int8_t>{});
    case COLL_INT16:
      return visit(TypeTag<int16_t>{});
    case COLL_INT32:
      return visit(TypeTag<int32_t>{});
    case COLL_INT64:
      return visit(TypeTag<int64_t>{});
    case COLL_UINT8:
      return visit(TypeTag<uint8_t>{});
    case COLL_UINT16:
      return visit(TypeTag<uint16_t>{});
    case COLL_UINT32:
      return visit(TypeTag<uint32_t>{});
    case COLL_UINT64:
      return visit(TypeTag<uint64_t>{});
    case COLL_FLOAT:
      return visit(TypeTag<float>{});
    case COLL_DOUBLE:
      return visit(TypeTag<double>{});
    case COLL_FLOAT16:
    case COLL_BFLOAT16:
    case COLL_FLOAT_INT:
    case COLL_DOUBLE_INT:
    case COLL_LONG_INT:
    case COLL_2INT:
    case COLL_SHORT_INT:
    case COLL_LONG_DOUBLE_INT:
      throw std::invalid_argument("no element type for datatype " +
                                  std::to_string(static_cast<int>(datatype)));
    case COLL_DATATYPE_COUNT:
      break;
  }
  throw std::invalid_argument("unknown datatype " + std::to_string(static_cast<int>(datatype)));
}

// "int8" ... "uint64", "float", "double", "float16", "bfloat16".
const char* datatype_name(coll_datatype_t datatype);
std::optional<coll_datatype_t> parse_datatype(std::string_view name);
bool is_floating(coll_datatype_t datatype);
// Whether visit_datatype has a C++ type for it (all but the 16-bit floats
// and the value-index pairs).
bool has_element_type(coll_datatype_t datatype);
// The value-index pairs (COLL_FLOAT_INT ...), for MAXLOC / MINLOC only.
bool is_pair(coll_datatype_t datatype);

// "sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "lxor",
// "maxloc", "minloc".
const char* op_name(coll_op_t op);
std::optional<coll_op_t> parse_op(std::string_view name);
bool is_bitwise(coll_op_t op);
bool is_logical(coll_op_t op);
// The operators MPI defines on integers only: the bitwise and the logical.
bool integers_only(coll_op_t op);
// MAXLOC, MINLOC: on the value-index pairs only.
bool is_loc(coll_op_t op);
// Whether libcoll defines op on datatype (as MPI does).
bool op_applies(coll_op_t op, coll_datatype_t datatype);

// Comma-separated names, for usage text: the datatypes the benchmark runs
// (has_element_type), every operator.
std::string all_datatype_names();
std::string all_op_names();

}  // namespace bench
