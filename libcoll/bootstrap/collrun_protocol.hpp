// The rendezvous protocol between collrun (the server) and the ranks it
// starts (the client in collrun_bootstrap.cpp). Header-only so that the
// launcher, which does not link libcoll, shares the one definition.
//
// A connection carries frames: a 12-byte header (u32 type, u64 payload
// length, both little-endian) and the payload. Integers inside payloads are
// little-endian too; strings and blobs are a u64 length and the bytes.
//
//   collrun -> client   kChallenge str nonce (32 random bytes), first
//                                  thing on every connection
//   client -> collrun   kHello     u32 version, u32 rank, u32 size,
//                                  u64 epoch, u64 pid, str job_id,
//                                  str rank_nonce, str proof
//   collrun -> client   kWelcome   str proof
//                       kRefused   str reason; collrun then closes
//   client -> collrun   kRound     u64 round, str blob
//   collrun -> client   kResult    u64 round, u32 count, count x str blob
//   client -> collrun   kQuery     u64 round   (after a client timeout)
//   collrun -> client   kMissing   u64 round, u32 count, count x u32 rank
//                       kFailed    u32 coll status, str message
//   client -> collrun   kLeaving   (empty)     coll_finalize is done with
//                                  the bootstrap: this rank finalized
//   client -> collrun   kSurvivorRound  u64 key, u64 timeout_ms,
//                                  u32 count, count x u32 member (world
//                                  ranks, strictly increasing, the sender
//                                  among them), str blob
//   collrun -> client   kSurvivorResult u64 key, u32 coll status,
//                                  str message (empty on success),
//                                  u32 count (0 on failure), count x
//                                  (u32 present 0/1, str blob)
//
// A survivors' round (Bootstrap::survivor_round, protocol version 4) is
// an allgather among some members that tolerates their deaths: collrun
// answers once every member has sent it or is dead (its process ended,
// its connection closed, it began a new bootstrap, or collrun killed it
// for not joining within the first caller's timeout), with nothing
// present in a dead member's place. Rounds are keyed by (epoch, key),
// apart from the numbered rounds, and several may be open at once, so
// answers carry their key: a rank may wait in several from several
// threads.
//
// kLeaving tells `collrun --enable-recovery` which ranks finalized: one
// that exits non-zero after it is a survivor that failed, one that exits
// non-zero without it died (collrun.cpp). A process exit closes the
// connection exactly as a finalize does, so the close alone cannot tell.
//
// Rounds are numbered from 1 per connection. collrun answers a round when
// every rank has sent it. The epoch counts the collrun bootstraps this
// process made before (a program may init, finalize and init again): rounds
// of different epochs never mix.
//
// Every length read from the wire is checked against the bytes that remain
// and against the limits below before anything is allocated; before its
// hello is accepted a connection may send nothing but a hello.
//
// The hello's proof is job_secret::prove(secret, kRankRole, nonce, the
// hello's statement) and the welcome's is prove(secret, kCollrunRole,
// rank_nonce, the same statement) (job_secret.hpp): only a process that
// holds the job's COLL_JOB_SECRET joins, a proof is good on the one
// connection whose nonce it answers, and a rank knows its collrun.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace coll::collrun_protocol {

inline constexpr uint32_t kVersion = 4;  // 3: kLeaving; 4: kSurvivorRound

// What collrun puts in each rank's environment.
inline constexpr const char* kEnvAddress = "COLL_BOOTSTRAP";  // "host:port"
inline constexpr const char* kEnvRank = "COLL_RANK";
inline constexpr const char* kEnvSize = "COLL_SIZE";
inline constexpr const char* kEnvLocalRank = "COLL_LOCAL_RANK";
inline constexpr const char* kEnvLocalSize = "COLL_LOCAL_SIZE";
inline constexpr const char* kEnvJobId = "COLL_JOBID";
// COLL_JOB_SECRET (job_secret::kEnv): the job's secret, 64 hex digits.

inline constexpr const char* kRankRole = "libcoll rank hello";
inline constexpr const char* kCollrunRole = "libcoll collrun welcome";
inline constexpr uint64_t kNonceBytes = 32;
inline constexpr uint64_t kProofBytes = 32;

enum class MessageType : uint32_t {
  kHello = 1,
  kWelcome = 2,
  kRefused = 3,
  kRound = 4,
  kResult = 5,
  kQuery = 6,
  kMissing = 7,
  kFailed = 8,
  kChallenge = 9,
  kLeaving = 10,
  kSurvivorRound = 11,
  kSurvivorResult = 12,
};

inline constexpr size_t kHeaderBytes = 12;
// One rank's blob in one round. Bootstrap blobs are addresses and keys
// (bytes to kilobytes); a few MB are allowed with a wide margin.
inline constexpr uint64_t kMaxBlobBytes = uint64_t{256} << 20;
inline constexpr uint64_t kMaxJobIdBytes = 256;
inline constexpr uint64_t kMaxMessageBytes = 4096;  // reasons, messages
inline constexpr uint32_t kMaxRanks = 1u << 20;
// One member's blob in a survivors' round: what a communicator's recovery
// agrees on (a few words, a bit set of ranks) is small, and every rank's
// answer holds every member's.
inline constexpr uint64_t kMaxSurvivorBlobBytes = uint64_t{64} << 10;
// A survivors' round's timeout as it travels (ms): at most a day.
inline constexpr uint64_t kMaxSurvivorTimeoutMs = uint64_t{24} * 3600 * 1000;

inline const char* message_type_name(uint32_t type) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHello:
      return "hello";
    case MessageType::kWelcome:
      return "welcome";
    case MessageType::kRefused:
      return "refused";
    case MessageType::kRound:
      return "round";
    case MessageType::kResult:
      return "result";
    case MessageType::kQuery:
      return "query";
    case MessageType::kMissing:
      return "missing";
    case MessageType::kFailed:
      return "failed";
    case MessageType::kChallenge:
      return "challenge";
    case MessageType::kLeaving:
      return "leaving";
    case MessageType::kSurvivorRound:
      return "survivors' round";
    case MessageType::kSurvivorResult:
      return "survivors' result";
  }
  return "unknown";
}

// Builds one frame: header first, payload appended, length patched by
// finish(), which hands the frame over (call it once).
class FrameWriter {
 public:
  explicit FrameWriter(MessageType type) {
    put_u32(static_cast<uint32_t>(type));
    put_u64(0);
  }
  FrameWriter& put_u32(uint32_t value) { return put_le(value, 4); }
  FrameWriter& put_u64(uint64_t value) { return put_le(value, 8); }
  FrameWriter& put_bytes(std::string_view bytes) {
    put_u64(bytes.size());
    data_.append(bytes);
    return *this;
  }
  std::string finish() {
    uint64_t payload = data_.size() - kHeaderBytes;
    for (int i = 0; i < 8; ++i) data_[4 + i] = static_cast<char>((payload >> (8 * i)) & 0xff);
    return std::move(data_);
  }

 private:
  FrameWriter& put_le(uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) data_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
    return *this;
  }
  std::string data_;
};

struct FrameHeader {
  uint32_t type = 0;
  uint64_t length = 0;
};

inline FrameHeader parse_header(const char* bytes) {
  FrameHeader header;
  for (int i = 0; i < 4; ++i)
    header.type |= uint32_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  for (int i = 0; i < 8; ++i)
    header.length |= uint64_t{static_cast<unsigned char>(bytes[4 + i])} << (8 * i);
  return header;
}

// The largest payload a receiver accepts for a frame type, so that a corrupt
// or hostile length is refused before it is allocated. The result of a round
// is bounded by the ranks' blobs, which the receiver bounds by its size.
inline uint64_t max_payload_bytes(uint32_t type, uint32_t world_size) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHello:
      return 4 * 3 + 8 * 2 + 8 + kMaxJobIdBytes + 8 + kNonceBytes + 8 + kProofBytes;
    case MessageType::kWelcome:
      return 8 + kProofBytes;
    case MessageType::kChallenge:
      return 8 + kNonceBytes;
    case MessageType::kRefused:
      return 8 + kMaxMessageBytes;
    case MessageType::kRound:
      return 8 + 8 + kMaxBlobBytes;
    case MessageType::kResult:
      return 8 + 4 + uint64_t{world_size} * (8 + kMaxBlobBytes);
    case MessageType::kQuery:
      return 8;
    case MessageType::kMissing:
      return 8 + 4 + uint64_t{world_size} * 4;
    case MessageType::kFailed:
      return 4 + 8 + kMaxMessageBytes;
    case MessageType::kLeaving:
      return 0;
    case MessageType::kSurvivorRound:
      return 8 + 8 + 4 + uint64_t{world_size} * 4 + 8 + kMaxSurvivorBlobBytes;
    case MessageType::kSurvivorResult:
      return 8 + 4 + 8 + kMaxMessageBytes + 4 +
             uint64_t{world_size} * (4 + 8 + kMaxSurvivorBlobBytes);
  }
  return 0;
}

// Reads a payload front to back; every get fails (returns false) rather than
// read past the end, and the reader stays failed.
class PayloadReader {
 public:
  explicit PayloadReader(std::string_view payload) : rest_(payload) {}

  bool get_u32(uint32_t& value) {
    uint64_t wide = 0;
    if (!get_le(wide, 4)) return false;
    value = static_cast<uint32_t>(wide);
    return true;
  }
  bool get_u64(uint64_t& value) { return get_le(value, 8); }
  bool get_bytes(std::string_view& bytes, uint64_t max_bytes) {
    uint64_t length = 0;
    if (!get_u64(length) || length > max_bytes || length > rest_.size()) return fail();
    bytes = rest_.substr(0, length);
    rest_.remove_prefix(length);
    return true;
  }
  // True when the whole payload was read and nothing failed.
  bool done() const { return ok_ && rest_.empty(); }
  bool ok() const { return ok_; }
  size_t remaining() const { return rest_.size(); }

 private:
  bool get_le(uint64_t& value, int bytes) {
    if (!ok_ || rest_.size() < static_cast<size_t>(bytes)) return fail();
    value = 0;
    for (int i = 0; i < bytes; ++i)
      value |= uint64_t{static_cast<unsigned char>(rest_[i])} << (8 * i);
    rest_.remove_prefix(bytes);
    return true;
  }
  bool fail() {
    ok_ = false;
    return false;
  }

  std::string_view rest_;
  bool ok_ = true;
};

// A job id must be usable in file names (shared-memory segments are named
// "coll-<job id>-..."), so only these characters are allowed.
inline bool is_valid_job_id(std::string_view job_id) {
  if (job_id.empty() || job_id.size() > kMaxJobIdBytes) return false;
  for (char c : job_id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return job_id != "." && job_id != "..";
}

// What a hello says, as its proof covers it: every field, length-prefixed
// where it has a length.
inline std::string hello_statement(uint32_t version, uint32_t rank, uint32_t size, uint64_t epoch,
                                   uint64_t pid, std::string_view job_id,
                                   std::string_view rank_nonce) {
  std::string s;
  auto put = [&s](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  put(version, 4);
  put(rank, 4);
  put(size, 4);
  put(epoch, 8);
  put(pid, 8);
  put(job_id.size(), 8);
  s.append(job_id);
  put(rank_nonce.size(), 8);
  s.append(rank_nonce);
  return s;
}

}  // namespace coll::collrun_protocol
