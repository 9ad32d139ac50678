// Knob parsing: the comma-separated lists the transports read per rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "env.hpp"

namespace coll {
namespace {

std::vector<std::string> list_of(const char* value) {
  setenv("COLL_TEST_LIST", value, 1);
  std::vector<std::string> items = env_list("COLL_TEST_LIST");
  unsetenv("COLL_TEST_LIST");
  return items;
}

using Items = std::vector<std::string>;

TEST(EnvList, SplitsTrimsAndDropsEmptyItems) {
  EXPECT_EQ(list_of("10.0.0.1"), Items{"10.0.0.1"});
  EXPECT_EQ(list_of("a,b,c"), (Items{"a", "b", "c"}));
  EXPECT_EQ(list_of(" a , b\t,\tc "), (Items{"a", "b", "c"}));
  EXPECT_EQ(list_of("a,,b,"), (Items{"a", "b"}));
  EXPECT_EQ(list_of(",, ,\t"), Items{});
  EXPECT_EQ(list_of(""), Items{});
  EXPECT_EQ(list_of("rxe0 1"), Items{"rxe0 1"});  // inner blanks stay
}

TEST(EnvList, AbsentIsEmpty) {
  unsetenv("COLL_TEST_LIST");
  EXPECT_TRUE(env_list("COLL_TEST_LIST").empty());
}

}  // namespace
}  // namespace coll
