// libFuzzer target: what a PMI-1 server (or something on PMI_FD pretending
// to be one) sends a rank (libcoll/bootstrap/pmi_wire.hpp). Each input line
// is parsed as an answer; its `value`, if any, is read as the first chunk
// of a peer's blob and, with the lines after it as further chunks, joined.
// Any bytes are a message or refused; a blob that joins is re-chunked and
// must come back the same.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "bootstrap/pmi_wire.hpp"

namespace wire = coll::pmi_wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> values;
  while (!text.empty()) {
    size_t newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    auto message = wire::Message::parse(line);
    if (!message) {
      values.emplace_back(line);  // a raw chunk, as a get might return it
      continue;
    }
    (void)message->rc();
    if (message->command().empty()) std::abort();
    if (auto value = message->get("value")) values.emplace_back(*value);
  }
  for (size_t vallen : {size_t{1024}, size_t{90}}) {
    if (values.empty()) break;
    auto header = wire::parse_first_chunk(values.front(), vallen);
    if (!header) continue;
    auto blob = wire::join_chunks(values, vallen);
    if (!blob) continue;
    if (blob->size() != header->length) std::abort();
    if (wire::chunk_values(*blob, vallen) != values) std::abort();
  }
  return 0;
}
