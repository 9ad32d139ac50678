// The client side of collrun's rendezvous (protocol in collrun_protocol.hpp).
// collrun passes the address of its listening socket and this rank's identity
// in the environment; every allgather is one round trip to collrun, which
// answers once all ranks have sent the round.
//
// The socket is non-blocking and every wait is a poll() bounded by the
// caller's timeout. A failure (timeout, lost connection, a refusal, a
// malformed frame) is sticky: the connection is out of step with collrun
// afterwards, so every later allgather reports the same error.
//
// Survivors' rounds (survivor_round) may be awaited from several threads at
// once (recovery of several communicators), so answers are demultiplexed:
// whichever waiting thread reads the connection files each frame by what
// it answers (a survivors' round by its key, else the numbered round) and
// wakes the others. A lost connection or a malformed frame fails every
// waiter, and every later call, with the same error.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/collrun_protocol.hpp"
#include "bootstrap/deadline.hpp"
#include "bootstrap/unique_fd.hpp"
#include "error.hpp"
#include "job_secret.hpp"

namespace coll {
namespace {

namespace proto = collrun_protocol;
using proto::MessageType;

// Counts the collrun bootstraps this process has made (see "epoch" in
// collrun_protocol.hpp).
std::atomic<uint64_t> bootstrap_epoch{0};

long long parse_env_integer(const char* name, long long min, long long max) {
  return launcher_integer(name, min, max, proto::kEnvAddress, "collrun");
}

struct Frame {
  uint32_t type = 0;
  std::string payload;
};

std::string describe_ranks(const std::vector<uint32_t>& ranks) {
  constexpr size_t kShown = 16;
  std::string text = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(ranks[i]);
  }
  if (ranks.size() > kShown) text += strfmt(" and %zu more", ranks.size() - kShown);
  return text;
}

[[noreturn]] void fail_connection_lost() {
  fail(COLL_ERR_PEER_LOST, "collrun closed the bootstrap connection: another rank failed?");
}

// One connection to collrun.
class CollrunConnection {
 public:
  CollrunConnection(std::string address, uint32_t world_size)
      : address_(std::move(address)), world_size_(world_size) {}
  const std::string& address() const { return address_; }

  void connect(const Deadline& deadline) {
    size_t colon = address_.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == address_.size())
      fail(COLL_ERR_INVALID_ARG, "%s='%s' is not host:port", proto::kEnvAddress, address_.c_str());
    std::string host = address_.substr(0, colon);
    std::string port = address_.substr(colon + 1);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);

    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* found = nullptr;
    int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    if (rc != 0)
      fail(COLL_ERR_INVALID_ARG, "%s='%s': cannot resolve: %s", proto::kEnvAddress,
           address_.c_str(), ::gai_strerror(rc));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, &::freeaddrinfo);

    // collrun listens before it starts any rank, so the first try normally
    // succeeds; retrying covers a busy listen backlog.
    int last_error = 0;
    auto backoff = std::chrono::milliseconds(10);
    for (;;) {
      for (addrinfo* a = addresses.get(); a; a = a->ai_next) {
        last_error = try_connect(*a, deadline);
        if (last_error == 0) return;
      }
      if (deadline.expired())
        fail(COLL_ERR_TIMEOUT, "could not connect to collrun at %s (%s) within %g s: %s",
             address_.c_str(), proto::kEnvAddress, deadline.seconds(), std::strerror(last_error));
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
          backoff, std::chrono::milliseconds(deadline.poll_ms())));
      backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
    }
  }

  // Sends the whole frame or throws.
  void send_all(std::string_view bytes, const Deadline& deadline, const char* what) {
    int err = send_before(fd_.get(), bytes, deadline);
    if (err == 0) return;
    if (err == ETIMEDOUT)
      fail(COLL_ERR_TIMEOUT, "sending the %s to collrun (%s) did not finish within %g s", what,
           address_.c_str(), deadline.seconds());
    if (err == EPIPE || err == ECONNRESET) fail_connection_lost();
    fail_errno(COLL_ERR_PEER_LOST, err, "sending the %s to collrun (%s)", what, address_.c_str());
  }

  // The next frame, or nullopt when the deadline passes first. A frame that
  // breaks the protocol's limits is an error.
  std::optional<Frame> receive(const Deadline& deadline) {
    char header_bytes[proto::kHeaderBytes];
    if (!receive_exactly(header_bytes, sizeof header_bytes, deadline,
                         /*started=*/false))
      return std::nullopt;
    proto::FrameHeader header = proto::parse_header(header_bytes);
    uint64_t limit = proto::max_payload_bytes(header.type, world_size_);
    if (!from_collrun(header.type) || header.length > limit)
      fail(COLL_ERR_INTERNAL,
           "collrun sent a malformed frame (type %u, length %llu, at most "
           "%llu allowed): is %s the address of a collrun of the same "
           "version?",
           header.type, static_cast<unsigned long long>(header.length),
           static_cast<unsigned long long>(limit), proto::kEnvAddress);
    Frame frame;
    frame.type = header.type;
    frame.payload.resize(header.length);
    // Once a frame has begun, the rest of it is part of the same wait.
    if (!receive_exactly(frame.payload.data(), frame.payload.size(), deadline,
                         /*started=*/true))
      return std::nullopt;
    return frame;
  }

 private:
  // The frame types collrun sends.
  static bool from_collrun(uint32_t type) {
    switch (static_cast<MessageType>(type)) {
      case MessageType::kWelcome:
      case MessageType::kRefused:
      case MessageType::kResult:
      case MessageType::kMissing:
      case MessageType::kFailed:
      case MessageType::kChallenge:
      case MessageType::kSurvivorResult:
        return true;
      default:
        return false;
    }
  }

  int try_connect(const addrinfo& a, const Deadline& deadline) {
    UniqueFd fd(::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.ai_protocol));
    if (!fd) return errno;
    if (::connect(fd.get(), a.ai_addr, a.ai_addrlen) != 0) {
      if (errno != EINPROGRESS) return errno;
      pollfd p{fd.get(), POLLOUT, 0};
      int rc;
      do {
        rc = ::poll(&p, 1, deadline.poll_ms());
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) return ETIMEDOUT;
      if (rc < 0) return errno;
      int error = 0;
      socklen_t length = sizeof error;
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) return errno;
      if (error != 0) return error;
    }
    // Rounds are small request/answer exchanges: do not let Nagle delay
    // them.
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fd_ = std::move(fd);
    return 0;
  }

  // False when the deadline passes first.
  bool wait_for(short events, const Deadline& deadline) {
    int ready = wait_ready(fd_.get(), events, deadline);
    if (ready < 0) fail_errno(COLL_ERR_INTERNAL, errno, "poll on the collrun connection");
    return ready > 0;
  }

  bool receive_exactly(char* out, size_t length, const Deadline& deadline, bool started) {
    size_t got = 0;
    while (got < length) {
      ssize_t n = ::recv(fd_.get(), out + got, length - got, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) fail_connection_lost();
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!wait_for(POLLIN, deadline)) {
          if (got == 0 && !started) return false;
          fail(COLL_ERR_TIMEOUT, "collrun (%s) stopped in the middle of a message for %g s",
               address_.c_str(), deadline.seconds());
        }
        continue;
      }
      if (errno == ECONNRESET) fail_connection_lost();
      fail_errno(COLL_ERR_PEER_LOST, errno, "receiving from collrun (%s)", address_.c_str());
    }
    return true;
  }

  std::string address_;
  uint32_t world_size_;
  UniqueFd fd_;
};

std::string_view as_bytes(const job_secret::Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

class CollrunBootstrap final : public Bootstrap {
 public:
  CollrunBootstrap(std::string address, int rank, int size, std::string job_id, std::string secret)
      : connection_(std::move(address), static_cast<uint32_t>(size)),
        rank_(rank),
        size_(size),
        job_id_(std::move(job_id)),
        secret_(std::move(secret)),
        epoch_(bootstrap_epoch.fetch_add(1)) {}

  // collrun speaks first (its nonce); the hello proves the job secret over
  // it, and the welcome proves it back over ours (collrun_protocol.hpp).
  void join(double timeout_s) {
    Deadline deadline(timeout_s);
    connection_.connect(deadline);
    std::optional<Frame> challenge = connection_.receive(deadline);
    if (!challenge)
      fail(COLL_ERR_TIMEOUT, "collrun did not send rank %d its challenge within %g s", rank_,
           timeout_s);
    std::string_view nonce;
    {
      proto::PayloadReader reader(challenge->payload);
      if (challenge->type != static_cast<uint32_t>(MessageType::kChallenge) ||
          !reader.get_bytes(nonce, proto::kNonceBytes) || nonce.size() != proto::kNonceBytes ||
          !reader.done())
        fail_protocol(*challenge, "its challenge (a collrun of another libcoll version?)");
    }
    const std::string rank_nonce = secure_random_bytes(proto::kNonceBytes, "a rendezvous nonce");
    const uint64_t pid = static_cast<uint64_t>(::getpid());
    const std::string statement =
        proto::hello_statement(proto::kVersion, static_cast<uint32_t>(rank_),
                               static_cast<uint32_t>(size_), epoch_, pid, job_id_, rank_nonce);
    const job_secret::Digest proof = job_secret::prove(secret_, proto::kRankRole, nonce, statement);
    std::string hello = proto::FrameWriter(MessageType::kHello)
                            .put_u32(proto::kVersion)
                            .put_u32(static_cast<uint32_t>(rank_))
                            .put_u32(static_cast<uint32_t>(size_))
                            .put_u64(epoch_)
                            .put_u64(pid)
                            .put_bytes(job_id_)
                            .put_bytes(rank_nonce)
                            .put_bytes(as_bytes(proof))
                            .finish();
    connection_.send_all(hello, deadline, "hello");
    std::optional<Frame> answer = connection_.receive(deadline);
    if (!answer)
      fail(COLL_ERR_TIMEOUT, "collrun did not answer rank %d's hello within %g s", rank_,
           timeout_s);
    if (answer->type == static_cast<uint32_t>(MessageType::kWelcome)) {
      proto::PayloadReader reader(answer->payload);
      std::string_view theirs;
      const job_secret::Digest want =
          job_secret::prove(secret_, proto::kCollrunRole, rank_nonce, statement);
      if (!reader.get_bytes(theirs, proto::kProofBytes) || !reader.done() ||
          theirs.size() != want.size() ||
          !job_secret::equal(reinterpret_cast<const uint8_t*>(theirs.data()), want.data(),
                             want.size()))
        fail(COLL_ERR_INVALID_ARG,
             "the collrun at %s did not prove this job's secret (COLL_JOB_SECRET): not this "
             "job's collrun",
             connection_.address().c_str());
      return;
    }
    if (answer->type == static_cast<uint32_t>(MessageType::kRefused)) {
      proto::PayloadReader reader(answer->payload);
      std::string_view reason;
      if (reader.get_bytes(reason, proto::kMaxMessageBytes) && reader.done())
        fail(COLL_ERR_INVALID_ARG, "collrun refused rank %d: %.*s", rank_,
             static_cast<int>(reason.size()), reason.data());
    }
    fail_protocol(*answer, "its answer to hello");
  }

  const char* name() const override { return "collrun"; }
  // The server completes a barrier among the living under --enable-recovery
  // and fails it at once otherwise (the job is ending).
  bool barrier_survives_deaths() const override { return true; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string job_id() const override { return job_id_; }
  const std::string& secret() const override { return secret_; }

  // `collrun --enable-recovery` tells a survivor that failed (non-zero
  // exit after this) from a rank that died (non-zero exit without it).
  // The frame fits the socket's empty buffer: the deadline is a bound,
  // not a wait.
  void leave() noexcept override {
    try {
      std::lock_guard<std::mutex> sending(send_mutex_);
      connection_.send_all(proto::FrameWriter(MessageType::kLeaving).finish(), Deadline(1.0),
                           "leaving notice");
    } catch (const Error&) {
      // collrun gone or the connection failed: nobody to tell.
    }
  }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double timeout_s) override {
    if (mine.size() > proto::kMaxBlobBytes)
      fail(COLL_ERR_INVALID_ARG, "bootstrap allgather of %zu bytes: at most %llu bytes per rank",
           mine.size(), static_cast<unsigned long long>(proto::kMaxBlobBytes));
    Deadline deadline(timeout_s);
    uint64_t round = ++round_;
    send(proto::FrameWriter(MessageType::kRound).put_u64(round).put_bytes(mine).finish(), deadline,
         "bootstrap round");
    std::optional<Frame> frame = await(deadline, [this] { return take_round_frame(); });
    if (!frame) return after_timeout(round, mine, timeout_s);
    return take_result(*frame, round, mine);
  }

 public:
  std::vector<std::optional<std::string>> survivor_round(uint64_t key,
                                                         const std::vector<int>& members,
                                                         const std::string& mine,
                                                         double timeout_s) override {
    check_survivor_arguments(key, members, mine, timeout_s);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (broken_) std::rethrow_exception(broken_);
      if (!survivors_waiting_.insert(key).second)
        fail(COLL_ERR_INVALID_ARG,
             "rank %d is in survivors' round %llu already (another thread?): one call a key at "
             "a time",
             rank_, static_cast<unsigned long long>(key));
    }
    // Whatever ends the wait, an answer that comes later is dropped.
    struct Unwait {
      CollrunBootstrap& self;
      uint64_t key;
      ~Unwait() {
        std::lock_guard<std::mutex> lock(self.mutex_);
        self.survivors_waiting_.erase(key);
        self.survivor_frames_.erase(key);
      }
    } unwait{*this, key};

    // collrun answers within timeout_s of the first caller's arrival,
    // killing who has not joined; the rest is a margin for the reaping and
    // for a caller that arrives up to timeout_s after the first.
    const double limit_s = 2 * timeout_s + 5;
    Deadline deadline(limit_s);
    const auto timeout_ms = static_cast<uint64_t>(std::ceil(timeout_s * 1000));
    proto::FrameWriter request(MessageType::kSurvivorRound);
    request.put_u64(key).put_u64(timeout_ms).put_u32(static_cast<uint32_t>(members.size()));
    for (int member : members) request.put_u32(static_cast<uint32_t>(member));
    send(request.put_bytes(mine).finish(), deadline, "survivors' round");
    std::optional<Frame> frame = await(deadline, [this, key]() -> std::optional<Frame> {
      auto found = survivor_frames_.find(key);
      if (found == survivor_frames_.end()) return std::nullopt;
      Frame frame = std::move(found->second);
      survivor_frames_.erase(found);
      return frame;
    });
    if (!frame)
      fail(COLL_ERR_TIMEOUT,
           "survivors' round %llu (rank %d, %zu members): no answer from collrun within %g s "
           "(2 x the round's timeout of %g s + 5 s)",
           static_cast<unsigned long long>(key), rank_, members.size(), limit_s, timeout_s);
    return take_survivor_result(*frame, key, members, mine);
  }

 protected:
 private:
  // Asks collrun which ranks have not sent the round, to name them in the
  // error. The round may complete in that moment: then it is a success.
  std::vector<std::string> after_timeout(uint64_t round, const std::string& mine,
                                         double timeout_s) {
    std::string waiting_for;
    Deadline grace(1.0);
    send(proto::FrameWriter(MessageType::kQuery).put_u64(round).finish(), grace, "query");
    std::optional<Frame> frame = await(grace, [this] { return take_round_frame(); });
    if (frame && frame->type == static_cast<uint32_t>(MessageType::kMissing)) {
      proto::PayloadReader reader(frame->payload);
      uint64_t answered_round = 0;
      uint32_t count = 0;
      std::vector<uint32_t> missing;
      bool ok = reader.get_u64(answered_round) && reader.get_u32(count) &&
                count <= static_cast<uint32_t>(size_);
      for (uint32_t i = 0; ok && i < count; ++i) {
        uint32_t rank = 0;
        ok = reader.get_u32(rank);
        missing.push_back(rank);
      }
      if (!ok || !reader.done() || answered_round != round)
        fail_protocol(*frame, "its answer to a query");
      if (!missing.empty()) waiting_for = " waiting for " + describe_ranks(missing);
    } else if (frame) {
      return take_result(*frame, round, mine);
    }
    fail(COLL_ERR_TIMEOUT,
         "bootstrap allgather (collrun round %llu, rank %d of %d) timed out "
         "after %g s%s",
         static_cast<unsigned long long>(round), rank_, size_, timeout_s, waiting_for.c_str());
  }

  std::vector<std::string> take_result(const Frame& frame, uint64_t round,
                                       const std::string& mine) {
    if (frame.type == static_cast<uint32_t>(MessageType::kFailed)) {
      proto::PayloadReader reader(frame.payload);
      uint32_t status = 0;
      std::string_view message;
      if (reader.get_u32(status) && reader.get_bytes(message, proto::kMaxMessageBytes) &&
          reader.done() && status != COLL_SUCCESS)
        fail(static_cast<int>(status), "collrun: %.*s", static_cast<int>(message.size()),
             message.data());
      fail_protocol(frame, "a failure report");
    }
    if (frame.type != static_cast<uint32_t>(MessageType::kResult))
      fail_protocol(frame, "the answer to a round");
    proto::PayloadReader reader(frame.payload);
    uint64_t answered_round = 0;
    uint32_t count = 0;
    if (!reader.get_u64(answered_round) || !reader.get_u32(count) || answered_round != round ||
        count != static_cast<uint32_t>(size_))
      fail_protocol(frame, "the answer to a round");
    std::vector<std::string> blobs;
    blobs.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      std::string_view blob;
      if (!reader.get_bytes(blob, proto::kMaxBlobBytes))
        fail_protocol(frame, "the answer to a round");
      blobs.emplace_back(blob);
    }
    if (!reader.done() || blobs[static_cast<size_t>(rank_)] != mine)
      fail_protocol(frame, "the answer to a round");
    return blobs;
  }

  // Arguments a collrun would refuse, refused here with the values.
  void check_survivor_arguments(uint64_t key, const std::vector<int>& members,
                                const std::string& mine, double timeout_s) const {
    const auto round = static_cast<unsigned long long>(key);
    if (members.empty() || members.size() > static_cast<size_t>(size_))
      fail(COLL_ERR_INVALID_ARG, "survivors' round %llu: %zu members in a job of %d", round,
           members.size(), size_);
    bool self = false;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] < 0 || members[i] >= size_)
        fail(COLL_ERR_INVALID_ARG, "survivors' round %llu: member %zu is rank %d, not in [0, %d)",
             round, i, members[i], size_);
      if (i > 0 && members[i] <= members[i - 1])
        fail(COLL_ERR_INVALID_ARG,
             "survivors' round %llu: members must increase strictly, but member %zu is rank %d "
             "after rank %d",
             round, i, members[i], members[i - 1]);
      self = self || members[i] == rank_;
    }
    if (!self)
      fail(COLL_ERR_INVALID_ARG,
           "survivors' round %llu: rank %d calls it but is not among its %zu "
           "members",
           round, rank_, members.size());
    if (mine.size() > proto::kMaxSurvivorBlobBytes)
      fail(COLL_ERR_INVALID_ARG, "survivors' round %llu: a blob of %zu bytes, at most %llu", round,
           mine.size(), static_cast<unsigned long long>(proto::kMaxSurvivorBlobBytes));
    if (!(timeout_s > 0) || timeout_s * 1000 > double(proto::kMaxSurvivorTimeoutMs))
      fail(COLL_ERR_INVALID_ARG, "survivors' round %llu: timeout %g s is not in (0, %llu]", round,
           timeout_s, static_cast<unsigned long long>(proto::kMaxSurvivorTimeoutMs / 1000));
  }

  std::vector<std::optional<std::string>> take_survivor_result(const Frame& frame, uint64_t key,
                                                               const std::vector<int>& members,
                                                               const std::string& mine) {
    proto::PayloadReader reader(frame.payload);
    uint64_t answered = 0;
    uint32_t status = 0, count = 0;
    std::string_view message;
    bool ok = reader.get_u64(answered) && answered == key && reader.get_u32(status) &&
              reader.get_bytes(message, proto::kMaxMessageBytes) && reader.get_u32(count);
    if (ok && status != COLL_SUCCESS && count == 0 && reader.done())
      fail(static_cast<int>(status), "collrun: %.*s", static_cast<int>(message.size()),
           message.data());
    ok = ok && status == COLL_SUCCESS && count == members.size();
    std::vector<std::optional<std::string>> blobs;
    for (uint32_t i = 0; ok && i < count; ++i) {
      uint32_t present = 0;
      std::string_view blob;
      ok = reader.get_u32(present) && present <= 1 &&
           reader.get_bytes(blob, proto::kMaxSurvivorBlobBytes) && (present || blob.empty());
      if (ok && present)
        blobs.emplace_back(std::string(blob));
      else
        blobs.emplace_back(std::nullopt);
    }
    // This rank sent its blob and is alive: its place holds it.
    const size_t self =
        static_cast<size_t>(std::find(members.begin(), members.end(), rank_) - members.begin());
    if (!ok || !reader.done() || blobs[self] != mine) {
      try {
        fail_protocol(frame, ("the answer to survivors' round " + std::to_string(key)).c_str());
      } catch (const Error&) {
        std::lock_guard<std::mutex> lock(mutex_);
        broken_ = std::current_exception();
        throw;
      }
    }
    return blobs;
  }

  // Sends a whole frame (frames of several threads never interleave); a
  // failure breaks the connection for every waiter.
  void send(const std::string& frame, const Deadline& deadline, const char* what) {
    try {
      std::lock_guard<std::mutex> sending(send_mutex_);
      connection_.send_all(frame, deadline, what);
    } catch (const Error&) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!broken_) broken_ = std::current_exception();
      throw;
    }
  }

  // The oldest answer to the numbered rounds (under mutex_).
  std::optional<Frame> take_round_frame() {
    if (round_frames_.empty()) return std::nullopt;
    Frame frame = std::move(round_frames_.front());
    round_frames_.pop_front();
    return frame;
  }

  // The first frame `take` finds filed (called under mutex_), reading the
  // connection while no other thread does; nullopt when the deadline
  // passes first.
  template <class Take>
  std::optional<Frame> await(const Deadline& deadline, Take take) {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (std::optional<Frame> frame = take()) return frame;
      if (broken_) std::rethrow_exception(broken_);
      if (deadline.expired()) return std::nullopt;
      if (reading_) {
        arrived_.wait_for(lock, std::chrono::milliseconds(deadline.poll_ms()));
        continue;
      }
      reading_ = true;
      lock.unlock();
      std::optional<Frame> frame;
      std::exception_ptr error;
      try {
        frame = connection_.receive(deadline);
      } catch (const Error&) {
        error = std::current_exception();
      }
      lock.lock();
      reading_ = false;
      if (error)
        broken_ = error;
      else if (frame)
        file(std::move(*frame));
      arrived_.notify_all();
    }
  }

  // Puts a frame where its waiter looks (under mutex_). A survivors' answer
  // nobody waits for any more (its caller timed out) is dropped.
  void file(Frame frame) {
    if (frame.type != static_cast<uint32_t>(MessageType::kSurvivorResult)) {
      round_frames_.push_back(std::move(frame));
      return;
    }
    proto::PayloadReader reader(frame.payload);
    uint64_t key = 0;
    if (!reader.get_u64(key)) {
      try {
        fail_protocol(frame, "the answer to a survivors' round");
      } catch (const Error&) {
        broken_ = std::current_exception();
      }
      return;
    }
    if (survivors_waiting_.count(key)) survivor_frames_.emplace(key, std::move(frame));
  }

  [[noreturn]] void fail_protocol(const Frame& frame, const char* what) {
    fail(COLL_ERR_INTERNAL,
         "collrun sent a malformed %s frame (%zu bytes) as %s (rank %d, "
         "round %llu)",
         proto::message_type_name(frame.type), frame.payload.size(), what, rank_,
         static_cast<unsigned long long>(round_));
  }

  CollrunConnection connection_;
  int rank_;
  int size_;
  std::string job_id_;
  std::string secret_;  // its bytes
  uint64_t epoch_;
  uint64_t round_ = 0;

  std::mutex send_mutex_;  // one frame on the wire at a time
  std::mutex mutex_;       // guards what follows
  std::condition_variable arrived_;
  bool reading_ = false;                       // a thread reads the connection
  std::exception_ptr broken_;                  // the connection's failure, for all
  std::deque<Frame> round_frames_;             // answers to the numbered rounds
  std::set<uint64_t> survivors_waiting_;       // keys being awaited
  std::map<uint64_t, Frame> survivor_frames_;  // their answers, by key
};

}  // namespace

std::unique_ptr<Bootstrap> make_collrun_bootstrap(double timeout_s) {
  const char* address = env_or_null(proto::kEnvAddress);
  if (!address) return nullptr;
  int size = static_cast<int>(parse_env_integer(proto::kEnvSize, 1, proto::kMaxRanks));
  int rank = static_cast<int>(parse_env_integer(proto::kEnvRank, 0, size - 1));
  const char* job_id = env_or_null(proto::kEnvJobId);
  if (!job_id || !proto::is_valid_job_id(job_id))
    fail(COLL_ERR_INVALID_ARG, "%s='%s' is not a job id (1 to %llu characters of [A-Za-z0-9_.-])",
         proto::kEnvJobId, job_id ? job_id : "",
         static_cast<unsigned long long>(proto::kMaxJobIdBytes));
  const char* secret_hex = env_or_null(job_secret::kEnv);
  std::string secret;
  if (!secret_hex || !job_secret::decode(secret_hex, &secret))
    fail(COLL_ERR_INVALID_ARG,
         "%s is %s: a rank started by collrun gets the job's secret there (64 hex digits); "
         "a process without it cannot join the job",
         job_secret::kEnv, secret_hex ? "not 64 hex digits" : "not set");
  auto bootstrap =
      std::make_unique<CollrunBootstrap>(address, rank, size, job_id, std::move(secret));
  bootstrap->join(timeout_s);
  return bootstrap;
}

}  // namespace coll
