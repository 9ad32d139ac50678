// libFuzzer target: the tuning-file parser (COLL_TUNING_FILE, issue 15).
// Any bytes are either a table or refused with COLL_ERR_INVALID_ARG; a table
// that parses answers every lookup.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "error.hpp"
#include "selection.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const coll::SelectionTable table = coll::SelectionTable::parse(text, "fuzz.tuning");
    const coll::Selection selection(table);
    for (int c = 0; c < coll::kCollCount; ++c)
      for (int ranks : {1, 2, 3, 7, 64})
        for (size_t bytes : {size_t(0), size_t(1), size_t(4096), SIZE_MAX})
          (void)selection.choice(coll::Coll(c), ranks, bytes);
  } catch (const coll::Error& e) {
    if (e.status() != COLL_ERR_INVALID_ARG) std::abort();
  }
  return 0;
}
