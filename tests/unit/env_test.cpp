// Knob parsing: the comma-separated lists the transports read per rank.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "env.hpp"
#include "error.hpp"

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

// Each knob's error names the kind of number it wants: slots and polls are
// counts, not byte counts.
TEST(Config, KnobErrorsNameTheKindOfNumber) {
  const std::pair<const char*, const char*> cases[] = {
      {"COLL_NUM_SLOTS", "expected a count in [3, 16]"},
      {"COLL_SPIN_POLLS", "expected a count in [0, "},
      {"COLL_SLOT_SIZE", "expected a byte count in [64, "}};
  for (const auto& [knob, want] : cases) {
    setenv(knob, "garbage", 1);
    try {
      load_config();
      ADD_FAILURE() << knob << "=garbage accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), COLL_ERR_INVALID_ARG);
      EXPECT_NE(std::string(e.what()).find(std::string(knob) + "=garbage: " + want),
                std::string::npos)
          << e.what();
    }
    unsetenv(knob);
  }
}

}  // namespace
}  // namespace coll
