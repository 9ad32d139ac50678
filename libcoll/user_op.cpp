#include "user_op.hpp"

#include <deque>
#include <mutex>

#include "error.hpp"

namespace coll {
namespace {

constexpr int kSlotBits = 12;  // 4096 live operators
constexpr int kSlots = 1 << kSlotBits;
constexpr uint32_t kGenerations = 1u << (30 - kSlotBits);  // generations 1 .. 2^18 - 1

struct Slot {
  uint32_t generation = 1;
  bool live = false;
  UserOp op;
};

// One lock for every access: a user operator is looked up once per call
// that names it (the built-in operators never come here), and MPI programs
// make a handful of them.
struct Table {
  std::mutex mutex;
  Slot slots[kSlots];
  std::deque<int> free;  // freed slots, oldest first
  int next = 0;          // slots never used start here
};

// Never destroyed: a collective may run in an exit handler after static
// destructors would have run.
Table& table() {
  static Table* t = new Table;
  return *t;
}

int handle(int slot, uint32_t generation) {
  return kUserOpTag | int(generation << kSlotBits) | slot;
}

// The slot a handle names, or -1 when it names no live one. Under the lock.
int live_slot(Table& t, int op) {
  if (!is_user_op_handle(op)) return -1;
  const int slot = op & (kSlots - 1);
  const uint32_t generation = uint32_t(op & ~kUserOpTag) >> kSlotBits;
  const Slot& s = t.slots[slot];
  return s.live && s.generation == generation ? slot : -1;
}

}  // namespace

int create_user_op(const UserOp& op) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  int slot;
  if (!t.free.empty()) {
    slot = t.free.front();
    t.free.pop_front();
  } else if (t.next < kSlots) {
    slot = t.next++;
  } else {
    fail(COLL_ERR_NO_RESOURCES, "coll_op_create: %d user operators are live already (free some)",
         kSlots);
  }
  Slot& s = t.slots[slot];
  s.live = true;
  s.op = op;
  return handle(slot, s.generation);
}

bool free_user_op(int op) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  const int slot = live_slot(t, op);
  if (slot < 0) return false;
  Slot& s = t.slots[slot];
  s.live = false;
  s.op = UserOp{};
  s.generation = s.generation % (kGenerations - 1) + 1;
  t.free.push_back(slot);
  return true;
}

bool find_user_op(int op, UserOp& out) {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  const int slot = live_slot(t, op);
  if (slot < 0) return false;
  out = t.slots[slot].op;
  return true;
}

}  // namespace coll
