// Datatypes and operators: which calls libcoll can serve.
//
// The fallback rule must give the same answer on every rank, and MPI lets
// ranks pass different datatypes to one call as long as the type signatures
// (the sequences of basic types) match: MPI_INT x 4 on one rank,
// MPI_Type_contiguous(4, MPI_INT) x 1 or a strided vector of 4 ints on
// another. So the decision reads only what the type signature fixes:
//
//  - Reductions (Kind::kReduction): the set of basic element types in the
//    signature. When it is one type libcoll has (MPI_INT, MPI_INT32_T,
//    MPI_INTEGER, ... map to COLL_INT32 by size and signedness; MPI_FLOAT,
//    MPI_REAL, MPI_DOUBLE, MPI_DOUBLE_PRECISION; complex types as pairs for
//    MPI_SUM; MPI_BYTE for the bitwise operators; MPI_C_BOOL and
//    MPI_LOGICAL for the logical ones; the named pair types for MAXLOC and
//    MINLOC) the call is served, whatever the layout: a dense datatype in
//    place, any other through a packed copy. Several element types, or one
//    libcoll lacks (MPI_LONG_DOUBLE, MPI_2REAL, MPI_CHAR, ...), fall back -
//    on every rank, since every rank's signature holds the same types. One
//    exception to "whatever the layout": pairs. libcoll's pair is MPI's C
//    struct, padding included, and a packed copy has no padding, so only a
//    named pair type is served (in place); a derived type made of pairs is
//    passed to MPI. A program that passes MPI_DOUBLE_INT x 2 on one rank and
//    a contiguous type of two on another (legal, rare) would split between
//    libcoll and MPI there: it waits until COLL_TIMEOUT and fails. Element types that occur
//    zero times (a struct block of length 0) do not count; a datatype of size
//    0 moves nothing and is served as nothing.
//  - Data moved unchanged (Kind::kBytes: bcast): bytes are bytes. Every
//    datatype is served: dense ones in place, others packed; the byte count
//    (count x MPI_Type_size) is what signature equality makes equal.
//
// The classification of a derived datatype is computed once (envelope and
// contents, recursively) and cached on it with a datatype attribute (copied
// by MPI_Type_dup, deleted by MPI_Type_free); named types are looked up in a
// table built at MPI_Init.
#include <algorithm>
#include <climits>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "shim.hpp"

namespace shim {
namespace {

std::unordered_map<MPI_Datatype, TypeInfo> g_named;  // read-only after types_init
// The same, as a table of one entry per slot of a hash of the handle (the
// first named type to land on a slot has it; the others are found in
// g_named): the datatype of almost every call in one load and compare,
// where the map's find took about a tenth of a served MPI_Alltoallv at
// np 1. Read-only after types_init.
struct NamedSlot {
  MPI_Datatype t;
  const TypeInfo* info;
};
constexpr size_t kNamedSlots = 256;
NamedSlot g_named_fast[kNamedSlots] = {};
size_t named_slot(MPI_Datatype t) { return (std::hash<MPI_Datatype>{}(t) >> 4) % kNamedSlots; }
std::mutex g_other_mutex;                            // f90 types, met at run time
std::unordered_map<MPI_Datatype, TypeInfo> g_other;
int g_type_keyval = MPI_KEYVAL_INVALID;

coll_datatype_t int_type(bool is_signed, MPI_Count bytes, bool* ok) {
  *ok = true;
  switch (bytes) {
    case 1: return is_signed ? COLL_INT8 : COLL_UINT8;
    case 2: return is_signed ? COLL_INT16 : COLL_UINT16;
    case 4: return is_signed ? COLL_INT32 : COLL_UINT32;
    case 8: return is_signed ? COLL_INT64 : COLL_UINT64;
    default: *ok = false; return COLL_UINT8;
  }
}

// libcoll's value-index pair laid out as MPI's pair type t (the C structs;
// MPI_2INTEGER is two Fortran INTEGERs, the layout of MPI_2INT).
bool pair_type(MPI_Datatype t, coll_datatype_t* out) {
  if (t == MPI_FLOAT_INT) *out = COLL_FLOAT_INT;
  else if (t == MPI_DOUBLE_INT) *out = COLL_DOUBLE_INT;
  else if (t == MPI_LONG_INT) *out = COLL_LONG_INT;
  else if (t == MPI_2INT || t == MPI_2INTEGER) *out = COLL_2INT;
  else if (t == MPI_SHORT_INT) *out = COLL_SHORT_INT;
  else if (t == MPI_LONG_DOUBLE_INT) *out = COLL_LONG_DOUBLE_INT;
  else return false;
  MPI_Count size = 0;
  PMPI_Type_size_x(t, &size);
  // MPI's type size counts no padding; libcoll's pair is the padded struct.
  // Served only where MPI's extent is that struct (true on x86-64, aarch64).
  MPI_Count lb = 0, extent = 0;
  PMPI_Type_get_extent_x(t, &lb, &extent);
  return lb == 0 && extent == MPI_Count(coll_datatype_size(*out)) && size <= extent;
}

// The layout fields of any datatype.
void fill_layout(MPI_Datatype t, TypeInfo& info) {
  MPI_Count lb = 0, extent = 0, tlb = 0, textent = 0, size = 0;
  PMPI_Type_size_x(t, &size);
  PMPI_Type_get_extent_x(t, &lb, &extent);
  PMPI_Type_get_true_extent_x(t, &tlb, &textent);
  info.size = size;
  info.extent = extent;
  info.true_lb = tlb;
  info.true_extent = textent;
}

// A basic type of this category; per is set from the size.
TypeInfo basic(MPI_Datatype t, Category c) {
  TypeInfo info;
  fill_layout(t, info);
  info.elements = info.size == 0 ? TypeInfo::kEmpty : TypeInfo::kOne;
  info.category = c;
  bool ok = true;
  switch (c) {
    case Category::kSigned:
    case Category::kUnsigned:
      info.ctype = int_type(c == Category::kSigned, info.size, &ok);
      break;
    case Category::kByte:
      info.ctype = COLL_UINT8;
      break;
    case Category::kLogical:
      // true is 1 in C's bool and gfortran's LOGICAL, which is what libcoll's
      // logical operators write: an unsigned integer of the same size.
      info.ctype = int_type(false, info.size, &ok);
      break;
    case Category::kPair:
      ok = pair_type(t, &info.ctype);
      break;
    case Category::kFloat:
    case Category::kComplex: {
      const MPI_Count part = c == Category::kComplex ? info.size / 2 : info.size;
      if (part == 4)
        info.ctype = COLL_FLOAT;
      else if (part == 8)
        info.ctype = COLL_DOUBLE;
      else
        ok = false;
      break;
    }
    case Category::kOther:
      ok = false;
      break;
  }
  if (!ok) info.category = Category::kOther;
  if (info.category == Category::kPair)
    info.per = 1;  // one libcoll pair per MPI pair, laid out alike (pair_type)
  else if (info.category != Category::kOther && info.size > 0)
    info.per = size_t(info.size) / coll_datatype_size(info.ctype);
  return info;
}

// Two element-type sets together (the signature of a struct).
bool same_element(const TypeInfo& a, const TypeInfo& b) {
  if (a.category != b.category) return false;
  if (a.category == Category::kOther) return false;  // unsupported: never merged
  return a.ctype == b.ctype;
}

struct Elements {
  TypeInfo::Elements kind = TypeInfo::kEmpty;
  Category category = Category::kOther;
  coll_datatype_t ctype = COLL_UINT8;
};

void merge(Elements& into, const TypeInfo& part) {
  if (part.elements == TypeInfo::kEmpty) return;
  if (part.elements == TypeInfo::kMixed || into.kind == TypeInfo::kMixed) {
    into.kind = TypeInfo::kMixed;
    return;
  }
  if (into.kind == TypeInfo::kEmpty) {
    into.kind = TypeInfo::kOne;
    into.category = part.category;
    into.ctype = part.ctype;
    return;
  }
  TypeInfo a;
  a.category = into.category;
  a.ctype = into.ctype;
  // One unsupported element type stays one (it falls back either way); two
  // different ones are mixed.
  if (!same_element(a, part) && !(a.category == Category::kOther && part.category == Category::kOther))
    into.kind = TypeInfo::kMixed;
}

bool is_named_like(int combiner) {
  return combiner == MPI_COMBINER_NAMED || combiner == MPI_COMBINER_F90_REAL ||
         combiner == MPI_COMBINER_F90_COMPLEX || combiner == MPI_COMBINER_F90_INTEGER;
}

// A parameterized Fortran 90 type (MPI_Type_create_f90_*): a predefined
// type, by size.
TypeInfo classify_f90(MPI_Datatype t, int combiner) {
  const Category c = combiner == MPI_COMBINER_F90_REAL      ? Category::kFloat
                     : combiner == MPI_COMBINER_F90_COMPLEX ? Category::kComplex
                                                            : Category::kSigned;
  return basic(t, c);
}

TypeInfo classify_derived(MPI_Datatype t, int ni, int na, int nd, int combiner) {
  TypeInfo info;
  fill_layout(t, info);
  if (info.size == 0) {
    info.elements = TypeInfo::kEmpty;
    return info;
  }
  std::vector<int> ints(size_t(ni) + 1);
  std::vector<MPI_Aint> aints(size_t(na) + 1);
  std::vector<MPI_Datatype> types(size_t(nd) + 1);
  if (PMPI_Type_get_contents(t, ni, na, nd, ints.data(), aints.data(), types.data()) != MPI_SUCCESS) {
    info.elements = TypeInfo::kMixed;
    return info;
  }
  Elements e;
  for (int i = 0; i < nd; ++i) {
    // A struct's block of length 0 puts nothing of its type in the signature.
    const bool counts = combiner != MPI_COMBINER_STRUCT || (i + 1 < ni && ints[size_t(i) + 1] > 0);
    if (counts) {
      const TypeInfo* part = type_info(types[size_t(i)]);
      if (part)
        merge(e, *part);
      else
        e.kind = TypeInfo::kMixed;
    }
  }
  // Handles get_contents returned for derived types are new references.
  for (int i = 0; i < nd; ++i) {
    int a, b, c, comb;
    PMPI_Type_get_envelope(types[size_t(i)], &a, &b, &c, &comb);
    if (!is_named_like(comb)) PMPI_Type_free(&types[size_t(i)]);
  }
  info.elements = e.kind;
  // A derived type of pairs packs them without the struct's padding, which
  // libcoll's pairs have: such reductions go to MPI ("datatype").
  info.category = e.category == Category::kPair ? Category::kOther : e.category;
  info.ctype = e.ctype;
  if (e.kind == TypeInfo::kOne && info.category != Category::kOther)
    info.per = size_t(info.size) / coll_datatype_size(e.ctype);
  return info;
}

int type_copy(MPI_Datatype, int, void*, void* in, void* out, int* flag) {
  *static_cast<void**>(out) = new TypeInfo(*static_cast<TypeInfo*>(in));
  *flag = 1;
  return MPI_SUCCESS;
}

int type_delete(MPI_Datatype, int, void* value, void*) {
  delete static_cast<TypeInfo*>(value);
  return MPI_SUCCESS;
}

}  // namespace

void types_init() {
  struct Named {
    MPI_Datatype t;
    Category c;
  };
  const Named named[] = {
      {MPI_SIGNED_CHAR, Category::kSigned},     {MPI_SHORT, Category::kSigned},
      {MPI_INT, Category::kSigned},             {MPI_LONG, Category::kSigned},
      {MPI_LONG_LONG_INT, Category::kSigned},   {MPI_LONG_LONG, Category::kSigned},
      {MPI_INT8_T, Category::kSigned},          {MPI_INT16_T, Category::kSigned},
      {MPI_INT32_T, Category::kSigned},         {MPI_INT64_T, Category::kSigned},
      {MPI_AINT, Category::kSigned},            {MPI_OFFSET, Category::kSigned},
      {MPI_COUNT, Category::kSigned},           {MPI_INTEGER, Category::kSigned},
      {MPI_INTEGER1, Category::kSigned},        {MPI_INTEGER2, Category::kSigned},
      {MPI_INTEGER4, Category::kSigned},        {MPI_INTEGER8, Category::kSigned},
      {MPI_UNSIGNED_CHAR, Category::kUnsigned}, {MPI_UNSIGNED_SHORT, Category::kUnsigned},
      {MPI_UNSIGNED, Category::kUnsigned},      {MPI_UNSIGNED_LONG, Category::kUnsigned},
      {MPI_UNSIGNED_LONG_LONG, Category::kUnsigned},
      {MPI_UINT8_T, Category::kUnsigned},       {MPI_UINT16_T, Category::kUnsigned},
      {MPI_UINT32_T, Category::kUnsigned},      {MPI_UINT64_T, Category::kUnsigned},
      {MPI_FLOAT, Category::kFloat},            {MPI_DOUBLE, Category::kFloat},
      {MPI_REAL, Category::kFloat},             {MPI_REAL4, Category::kFloat},
      {MPI_REAL8, Category::kFloat},            {MPI_DOUBLE_PRECISION, Category::kFloat},
      {MPI_C_FLOAT_COMPLEX, Category::kComplex}, {MPI_C_COMPLEX, Category::kComplex},
      {MPI_C_DOUBLE_COMPLEX, Category::kComplex}, {MPI_CXX_FLOAT_COMPLEX, Category::kComplex},
      {MPI_CXX_DOUBLE_COMPLEX, Category::kComplex}, {MPI_COMPLEX, Category::kComplex},
      {MPI_COMPLEX8, Category::kComplex},       {MPI_COMPLEX16, Category::kComplex},
      {MPI_DOUBLE_COMPLEX, Category::kComplex}, {MPI_BYTE, Category::kByte},
      // Named types libcoll has no elements for: served as bytes where only
      // bytes matter (bcast), passed to MPI for reductions.
      {MPI_CHAR, Category::kOther},             {MPI_WCHAR, Category::kOther},
      {MPI_PACKED, Category::kOther},           {MPI_LONG_DOUBLE, Category::kOther},
      {MPI_C_BOOL, Category::kLogical},         {MPI_CXX_BOOL, Category::kLogical},
      {MPI_C_LONG_DOUBLE_COMPLEX, Category::kOther}, {MPI_CXX_LONG_DOUBLE_COMPLEX, Category::kOther},
      {MPI_FLOAT_INT, Category::kPair},         {MPI_DOUBLE_INT, Category::kPair},
      {MPI_LONG_DOUBLE_INT, Category::kPair},   {MPI_LONG_INT, Category::kPair},
      {MPI_SHORT_INT, Category::kPair},         {MPI_2INT, Category::kPair},
      {MPI_2REAL, Category::kOther},            {MPI_2DOUBLE_PRECISION, Category::kOther},
      {MPI_2INTEGER, Category::kPair},          {MPI_2COMPLEX, Category::kOther},
      {MPI_2DOUBLE_COMPLEX, Category::kOther},  {MPI_CHARACTER, Category::kOther},
      {MPI_LOGICAL, Category::kLogical},        {MPI_LOGICAL1, Category::kLogical},
      {MPI_LOGICAL2, Category::kLogical},       {MPI_LOGICAL4, Category::kLogical},
      {MPI_LOGICAL8, Category::kLogical},
#ifdef MPI_INTEGER16
      {MPI_INTEGER16, Category::kOther},
#endif
#ifdef MPI_REAL16
      {MPI_REAL16, Category::kOther},
#endif
#ifdef MPI_COMPLEX32
      {MPI_COMPLEX32, Category::kOther},
#endif
  };
  for (const Named& n : named) {
    if (n.t == MPI_DATATYPE_NULL || g_named.count(n.t)) continue;
    MPI_Count size = 0;
    // A Fortran type of a build without Fortran has no size: leave it out.
    if (PMPI_Type_size_x(n.t, &size) != MPI_SUCCESS || size == MPI_UNDEFINED) continue;
    g_named.emplace(n.t, basic(n.t, n.c));
  }
  // After the last insertion: an unordered_map's elements stay where they
  // are, rehashing or not.
  for (const auto& [t, info] : g_named) {
    NamedSlot& slot = g_named_fast[named_slot(t)];
    if (!slot.info) slot = {t, &info};
  }
  PMPI_Type_create_keyval(type_copy, type_delete, &g_type_keyval, nullptr);
}

const TypeInfo* type_info(MPI_Datatype t) {
  if (t == MPI_DATATYPE_NULL) return nullptr;
  if (const NamedSlot& slot = g_named_fast[named_slot(t)]; slot.info && slot.t == t)
    return slot.info;
  auto it = g_named.find(t);
  if (it != g_named.end()) return &it->second;
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return nullptr;
  if (is_named_like(combiner)) {
    // Predefined (never freed): a named type not in the table, or an f90 one.
    std::lock_guard<std::mutex> l(g_other_mutex);
    auto o = g_other.find(t);
    if (o == g_other.end())
      o = g_other.emplace(t, combiner == MPI_COMBINER_NAMED ? basic(t, Category::kOther)
                                                             : classify_f90(t, combiner))
              .first;
    return &o->second;
  }
  void* value = nullptr;
  int flag = 0;
  PMPI_Type_get_attr(t, g_type_keyval, &value, &flag);
  if (flag) return static_cast<TypeInfo*>(value);
  auto* info = new TypeInfo(classify_derived(t, ni, na, nd, combiner));
  if (PMPI_Type_set_attr(t, g_type_keyval, info) != MPI_SUCCESS) {
    // Not cacheable: keep it for this process (leaks one entry per type).
    static std::mutex m;
    static std::vector<TypeInfo*> kept;
    std::lock_guard<std::mutex> l(m);
    kept.push_back(info);
  }
  return info;
}

bool map_op(MPI_Op op, coll_op_t* out, Reason* why) {
  if (op == MPI_SUM) *out = COLL_SUM;
  else if (op == MPI_PROD) *out = COLL_PROD;
  else if (op == MPI_MIN) *out = COLL_MIN;
  else if (op == MPI_MAX) *out = COLL_MAX;
  else if (op == MPI_BAND) *out = COLL_BAND;
  else if (op == MPI_BOR) *out = COLL_BOR;
  else if (op == MPI_BXOR) *out = COLL_BXOR;
  else if (op == MPI_LAND) *out = COLL_LAND;
  else if (op == MPI_LOR) *out = COLL_LOR;
  else if (op == MPI_LXOR) *out = COLL_LXOR;
  else if (op == MPI_MAXLOC) *out = COLL_MAXLOC;
  else if (op == MPI_MINLOC) *out = COLL_MINLOC;
  else {
    const bool predefined = op == MPI_REPLACE || op == MPI_NO_OP || op == MPI_OP_NULL;
    *why = predefined ? Reason::kOp : Reason::kUserOp;
    return false;
  }
  return true;
}

// MPI's table of which operators apply to which types (MPI 3.1, 5.9.2).
bool op_allowed(Category c, coll_op_t op) {
  switch (c) {
    case Category::kSigned:
    case Category::kUnsigned:
      return op != COLL_MAXLOC && op != COLL_MINLOC;
    case Category::kLogical:
      return op == COLL_LAND || op == COLL_LOR || op == COLL_LXOR;
    case Category::kPair:
      return op == COLL_MAXLOC || op == COLL_MINLOC;
    case Category::kFloat:
      return op == COLL_SUM || op == COLL_PROD || op == COLL_MIN || op == COLL_MAX;
    case Category::kComplex:
      return op == COLL_SUM;  // PROD is not element-wise
    case Category::kByte:
      return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR;
    case Category::kOther:
      return false;
  }
  return false;
}

// MPI_Pack's sizes are int: large buffers go in pieces of whole elements.
// With pad, each piece is packed contiguously where its slots begin and
// then spread over them, last element first: an element's slot starts at
// or after where MPI_Pack put it, and past every element before it.
int pack(const void* buf, MPI_Count count, MPI_Datatype t, MPI_Count size, MPI_Count extent,
         MPI_Count pad, char* packed) {
  if (size <= 0) return MPI_SUCCESS;
  const MPI_Count per_call = std::max<MPI_Count>(1, INT_MAX / size);
  for (MPI_Count done = 0; done < count;) {
    const int n = int(std::min<MPI_Count>(per_call, count - done));
    char* piece = packed + done * (size + pad);
    int position = 0;
    const int rc = PMPI_Pack(static_cast<const char*>(buf) + done * extent, n, t, piece,
                             int(n * size), &position, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return rc;
    if (pad > 0) spread(piece, n, size, pad, piece);
    done += n;
  }
  return MPI_SUCCESS;
}

// The reverse: each piece compacted where its slots begin (first element
// first: an element's bytes land at or before its slot, before every later
// one), then unpacked.
int unpack(char* packed, MPI_Count count, MPI_Datatype t, MPI_Count size, MPI_Count extent,
           MPI_Count pad, void* buf) {
  if (size <= 0) return MPI_SUCCESS;
  const MPI_Count per_call = std::max<MPI_Count>(1, INT_MAX / size);
  for (MPI_Count done = 0; done < count;) {
    const int n = int(std::min<MPI_Count>(per_call, count - done));
    char* piece = packed + done * (size + pad);
    if (pad > 0) compact(piece, n, size, pad, piece);
    int position = 0;
    const int rc = PMPI_Unpack(piece, int(n * size), &position,
                               static_cast<char*>(buf) + done * extent, n, t, MPI_COMM_SELF);
    if (rc != MPI_SUCCESS) return rc;
    done += n;
  }
  return MPI_SUCCESS;
}

void spread(const char* packed, MPI_Count count, MPI_Count size, MPI_Count pad, char* slots) {
  for (MPI_Count i = count; i-- > 0;) {
    std::memmove(slots + i * (size + pad), packed + i * size, size_t(size));
    // Bytes that travel: defined ones (libcoll and the user op never read them).
    std::memset(slots + i * (size + pad) + size, 0, size_t(pad));
  }
}

void compact(const char* slots, MPI_Count count, MPI_Count size, MPI_Count pad, char* packed) {
  for (MPI_Count i = 0; i < count; ++i)
    std::memmove(packed + i * size, slots + i * (size + pad), size_t(size));
}

}  // namespace shim
