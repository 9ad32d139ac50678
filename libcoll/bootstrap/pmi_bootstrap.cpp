// Bootstrap through a PMI-1 server: MPICH's Hydra (mpirun.mpich,
// mpiexec.hydra) hands every process it starts one end of a socket in
// PMI_FD, with PMI_RANK and PMI_SIZE, and serves the "simple PMI" wire
// protocol on it (pmi_wire.hpp). An allgather is a put of this rank's blob
// under fresh keys, a barrier (after which every rank's puts are visible),
// and a get per rank and chunk. The server's key-value store is the job's:
// only the job's processes hold a PMI socket.
//
// The connection is the process's, not a bootstrap's, for two reasons:
//  - an MPI library in the same process (MPICH) talks on the same socket.
//    Requests and answers alternate, one at a time, so the two never mix
//    as long as they are not made at the same moment from two threads;
//    keys are ours alone (libcoll.*), and barriers pair up as long as every
//    rank calls MPI_Init and coll_init in the same order, as with PMIx;
//  - Hydra ends the connection at the first `finalize`, and kills the whole
//    job when a process that said `init` exits without one. So libcoll says
//    `finalize` once, when the process exits (an atexit handler), not at
//    coll_finalize: an MPI library may still need the socket then, and
//    MPI_Finalize's own finalize, if it came first, leaves ours to fail
//    quietly on a closed socket. A program that calls coll_finalize after
//    MPI_Finalize loses only coll_finalize's last barrier.
// We talk on a dup() of PMI_FD, so that an MPI library closing its
// descriptor cannot leave ours naming another file.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/deadline.hpp"
#include "bootstrap/pmi_wire.hpp"
#include "bootstrap/unique_fd.hpp"
#include "error.hpp"
#include "job_secret.hpp"

namespace coll {
namespace {

constexpr const char* kEnvFd = "PMI_FD";
constexpr const char* kEnvRank = "PMI_RANK";
constexpr const char* kEnvSize = "PMI_SIZE";
// A blob larger than this from a peer is refused before it is fetched: the
// bootstraps carry addresses and host names, a few hundred bytes a rank.
constexpr size_t kMaxBlobBytes = size_t{1} << 24;
// How long the exit handler waits for finalize_ack.
constexpr double kFinalizeSeconds = 2.0;

long parse_env_integer(const char* name, long min, long max) {
  return static_cast<long>(
      launcher_integer(name, min, max, kEnvFd, "a PMI-1 launcher (mpirun.mpich)"));
}

// What a line the server sent looks like in an error message: printable,
// and short.
std::string shown(std::string_view line) {
  std::string text;
  for (char c : line.substr(0, 120))
    text += (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) ? c : '?';
  if (line.size() > 120) text += "...";
  return text;
}

// The process's connection to its PMI server (see the top of this file).
class PmiConnection {
 public:
  // The connection, set up on first use (init, get_maxes, get_my_kvsname).
  static PmiConnection& get(double timeout_s) {
    PmiConnection& connection = instance();
    std::lock_guard<std::mutex> lock(connection.mutex_);
    if (!connection.fd_) connection.open(timeout_s);
    return connection;
  }

  std::mutex& mutex() { return mutex_; }
  const std::string& kvsname() const { return kvsname_; }
  size_t vallen_max() const { return vallen_max_; }
  size_t keylen_max() const { return keylen_max_; }

  // Sends `line` and returns the answer, which must be `answer_command`
  // with rc 0. what names the request in errors. The caller holds mutex().
  pmi_wire::Message request(const std::string& line, const char* answer_command,
                            const Deadline& deadline, const char* what) {
    send_line(line, deadline, what);
    std::string reply = receive_line(deadline, what);
    auto message = pmi_wire::Message::parse(reply);
    if (!message)
      fail(COLL_ERR_TRANSPORT,
           "the PMI server (%s) answered %s with a line that is not PMI-1: '%s'", kEnvFd, what,
           shown(reply).c_str());
    if (message->command() != answer_command)
      fail(COLL_ERR_TRANSPORT, "the PMI server (%s) answered %s with cmd=%s, not cmd=%s", kEnvFd,
           what, shown(message->command()).c_str(), answer_command);
    auto rc = message->rc();
    if (!rc || *rc != 0)
      fail(COLL_ERR_TRANSPORT, "the PMI server (%s) refused %s: rc=%s msg=%s", kEnvFd, what,
           shown(message->get("rc").value_or("?")).c_str(),
           shown(message->get("msg").value_or("")).c_str());
    return *message;
  }

 private:
  PmiConnection() = default;

  void open(double timeout_s) {
    int fd = static_cast<int>(parse_env_integer(kEnvFd, 0, 1 << 20));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
      fail(COLL_ERR_INVALID_ARG,
           "%s=%d names no open socket in this process: a variable inherited from a PMI-1 "
           "launcher by a process it did not start? (unset %s, %s and %s)",
           kEnvFd, fd, kEnvFd, kEnvRank, kEnvSize);
    UniqueFd own(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
    if (!own) fail_errno(COLL_ERR_NO_RESOURCES, errno, "dup of %s=%d", kEnvFd, fd);
    fd_ = std::move(own);
    pid_ = ::getpid();
    try {
      Deadline deadline(timeout_s);
      request("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init", deadline, "init");
      auto maxes = request("cmd=get_maxes", "maxes", deadline, "get_maxes");
      vallen_max_ = parse_max(maxes, "vallen_max");
      keylen_max_ = parse_max(maxes, "keylen_max");
      if (pmi_wire::chunk_bytes(vallen_max_) == 0)
        fail(COLL_ERR_TRANSPORT,
             "the PMI server's values are too short to carry a blob "
             "(vallen_max=%zu)",
             vallen_max_);
      auto name = request("cmd=get_my_kvsname", "my_kvsname", deadline, "get_my_kvsname");
      kvsname_ = std::string(name.get("kvsname").value_or(""));
      if (kvsname_.empty())
        fail(COLL_ERR_TRANSPORT, "the PMI server named no key-value space (get_my_kvsname)");
    } catch (const Error&) {
      fd_.reset();  // the next try starts over (and says init again)
      throw;
    }
  }

  static size_t parse_max(const pmi_wire::Message& maxes, const char* key) {
    auto text = maxes.get(key);
    char* end = nullptr;
    std::string copy(text.value_or(""));
    unsigned long value = std::strtoul(copy.c_str(), &end, 10);
    if (copy.empty() || *end != '\0' || value > (1ul << 24))
      fail(COLL_ERR_TRANSPORT, "the PMI server's maxes give %s='%s'", key, shown(copy).c_str());
    return value;
  }

  static void finalize_at_exit() {
    PmiConnection* self = &instance();
    // A child that fork() made shares the socket: only the process that
    // said init says finalize.
    if (!self->fd_ || self->pid_ != ::getpid()) return;
    try {
      Deadline deadline(kFinalizeSeconds);
      self->request("cmd=finalize", "finalize_ack", deadline, "finalize");
    } catch (const Error&) {
      // The server closed the connection already (MPI_Finalize said
      // finalize first) or is gone: nothing is left to tell it.
    }
    self->fd_.reset();
  }

  // The one object, opened or not; it lives until the process exits (the
  // exit handler uses it), so it is never destroyed.
  static PmiConnection& instance() {
    // The exit handler, registered once with the object, says finalize
    // only where init was said (fd_ open).
    static PmiConnection* connection = [] {
      std::atexit(&finalize_at_exit);
      return new PmiConnection();
    }();
    return *connection;
  }

  void send_line(std::string line, const Deadline& deadline, const char* what) {
    line += '\n';
    int err = send_before(fd_.get(), line, deadline);
    if (err == ETIMEDOUT)
      fail(COLL_ERR_TIMEOUT, "sending %s to the PMI server (%s) did not finish within %g s", what,
           kEnvFd, deadline.seconds());
    if (err != 0) fail_lost(what, err);
  }

  std::string receive_line(const Deadline& deadline, const char* what) {
    for (;;) {
      size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        std::string line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return line;
      }
      if (buffer_.size() > pmi_wire::kMaxLineBytes)
        fail(COLL_ERR_TRANSPORT,
             "the PMI server (%s) sent over %zu bytes without a newline "
             "in answer to %s: '%s'",
             kEnvFd, pmi_wire::kMaxLineBytes, what, shown(buffer_).c_str());
      char chunk[1024];
      ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, MSG_DONTWAIT);
      if (n > 0) {
        buffer_.append(chunk, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) fail_lost(what, 0);
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) fail_lost(what, errno);
      if (!wait_for(POLLIN, deadline))
        fail(COLL_ERR_TIMEOUT, "the PMI server (%s) did not answer %s within %g s%s", kEnvFd, what,
             deadline.seconds(),
             std::strcmp(what, "barrier") == 0 ? ": a rank did not reach the bootstrap's barrier"
                                               : "");
    }
  }

  bool wait_for(short events, const Deadline& deadline) {
    int ready = wait_ready(fd_.get(), events, deadline);
    if (ready < 0) fail_errno(COLL_ERR_TRANSPORT, errno, "poll on the PMI socket");
    return ready > 0;
  }

  [[noreturn]] void fail_lost(const char* what, int err) {
    fail(COLL_ERR_PEER_LOST,
         "the PMI server (%s) closed the connection during %s%s%s: the job is ending (another "
         "rank failed?), or this process's PMI session was finalized (MPI_Finalize before "
         "coll_finalize?)",
         kEnvFd, what, err ? ": " : "", err ? std::strerror(err) : "");
  }

  std::mutex mutex_;
  UniqueFd fd_;
  pid_t pid_ = 0;
  std::string buffer_;  // received, not yet a whole line
  std::string kvsname_;
  size_t vallen_max_ = 0;
  size_t keylen_max_ = 0;
};

// Counts the PMI bootstraps this process made: the server keeps every key
// for the job's life, so a later bootstrap must never read a former one's.
std::atomic<uint64_t> pmi_bootstrap_epoch{0};

class PmiBootstrap final : public Bootstrap {
 public:
  PmiBootstrap(PmiConnection& connection, int rank, int size)
      : connection_(connection),
        rank_(rank),
        size_(size),
        job_id_(job_id_from_launcher_name("pmi_", connection.kvsname())),
        epoch_(pmi_bootstrap_epoch.fetch_add(1)) {}

  const char* name() const override { return "pmi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string job_id() const override { return job_id_; }
  const std::string& secret() const override { return secret_; }
  void set_secret(std::string secret) { secret_ = std::move(secret); }

 protected:
  std::vector<std::string> exchange(const std::string& mine, double timeout_s) override {
    Deadline deadline(timeout_s);
    std::lock_guard<std::mutex> lock(connection_.mutex());
    const std::string round = "libcoll." + std::to_string(epoch_) + "." + std::to_string(++round_);
    const size_t vallen = connection_.vallen_max();
    const std::vector<std::string> values = pmi_wire::chunk_values(mine, vallen);
    for (size_t i = 0; i < values.size(); ++i) put(key(round, rank_, i), values[i], deadline);
    connection_.request("cmd=barrier_in", "barrier_out", deadline, "barrier");

    std::vector<std::string> blobs(static_cast<size_t>(size_));
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) {
        blobs[static_cast<size_t>(peer)] = mine;
        continue;
      }
      std::vector<std::string> chunks{get(key(round, peer, 0), deadline)};
      auto header = pmi_wire::parse_first_chunk(chunks[0], vallen);
      if (!header || header->length > kMaxBlobBytes)
        fail(COLL_ERR_TRANSPORT,
             "rank %d's bootstrap value %s is not libcoll's (or over %zu bytes): '%s'", peer,
             key(round, peer, 0).c_str(), kMaxBlobBytes, shown(chunks[0]).c_str());
      for (size_t i = 1; i < header->chunks; ++i)
        chunks.push_back(get(key(round, peer, i), deadline));
      auto blob = pmi_wire::join_chunks(chunks, vallen);
      if (!blob)
        fail(COLL_ERR_TRANSPORT, "rank %d's bootstrap values under %s.* do not make a blob", peer,
             round.c_str());
      blobs[static_cast<size_t>(peer)] = std::move(*blob);
    }
    return blobs;
  }

 private:
  std::string key(const std::string& round, int rank, size_t chunk) const {
    std::string k = round + "." + std::to_string(rank) + "." + std::to_string(chunk);
    // keylen_max counts the terminating NUL, as vallen_max does.
    if (k.size() + 1 > connection_.keylen_max())
      fail(COLL_ERR_TRANSPORT, "the PMI server's keys hold only %zu characters; '%s' needs more",
           connection_.keylen_max(), k.c_str());
    return k;
  }

  void put(const std::string& key, const std::string& value, const Deadline& deadline) {
    connection_.request(
        "cmd=put kvsname=" + connection_.kvsname() + " key=" + key + " value=" + value,
        "put_result", deadline, "put");
  }

  std::string get(const std::string& key, const Deadline& deadline) {
    auto answer = connection_.request("cmd=get kvsname=" + connection_.kvsname() + " key=" + key,
                                      "get_result", deadline, "get");
    return std::string(answer.get("value").value_or(""));
  }

  PmiConnection& connection_;
  int rank_;
  int size_;
  std::string job_id_;
  uint64_t epoch_;
  uint64_t round_ = 0;
  std::string secret_;
};

}  // namespace

bool environment_names_pmi_server() { return env_or_null(kEnvFd) != nullptr; }

std::unique_ptr<Bootstrap> make_pmi_bootstrap(double timeout_s) {
  if (!environment_names_pmi_server()) return nullptr;
  long size = parse_env_integer(kEnvSize, 1, 1 << 24);
  long rank = parse_env_integer(kEnvRank, 0, size - 1);
  PmiConnection& connection = PmiConnection::get(timeout_s);
  auto bootstrap =
      std::make_unique<PmiBootstrap>(connection, static_cast<int>(rank), static_cast<int>(size));
  // As under PMIx: the job's secret is rank 0's, carried by the server's
  // key-value store; COLL_JOB_SECRET, inherited from elsewhere, need not
  // be the same on every rank.
  bootstrap->set_secret(secret_from_rank0(*bootstrap, timeout_s));
  return bootstrap;
}

}  // namespace coll
