// The PMI-1 wire format: parsing a server's line, and a blob as hex chunks
// (pmi_wire.hpp).
#include "bootstrap/pmi_wire.hpp"

#include <charconv>
#include <limits>

namespace coll::pmi_wire {
namespace {

// The longest length prefix of a first chunk: 20 decimal digits (any
// size_t) and the ':'.
constexpr size_t kPrefixMax = 21;

// A value holds at most vallen_max - 1 characters: Hydra counts the
// terminating NUL and cuts a longer value short without saying so.
size_t value_chars(size_t vallen_max) { return vallen_max > 0 ? vallen_max - 1 : 0; }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool append_hex_decoded(std::string_view hex, std::string& out) {
  if (hex.size() % 2 != 0) return false;
  for (size_t i = 0; i < hex.size(); i += 2) {
    int high = hex_digit(hex[i]);
    int low = hex_digit(hex[i + 1]);
    if (high < 0 || low < 0) return false;
    out.push_back(static_cast<char>(high * 16 + low));
  }
  return true;
}

std::string hex_encoded(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 15]);
  }
  return hex;
}

}  // namespace

std::optional<Message> Message::parse(std::string_view line) {
  if (line.empty() || line.size() > kMaxLineBytes) return std::nullopt;
  Message message;
  size_t at = 0;
  while (at < line.size()) {
    if (line[at] == ' ') {  // Hydra pads some replies with spaces
      ++at;
      continue;
    }
    size_t end = line.find(' ', at);
    if (end == std::string_view::npos) end = line.size();
    std::string_view attribute = line.substr(at, end - at);
    for (char c : attribute)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return std::nullopt;
    size_t equals = attribute.find('=');
    if (equals == std::string_view::npos || equals == 0) return std::nullopt;
    message.attributes_.emplace_back(std::string(attribute.substr(0, equals)),
                                     std::string(attribute.substr(equals + 1)));
    at = end;
  }
  if (message.attributes_.empty() || message.attributes_.front().first != "cmd" ||
      message.attributes_.front().second.empty())
    return std::nullopt;
  return message;
}

std::optional<std::string_view> Message::get(std::string_view key) const {
  for (const auto& [name, value] : attributes_)
    if (name == key) return std::string_view(value);
  return std::nullopt;
}

std::optional<long> Message::rc() const {
  auto text = get("rc");
  if (!text) return 0;
  long value = 0;
  auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc() || end != text->data() + text->size()) return std::nullopt;
  return value;
}

size_t chunk_bytes(size_t vallen_max) {
  size_t chars = value_chars(vallen_max);
  // Below this a blob of a few hundred bytes would take dozens of round
  // trips; Hydra offers 1024, the PMI-1 default.
  if (chars < kPrefixMax + 64) return 0;
  return (chars - kPrefixMax) / 2;
}

std::vector<std::string> chunk_values(std::string_view blob, size_t vallen_max) {
  size_t per_chunk = chunk_bytes(vallen_max);
  std::vector<std::string> values;
  if (per_chunk == 0) return values;
  size_t at = 0;
  do {
    std::string_view part = blob.substr(at, per_chunk);
    std::string value = at == 0 ? std::to_string(blob.size()) + ":" : std::string();
    value += hex_encoded(part);
    values.push_back(std::move(value));
    at += part.size();
  } while (at < blob.size());
  return values;
}

std::optional<BlobHeader> parse_first_chunk(std::string_view first, size_t vallen_max) {
  size_t per_chunk = chunk_bytes(vallen_max);
  size_t colon = first.find(':');
  if (per_chunk == 0 || colon == std::string_view::npos || colon == 0) return std::nullopt;
  if (first[0] == '0' && colon > 1) return std::nullopt;  // one spelling per length
  size_t length = 0;
  auto [end, error] = std::from_chars(first.data(), first.data() + colon, length);
  if (error != std::errc() || end != first.data() + colon) return std::nullopt;
  // What this chunk carries must be all of a short blob, or a full chunk.
  size_t carried = (first.size() - colon - 1) / 2;
  if (carried != std::min(length, per_chunk)) return std::nullopt;
  BlobHeader header;
  header.length = length;
  header.chunks = length == 0 ? 1 : (length - 1) / per_chunk + 1;
  return header;
}

std::optional<std::string> join_chunks(const std::vector<std::string>& values, size_t vallen_max) {
  if (values.empty()) return std::nullopt;
  auto header = parse_first_chunk(values.front(), vallen_max);
  if (!header || header->chunks != values.size()) return std::nullopt;
  std::string blob;
  blob.reserve(header->length);
  size_t per_chunk = chunk_bytes(vallen_max);
  for (size_t i = 0; i < values.size(); ++i) {
    std::string_view hex = values[i];
    if (i == 0) hex.remove_prefix(hex.find(':') + 1);
    size_t expected = std::min(per_chunk, header->length - i * per_chunk);
    if (hex.size() != expected * 2 || !append_hex_decoded(hex, blob)) return std::nullopt;
  }
  return blob;
}

}  // namespace coll::pmi_wire
