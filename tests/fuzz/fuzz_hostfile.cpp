// libFuzzer target: collrun's hostfile and -H host-list parsers (issue 15).
// Any bytes are either parsed or refused with collrun's UsageError; never a
// crash, a hang or a sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "host_list.hpp"
#include "launch_options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    collrun::parse_hostfile(text, "fuzz.hostfile");
  } catch (const collrun::UsageError&) {
  }
  try {
    collrun::parse_host_list(text);
  } catch (const collrun::UsageError&) {
  }
  return 0;
}
