#include "mp_support.hpp"

#include <algorithm>

namespace mp {

// The slot edges the counts below sit on: COLL_SLOT_SIZE, or the default
// 128 KiB. Where the ranks outnumber the CPUs libcoll doubles the default
// (Context::slots_when_oversubscribed); the counts stay at 128 KiB's edges
// there (following it made each count 4x larger and the plain suite ~1.5x
// slower on the 2-core CI machine): the slot4k runs cover chunk edges with
// many chunks, and the np 2 runs (not oversubscribed here) the default's.
size_t slot_bytes() {
  constexpr size_t kDefault = 128 * 1024;
  const char* env = std::getenv("COLL_SLOT_SIZE");
  if (env == nullptr || *env == '\0') return kDefault;
  char* end = nullptr;
  size_t bytes = std::strtoull(env, &end, 10);
  switch (*end) {
    case 'k':
    case 'K':
      bytes <<= 10;
      break;
    case 'm':
    case 'M':
      bytes <<= 20;
      break;
    case 'g':
    case 'G':
      bytes <<= 30;
      break;
    default:
      break;
  }
  return (bytes + 63) & ~size_t{63};
}

std::vector<size_t> interesting_counts(size_t element_size) {
  const size_t per_slot = slot_bytes() / element_size;
  const size_t ranks = static_cast<size_t>(world_size());
  std::vector<size_t> counts = {0, 1, 7, ranks - 1, per_slot - 1, per_slot, per_slot + 1};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

bool same_on_all_ranks(uint64_t digest) {
  uint64_t mine[2] = {digest, ~digest};
  uint64_t maxima[2] = {0, 0};
  int status = coll_allreduce(mine, maxima, 2, COLL_UINT64, COLL_MAX, world());
  EXPECT_EQ(status, COLL_SUCCESS) << coll_comm_last_error(world());
  return status == COLL_SUCCESS && maxima[0] == mine[0] && maxima[1] == mine[1];
}

std::vector<coll_datatype_t> all_datatypes() {
  std::vector<coll_datatype_t> types;
  for (int t = 0; t < COLL_DATATYPE_COUNT; ++t) types.push_back(static_cast<coll_datatype_t>(t));
  return types;
}

std::vector<coll_datatype_t> typed_datatypes() {
  std::vector<coll_datatype_t> types;
  for (coll_datatype_t t : all_datatypes())
    if (bench::has_element_type(t)) types.push_back(t);
  return types;
}

GuardedBuffer::GuardedBuffer(size_t count, size_t element_size)
    : bytes_(count * element_size), storage_(bytes_ + 2 * kGuardBytes) {
  for (size_t i = 0; i < kGuardBytes; ++i) {
    storage_[i] = guard_byte(i);
    storage_[kGuardBytes + bytes_ + i] = guard_byte(i + kGuardBytes);
  }
}

void GuardedBuffer::fill_pattern(uint64_t seed) {
  auto* p = static_cast<unsigned char*>(data());
  for (size_t i = 0; i < bytes_; ++i) p[i] = static_cast<unsigned char>(mix(seed, i) >> 56);
}

bool GuardedBuffer::has_pattern(uint64_t seed) const {
  const auto* p = static_cast<const unsigned char*>(data());
  for (size_t i = 0; i < bytes_; ++i) {
    if (p[i] != static_cast<unsigned char>(mix(seed, i) >> 56)) return false;
  }
  return true;
}

bool GuardedBuffer::guards_intact() const {
  for (size_t i = 0; i < kGuardBytes; ++i) {
    if (storage_[i] != guard_byte(i)) return false;
    if (storage_[kGuardBytes + bytes_ + i] != guard_byte(i + kGuardBytes)) return false;
  }
  return true;
}

std::string rank_tag() {
  return "[rank " + std::to_string(world_rank()) + "/" + std::to_string(world_size()) + "]";
}

}  // namespace mp
