// Broadcast from every root, of every datatype, at every interesting count.
// The payload is a byte pattern (bcast moves bytes whatever the datatype,
// and a pattern catches NaN canonicalisation or a float copy that is not
// bitwise); non-roots start with a different pattern, so a rank that kept
// its own data fails.
#include <string>

#include "mp_support.hpp"

namespace {

using mp::GuardedBuffer;

void run_bcast(coll_datatype_t datatype, int root, size_t count) {
  const size_t element_size = coll_datatype_size(datatype);
  const std::string where = mp::rank_tag() + " bcast " + mp::datatype_name(datatype) + " root " +
                            std::to_string(root) + " count " + std::to_string(count);
  const uint64_t seed = mp::mix(datatype, static_cast<uint64_t>(root), count);
  GuardedBuffer buffer(count, element_size);
  const bool is_root = mp::world_rank() == root;
  buffer.fill_pattern(is_root ? seed
                              : seed ^ (0x5A5Aull + static_cast<uint64_t>(mp::world_rank())));

  const int status = coll_bcast(buffer.data(), count, datatype, root, mp::world());
  EXPECT_EQ(status, COLL_SUCCESS) << where << ": " << coll_strerror(status) << " "
                                  << coll_comm_last_error(mp::world());
  EXPECT_TRUE(buffer.has_pattern(seed))
      << where << (is_root ? ": the root's buffer changed" : ": data differs from the root's");
  EXPECT_TRUE(buffer.guards_intact()) << where << ": write outside the buffer";
}

class Bcast : public testing::TestWithParam<coll_datatype_t> {};

TEST_P(Bcast, EveryRootEveryInterestingCount) {
  const coll_datatype_t datatype = GetParam();
  ASSERT_GT(coll_datatype_size(datatype),
            0u);  // same on every rank: no collective skipped unevenly
  for (int root = 0; root < mp::world_size(); ++root) {
    for (size_t count : mp::interesting_counts(coll_datatype_size(datatype))) {
      run_bcast(datatype, root, count);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDatatype, Bcast, testing::ValuesIn(mp::all_datatypes()),
                         [](const testing::TestParamInfo<coll_datatype_t>& info) {
                           return std::string(mp::datatype_name(info.param));
                         });

// 1 Mi elements from a first, a middle and a last root.
TEST(BcastLarge, OneMebiElementsFromSeveralRoots) {
  const int last = mp::world_size() - 1;
  run_bcast(COLL_UINT8, 0, mp::kLargeCount);
  run_bcast(COLL_FLOAT, last / 2, mp::kLargeCount);
  run_bcast(COLL_DOUBLE, last, mp::kLargeCount);
}

}  // namespace
