// The C++ RAII wrapper (coll.hpp) used as an application uses it: a
// Session around main, typed collectives on std::vector, and failures as
// coll::Exception with the status code. Run under collrun with a few ranks.
#include <gtest/gtest.h>
#include <coll/coll.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rank_failure_printer.hpp"

namespace {

static_assert(coll::datatype_of<int8_t>() == COLL_INT8);
static_assert(coll::datatype_of<uint16_t>() == COLL_UINT16);
static_assert(coll::datatype_of<int64_t>() == COLL_INT64);
static_assert(coll::datatype_of<float>() == COLL_FLOAT);
static_assert(coll::datatype_of<double>() == COLL_DOUBLE);

TEST(CppWrapper, RankAndSize) {
  const coll::Comm world = coll::Comm::world();
  EXPECT_EQ(world.get(), coll_comm_world());
  EXPECT_GE(world.rank(), 0);
  EXPECT_LT(world.rank(), world.size());
}

TEST(CppWrapper, TypedAllreduceInPlace) {
  const coll::Comm world = coll::Comm::world();
  const int n = world.size();
  std::vector<int32_t> values(1000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<int32_t>(i) * (world.rank() + 1);
  world.allreduce(values, COLL_SUM);
  for (size_t i = 0; i < values.size(); ++i) {
    ASSERT_EQ(values[i], static_cast<int32_t>(i) * n * (n + 1) / 2) << "element " << i;
  }
  std::vector<double> maxima = {static_cast<double>(world.rank()),
                                -static_cast<double>(world.rank())};
  world.allreduce(maxima, COLL_MAX);
  EXPECT_EQ(maxima[0], n - 1);
  EXPECT_EQ(maxima[1], 0.0);
}

TEST(CppWrapper, UntypedAllreduceAndBcast) {
  const coll::Comm world = coll::Comm::world();
  const uint64_t mine = uint64_t{1} << world.rank();
  uint64_t all = 0;
  world.allreduce(&mine, &all, 1, COLL_UINT64, COLL_BOR);
  EXPECT_EQ(all, (uint64_t{1} << world.size()) - 1);

  const int root = world.size() - 1;
  std::vector<float> data(777, world.rank() == root ? 2.5f : -1.0f);
  world.bcast(data, root);
  for (float v : data) ASSERT_EQ(v, 2.5f);
  world.barrier();
}

TEST(CppWrapper, FailuresThrowWithTheStatus) {
  const coll::Comm world = coll::Comm::world();
  std::vector<float> data(4, 1.0f);
  try {
    world.allreduce(data, COLL_BXOR);  // bitwise on float: invalid, local
    ADD_FAILURE() << "no exception";
  } catch (const coll::Exception& e) {
    EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
    EXPECT_NE(std::string(e.what()).find(coll_strerror(COLL_ERR_INVALID_ARG)), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(world.bcast(data, world.size()), coll::Exception);
  EXPECT_THROW(coll::Comm(nullptr).barrier(), coll::Exception);
  // Still usable after refused calls.
  world.allreduce(data, COLL_SUM);
  EXPECT_EQ(data[3], static_cast<float>(world.size()));
}

TEST(CppWrapper, SplitDupAndRequests) {
  const coll::Comm world = coll::Comm::world();
  const int n = world.size(), me = world.rank();
  {
    coll::Comm rev = world.split(0, n - me);  // reversed order
    ASSERT_TRUE(rev);
    EXPECT_EQ(rev.rank(), n - 1 - me);
    coll::Comm copy = rev.dup();
    std::vector<int64_t> v(5, me);
    coll::Request r = copy.iallreduce(COLL_IN_PLACE, v.data(), v.size(), COLL_INT64, COLL_SUM);
    coll::Request b = rev.ibarrier();
    b.wait();
    r.wait();
    EXPECT_FALSE(r);
    EXPECT_EQ(v[4], int64_t(n) * (n - 1) / 2);
    int x = 0;
    coll::Request p = rev.bcast_init(&x, 1, COLL_INT32, 0);
    for (int s = 1; s <= 20; ++s) {
      x = rev.rank() == 0 ? s : 0;
      p.start();
      while (!p.test()) {
      }
      EXPECT_EQ(x, s);
      EXPECT_TRUE(p);  // persistent: still allocated
    }
    coll::Comm moved = std::move(copy);
    moved.free();  // then rev is freed by its destructor
  }
  coll::Comm none = world.split(COLL_UNDEFINED, 0);
  EXPECT_FALSE(none);
}

TEST(CppWrapper, CreateGroup) {
  const coll::Comm world = coll::Comm::world();
  const int n = world.size(), me = world.rank();
  // The last two ranks, swapped; the others make a group of their own.
  const std::vector<int> pair = {n - 1, n - 2};
  const bool in_pair = n >= 2 && me >= n - 2;
  coll::Comm g = in_pair ? world.create_group(pair, 1) : world.create_group({me}, 2);
  ASSERT_TRUE(g);
  EXPECT_EQ(g.size(), in_pair ? 2 : 1);
  EXPECT_EQ(g.rank(), in_pair ? n - 1 - me : 0);
  int64_t x = me;
  g.allreduce(COLL_IN_PLACE, &x, 1, COLL_INT64, COLL_SUM);
  EXPECT_EQ(x, in_pair ? int64_t(2 * n - 3) : int64_t(me));
  EXPECT_THROW(world.create_group({me, me}, 0), coll::Exception);  // refused here: no peer waits
}

TEST(CppWrapper, RestOfTheCollectiveSet) {
  const coll::Comm world = coll::Comm::world();
  const int n = world.size(), r = world.rank();
  std::vector<int32_t> mine = {r, 10 * r}, all;
  world.allgather(mine, all);
  ASSERT_EQ(all.size(), size_t(2 * n));
  for (int i = 0; i < n; ++i) EXPECT_EQ(all[size_t(2 * i) + 1], 10 * i);
  std::vector<int64_t> send(static_cast<size_t>(n)), recv;
  for (int i = 0; i < n; ++i) send[size_t(i)] = 100 * r + i;  // for rank i
  world.alltoall(send, recv);
  for (int i = 0; i < n; ++i) EXPECT_EQ(recv[size_t(i)], 100 * i + r);
  std::vector<double> prefix = {1.0, double(r)};
  world.scan(prefix, COLL_SUM);
  EXPECT_EQ(prefix[0], double(r + 1));
  EXPECT_EQ(prefix[1], double(r * (r + 1) / 2));
  int32_t sum = 0;
  world.reduce(&r, r == 0 ? &sum : nullptr, 1, COLL_INT32, COLL_SUM, 0);
  if (r == 0) {
    EXPECT_EQ(sum, n * (n - 1) / 2);
  }
  // Persistent exscan, started twice.
  int64_t x = r + 1, before = -7;
  coll::Request q = world.exscan_init(&x, &before, 1, COLL_INT64, COLL_SUM);
  for (int k = 0; k < 2; ++k) {
    q.start();
    q.wait();
    EXPECT_EQ(before, r == 0 ? -7 : int64_t(r) * (r + 1) / 2);
  }
  // A bad root throws on every rank.
  EXPECT_THROW(world.gather(&x, nullptr, 1, COLL_INT64, n), coll::Exception);
}

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  try {
    coll::Session session(&argc, &argv);
    mp::RankFailurePrinter::install_for_rank(coll::Comm::world().rank());
    return RUN_ALL_TESTS();
  } catch (const coll::Exception& e) {
    std::fprintf(stderr, "coll_hpp_test: %s\n", e.what());
    return 1;
  }
}
