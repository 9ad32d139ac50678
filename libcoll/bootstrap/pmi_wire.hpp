// The PMI-1 wire protocol ("simple PMI", as MPICH's Hydra serves it to the
// processes mpiexec.hydra / mpirun.mpich starts): what a line says and how a
// blob travels as values. No I/O here, so that a unit test and a fuzzer can
// feed it what a server, or something pretending to be one, might send.
//
// A message is one line, `cmd=NAME key=value key=value ...\n`: attributes
// separated by spaces, each split at its first '='. A value cannot hold a
// space, a '=' or a newline, and the server bounds its length (get_maxes:
// vallen_max, 1024 in Hydra) and a key's (keylen_max, 64); so a blob goes
// as lowercase hex in chunks, the first chunk led by the blob's length in
// bytes and a ':' so that a reader knows how many chunks follow.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace coll::pmi_wire {

// The longest line this client accepts from a server. Hydra's own limit is
// 1024 characters for a line; a longer one is not PMI-1.
constexpr size_t kMaxLineBytes = 4096;

// One parsed line: its attributes in order, the first being cmd.
class Message {
 public:
  // nullopt when `line` (without its newline) is not a PMI-1 message: empty,
  // over kMaxLineBytes, an attribute without '=' or with an empty key, a
  // control character, or no leading cmd=.
  static std::optional<Message> parse(std::string_view line);

  const std::string& command() const { return attributes_.front().second; }
  // The value of key, or nullopt.
  std::optional<std::string_view> get(std::string_view key) const;
  // rc as an integer: 0 when the message carries no rc (barrier_out,
  // finalize_ack), nullopt when rc is not a decimal integer.
  std::optional<long> rc() const;

 private:
  std::vector<std::pair<std::string, std::string>> attributes_;
};

// The bytes of a blob that one chunk carries when a value may be
// vallen_max characters long (the first chunk's length prefix fits in the
// difference: see chunk_values). 0 when vallen_max is too small to be
// useful (a server that says so is refused).
size_t chunk_bytes(size_t vallen_max);

// The values that carry blob: "LEN:HEX" then "HEX"..., each at most
// vallen_max characters. Never empty: an empty blob is the one value "0:".
std::vector<std::string> chunk_values(std::string_view blob, size_t vallen_max);

// How many chunks a blob whose first value is `first` has, and its length;
// nullopt when `first` is not "LEN:HEX" with LEN consistent with the hex
// that follows and vallen_max.
struct BlobHeader {
  size_t length = 0;
  size_t chunks = 0;
};
std::optional<BlobHeader> parse_first_chunk(std::string_view first, size_t vallen_max);

// Decodes the values of one blob (as chunk_values made them); nullopt when
// any is malformed or their lengths disagree with the header.
std::optional<std::string> join_chunks(const std::vector<std::string>& values, size_t vallen_max);

}  // namespace coll::pmi_wire
