// User-defined reduction operators (coll_op_create, MPI_Op_create): a
// process-wide table of (function, context, commutative), named by
// coll_op_t values that no built-in operator has.
//
// A handle is kUserOpTag | generation << kSlotBits | slot: positive, so it
// passes through a C enum and a C++ one alike, and never equal to a
// built-in operator or to COLL_OP_NULL (-1). Freeing a slot bumps its
// generation, so a freed handle (or garbage with the tag bit) finds no live
// slot and is COLL_ERR_INVALID_ARG, never a call through a dangling
// pointer. Slots are reused first in, first out: a stale handle could name
// a new operator only after 2^18 - 1 reuses of its slot.
#pragma once

#include <coll/coll.h>

namespace coll {

inline constexpr int kUserOpTag = 1 << 30;

struct UserOp {
  coll_user_fn* fn = nullptr;
  void* ctx = nullptr;
  bool commutative = true;
};

// Whether op has the tag of a user handle (live or not).
inline bool is_user_op_handle(int op) { return op >= kUserOpTag; }

// A new handle; throws Error(COLL_ERR_NO_RESOURCES) when 4096 are live.
int create_user_op(const UserOp& op);
// False when op names no live user operator (freed, never made, built-in).
bool free_user_op(int op);
// The live operator op names; false when there is none.
bool find_user_op(int op, UserOp& out);

}  // namespace coll
