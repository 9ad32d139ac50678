#include "rendezvous_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <string_view>
#include <system_error>

#include <coll/coll.h>

#include "bootstrap/collrun_protocol.hpp"
#include "job_secret.hpp"

namespace collrun {

namespace proto = coll::collrun_protocol;
using proto::MessageType;

namespace {

// Bytes read from one connection per wake-up, so that one rank sending a
// large blob does not starve the others.
constexpr size_t kReadPerWake = 256 * 1024;

using Clock = std::chrono::steady_clock;

// A connection that has not said a good hello by then is closed: a rank
// sends its hello as soon as it has the challenge.
constexpr auto kHelloWithin = std::chrono::seconds(10);

// Unidentified connections held at once, at least: past the limit the
// oldest goes, so that idle strangers cannot keep a real rank out (a rank
// answers its challenge at once; a flood that opens more than the limit
// within that round trip could still push it out).
constexpr size_t kMinUnidentified = 64;

// Lines about strangers (connections that have not proved the job's
// secret) that collrun prints per interval: any local user can connect to
// the port, and 64,000 connections in 5 s printed 64,000 lines. Past the
// limit they are counted, and one line gives the count when the interval
// ends (or the job does). What a process of the job did wrong is always
// printed.
constexpr int kStrangerLines = 10;
constexpr auto kStrangerInterval = std::chrono::seconds(10);

std::shared_ptr<const std::string> shared_frame(std::string frame) {
  return std::make_shared<const std::string>(std::move(frame));
}

std::string round_name(uint64_t round) { return "bootstrap round " + std::to_string(round); }

}  // namespace

struct RendezvousServer::Connection {
  coll::UniqueFd fd;
  std::string input;  // bytes received and not yet taken as frames
  std::deque<std::shared_ptr<const std::string>> output;
  size_t output_offset = 0;  // bytes of output.front() already sent
  int rank = -1;             // -1 until its hello is accepted
  std::string nonce;         // the challenge sent on it
  Clock::time_point opened;  // an unidentified connection gets kHelloWithin
  uint64_t epoch = 0;
  uint64_t rounds_sent = 0;
  bool closing = false;  // read nothing more; close once output is sent
  bool dead = false;     // closed; removed at the end of handle()
};

RendezvousServer::RendezvousServer(int world_size, std::string job_id, std::string secret,
                                   const std::string& listen_ip)
    : world_size_(world_size),
      job_id_(std::move(job_id)),
      secret_(std::move(secret)),
      listen_ip_(listen_ip),
      ranks_(static_cast<size_t>(world_size)) {
  listener_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener_) throw std::system_error(errno, std::generic_category(), "socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  if (::inet_pton(AF_INET, listen_ip_.c_str(), &address.sin_addr) != 1)
    throw std::system_error(EINVAL, std::generic_category(),
                            "'" + listen_ip_ + "' is not an IPv4 address");
  address.sin_port = 0;  // ephemeral
  if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    throw std::system_error(errno, std::generic_category(), "bind to " + listen_ip_);
  if (::listen(listener_.get(), std::max(world_size, SOMAXCONN)) != 0)
    throw std::system_error(errno, std::generic_category(), "listen");
  socklen_t length = sizeof address;
  if (::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw std::system_error(errno, std::generic_category(), "getsockname");
  port_ = ntohs(address.sin_port);
}

RendezvousServer::~RendezvousServer() { flush_strangers(); }

std::string RendezvousServer::address() const {
  return (listen_ip_ == "0.0.0.0" ? std::string("127.0.0.1") : listen_ip_) + ":" +
         std::to_string(port_);
}

void RendezvousServer::set_rank_process(int rank, std::string description) {
  ranks_.at(static_cast<size_t>(rank)).process = std::move(description);
}

void RendezvousServer::rank_exited(int rank, const std::string& how) {
  ranks_.at(static_cast<size_t>(rank)).exited = how;
  settle_rounds();
}

bool RendezvousServer::rank_finalized(int rank) {
  RankState& state = ranks_.at(static_cast<size_t>(rank));
  if (state.connection && !state.connection->closing) read_from(*state.connection);
  return state.finalized;
}

void RendezvousServer::add_pollfds(std::vector<pollfd>& fds) {
  first_pollfd_ = fds.size();
  polled_.clear();
  if (!listener_) return;
  fds.push_back(pollfd{listener_.get(), POLLIN, 0});
  for (Connection& connection : connections_) {
    if (connection.dead) continue;
    short events = connection.closing ? 0 : POLLIN;
    if (!connection.output.empty()) events |= POLLOUT;
    fds.push_back(pollfd{connection.fd.get(), events, 0});
    polled_.push_back(&connection);
  }
}

void RendezvousServer::handle(const std::vector<pollfd>& fds) {
  if (!listener_) return;
  for (size_t k = 0; k < polled_.size(); ++k) {
    Connection& connection = *polled_[k];
    short revents = fds[first_pollfd_ + 1 + k].revents;
    if (connection.dead) continue;
    if (revents & POLLOUT) write_to(connection);
    if (!connection.dead && !connection.closing && (revents & (POLLIN | POLLHUP | POLLERR)))
      read_from(connection);
    else if (!connection.dead && (revents & (POLLHUP | POLLERR)))
      close_connection(connection);
  }
  if (fds[first_pollfd_].revents & POLLIN) accept_connections();
  close_stale_unidentified();
  if (strangers_not_shown_ > 0 && Clock::now() - stranger_interval_start_ >= kStrangerInterval)
    flush_strangers();
  connections_.remove_if([](const Connection& c) { return c.dead; });
  polled_.clear();
  settle_rounds();
}

void RendezvousServer::shut_down() {
  flush_strangers();
  listener_.reset();
  connections_.clear();
  polled_.clear();
  rounds_.clear();
  survivor_rounds_.clear();
  for (RankState& rank : ranks_) rank.connection = nullptr;
}

void RendezvousServer::accept_connections() {
  // Connections without an accepted hello cost a descriptor each; a
  // stranger flooding the port must neither run collrun out of them nor
  // keep real ranks out: past the limit the oldest unidentified one goes
  // (a real rank answers its challenge at once), and each has kHelloWithin.
  const size_t max_unidentified =
      std::max(kMinUnidentified, 2 * static_cast<size_t>(world_size_) + 16);
  for (int i = 0; i < 64; ++i) {
    coll::UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd) return;  // EAGAIN, or an error of that one connection
    size_t unidentified = 0;
    Connection* oldest = nullptr;
    for (Connection& c : connections_) {
      if (c.rank >= 0 || c.dead) continue;
      ++unidentified;
      if (!oldest || c.opened < oldest->opened) oldest = &c;
    }
    if (unidentified >= max_unidentified && oldest) close_connection(*oldest);
    int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    connections_.emplace_back();
    Connection& c = connections_.back();
    c.fd = std::move(fd);
    c.opened = Clock::now();
    c.nonce = coll::job_secret::random_bytes(proto::kNonceBytes);
    send(c, shared_frame(proto::FrameWriter(MessageType::kChallenge).put_bytes(c.nonce).finish()));
  }
}

void RendezvousServer::close_stale_unidentified() {
  const auto now = Clock::now();
  for (Connection& c : connections_)
    if (c.rank < 0 && !c.dead && now - c.opened > kHelloWithin) close_connection(c);
}

void RendezvousServer::read_from(Connection& connection) {
  char chunk[64 * 1024];
  size_t got = 0;
  bool ended = false;
  while (got < kReadPerWake) {
    ssize_t n = ::recv(connection.fd.get(), chunk, sizeof chunk, 0);
    if (n > 0) {
      connection.input.append(chunk, static_cast<size_t>(n));
      got += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    ended = true;  // end of stream, or the connection broke
    break;
  }

  // Take every complete frame, also when the stream has ended: a rank may
  // send its round and exit.
  while (!connection.dead && !connection.closing &&
         connection.input.size() >= proto::kHeaderBytes) {
    proto::FrameHeader header = proto::parse_header(connection.input.data());
    bool from_client = header.type == static_cast<uint32_t>(MessageType::kHello) ||
                       header.type == static_cast<uint32_t>(MessageType::kRound) ||
                       header.type == static_cast<uint32_t>(MessageType::kQuery) ||
                       header.type == static_cast<uint32_t>(MessageType::kLeaving) ||
                       header.type == static_cast<uint32_t>(MessageType::kSurvivorRound);
    // Before its hello is accepted a connection may send a hello and
    // nothing else: nothing larger than a hello is buffered before trust.
    if (connection.rank < 0) from_client = header.type == static_cast<uint32_t>(MessageType::kHello);
    uint64_t limit = proto::max_payload_bytes(header.type, static_cast<uint32_t>(world_size_));
    if (!from_client || header.length > limit) {
      protocol_error(connection, "a frame of type " + std::to_string(header.type) + " (" +
                                     proto::message_type_name(header.type) + ") and length " +
                                     std::to_string(header.length));
      return;
    }
    size_t frame_bytes = proto::kHeaderBytes + header.length;
    if (connection.input.size() < frame_bytes) {
      connection.input.reserve(frame_bytes);
      break;
    }
    std::string payload = connection.input.substr(proto::kHeaderBytes, header.length);
    connection.input.erase(0, frame_bytes);
    if (!handle_frame(connection, header.type, payload)) return;
  }
  if (ended) close_connection(connection);
}

void RendezvousServer::write_to(Connection& connection) {
  while (!connection.output.empty()) {
    const std::string& frame = *connection.output.front();
    ssize_t n = ::send(connection.fd.get(), frame.data() + connection.output_offset,
                       frame.size() - connection.output_offset, MSG_NOSIGNAL);
    if (n > 0) {
      connection.output_offset += static_cast<size_t>(n);
      if (connection.output_offset == frame.size()) {
        connection.output.pop_front();
        connection.output_offset = 0;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_connection(connection);  // the rank went away
    return;
  }
  if (connection.closing) close_connection(connection);
}

void RendezvousServer::close_connection(Connection& connection) {
  if (connection.dead) return;
  if (connection.rank >= 0) {
    RankState& rank = ranks_[static_cast<size_t>(connection.rank)];
    if (rank.connection == &connection) {
      rank.connection = nullptr;
      rank.epoch_closed = true;
    }
  }
  connection.fd.reset();
  connection.output.clear();
  connection.dead = true;
}

void RendezvousServer::send(Connection& connection, std::shared_ptr<const std::string> frame) {
  if (connection.dead) return;
  connection.output.push_back(std::move(frame));
  write_to(connection);
}

bool RendezvousServer::handle_frame(Connection& connection, uint32_t type,
                                    const std::string& payload) {
  switch (static_cast<MessageType>(type)) {
    case MessageType::kHello:
      return handle_hello(connection, payload);
    case MessageType::kRound:
      return handle_round(connection, payload);
    case MessageType::kQuery:
      return handle_query(connection, payload);
    case MessageType::kLeaving:
      return handle_leaving(connection, payload);
    case MessageType::kSurvivorRound:
      return handle_survivor_round(connection, payload);
    default:
      break;
  }
  protocol_error(connection, "an unexpected frame");
  return false;
}

bool RendezvousServer::handle_hello(Connection& connection, const std::string& payload) {
  if (connection.rank >= 0) {
    protocol_error(connection, "a second hello");
    return false;
  }
  proto::PayloadReader reader(payload);
  uint32_t version = 0, rank = 0, size = 0;
  uint64_t epoch = 0, pid = 0;
  std::string_view job_id;
  if (!reader.get_u32(version)) {
    protocol_error(connection, "an empty hello");
    return false;
  }
  if (version != proto::kVersion) {
    refuse(connection, /*stranger=*/true,
           "it speaks rendezvous protocol version " + std::to_string(version) + ", this collrun " +
               std::to_string(proto::kVersion) + " (libcoll and collrun from different builds?)");
    return false;
  }
  std::string_view rank_nonce, proof;
  if (!reader.get_u32(rank) || !reader.get_u32(size) || !reader.get_u64(epoch) ||
      !reader.get_u64(pid) || !reader.get_bytes(job_id, proto::kMaxJobIdBytes) ||
      !reader.get_bytes(rank_nonce, proto::kNonceBytes) ||
      !reader.get_bytes(proof, proto::kProofBytes) || !reader.done()) {
    protocol_error(connection, "a malformed hello");
    return false;
  }
  std::string who = "pid " + std::to_string(pid);
  // The proof first: a process without the secret learns nothing of the
  // job (its id, size, ranks), and every refusal below names only what
  // the process itself said.
  const std::string statement =
      proto::hello_statement(version, rank, size, epoch, pid, job_id, rank_nonce);
  const coll::job_secret::Digest want =
      coll::job_secret::prove(secret_, proto::kRankRole, connection.nonce, statement);
  if (proof.size() != want.size() ||
      !coll::job_secret::equal(reinterpret_cast<const uint8_t*>(proof.data()), want.data(),
                               want.size())) {
    refuse(connection, /*stranger=*/true,
           who +
               " did not prove this job's secret (COLL_JOB_SECRET): not a "
               "process of this job");
    return false;
  }
  if (job_id != job_id_) {
    refuse(connection, /*stranger=*/false,
           who + " has COLL_JOBID=" + std::string(job_id) +
               ", not this job's (a process of another job?)");
    return false;
  }
  if (size != static_cast<uint32_t>(world_size_)) {
    refuse(connection, /*stranger=*/false,
           who + " has COLL_SIZE=" + std::to_string(size) + " but this job has " +
               std::to_string(world_size_) + " ranks");
    return false;
  }
  if (rank >= static_cast<uint32_t>(world_size_)) {
    refuse(connection, /*stranger=*/false,
           who + " has COLL_RANK=" + std::to_string(rank) + ", not a rank of this job of " +
               std::to_string(world_size_));
    return false;
  }
  RankState& state = ranks_[rank];
  if (state.connection) {
    refuse(connection, /*stranger=*/false,
           who + " says it is rank " + std::to_string(rank) + " but " +
               rank_name(static_cast<int>(rank)) +
               " is connected already (two processes with the "
               "same COLL_RANK?)");
    return false;
  }
  if (state.epoch >= 0 && static_cast<int64_t>(epoch) <= state.epoch) {
    refuse(connection, /*stranger=*/false,
           who + ": rank " + std::to_string(rank) + " connected with bootstrap epoch " +
               std::to_string(epoch) + " after epoch " + std::to_string(state.epoch));
    return false;
  }
  connection.rank = static_cast<int>(rank);
  connection.epoch = epoch;
  state.connection = &connection;
  state.epoch = static_cast<int64_t>(epoch);
  state.epoch_closed = false;
  state.finalized = false;
  const coll::job_secret::Digest ours =
      coll::job_secret::prove(secret_, proto::kCollrunRole, rank_nonce, statement);
  send(connection, shared_frame(proto::FrameWriter(MessageType::kWelcome)
                                    .put_bytes(std::string_view(
                                        reinterpret_cast<const char*>(ours.data()), ours.size()))
                                    .finish()));
  return !connection.dead;
}

bool RendezvousServer::handle_round(Connection& connection, const std::string& payload) {
  if (connection.rank < 0) {
    protocol_error(connection, "a round before its hello");
    return false;
  }
  proto::PayloadReader reader(payload);
  uint64_t round = 0;
  std::string_view blob;
  if (!reader.get_u64(round) || !reader.get_bytes(blob, proto::kMaxBlobBytes) || !reader.done()) {
    protocol_error(connection, "a malformed round");
    return false;
  }
  if (round != connection.rounds_sent + 1) {
    protocol_error(connection,
                   round_name(round) + " after round " + std::to_string(connection.rounds_sent));
    return false;
  }
  connection.rounds_sent = round;
  PendingRound& pending = rounds_[RoundKey(connection.epoch, round)];
  if (pending.blobs.empty()) pending.blobs.resize(static_cast<size_t>(world_size_));
  pending.blobs[static_cast<size_t>(connection.rank)] = std::string(blob);
  ++pending.received;
  return true;
}

bool RendezvousServer::handle_query(Connection& connection, const std::string& payload) {
  proto::PayloadReader reader(payload);
  uint64_t round = 0;
  if (connection.rank < 0 || !reader.get_u64(round) || !reader.done()) {
    protocol_error(connection, "a malformed query");
    return false;
  }
  std::vector<uint32_t> missing;
  auto found = rounds_.find(RoundKey(connection.epoch, round));
  if (found != rounds_.end())
    for (size_t rank = 0; rank < found->second.blobs.size(); ++rank)
      if (!found->second.blobs[rank]) missing.push_back(static_cast<uint32_t>(rank));
  proto::FrameWriter answer(MessageType::kMissing);
  answer.put_u64(round).put_u32(static_cast<uint32_t>(missing.size()));
  for (uint32_t rank : missing) answer.put_u32(rank);
  send(connection, shared_frame(answer.finish()));
  return !connection.dead;
}

bool RendezvousServer::handle_leaving(Connection& connection, const std::string& payload) {
  if (connection.rank < 0 || !payload.empty()) {
    protocol_error(connection, "a malformed leaving notice");
    return false;
  }
  RankState& state = ranks_[static_cast<size_t>(connection.rank)];
  if (state.connection == &connection) state.finalized = true;
  return true;
}

bool RendezvousServer::handle_survivor_round(Connection& connection, const std::string& payload) {
  if (connection.rank < 0) {
    protocol_error(connection, "a survivors' round before its hello");
    return false;
  }
  proto::PayloadReader reader(payload);
  uint64_t key = 0, timeout_ms = 0;
  uint32_t count = 0;
  bool ok = reader.get_u64(key) && reader.get_u64(timeout_ms) && timeout_ms > 0 &&
            timeout_ms <= proto::kMaxSurvivorTimeoutMs && reader.get_u32(count) && count > 0 &&
            count <= static_cast<uint32_t>(world_size_);
  std::vector<int> members;
  for (uint32_t i = 0; ok && i < count; ++i) {
    uint32_t member = 0;
    ok = reader.get_u32(member) && member < static_cast<uint32_t>(world_size_) &&
         (members.empty() || static_cast<int>(member) > members.back());
    members.push_back(static_cast<int>(member));
  }
  std::string_view blob;
  if (!ok || !reader.get_bytes(blob, proto::kMaxSurvivorBlobBytes) || !reader.done()) {
    protocol_error(connection, "a malformed survivors' round");
    return false;
  }
  const int rank = connection.rank;
  const RankState& state = ranks_[static_cast<size_t>(rank)];
  // Counted dead already (killed for its silence): what it sends now comes
  // too late to change an answer that was decided without it.
  if (state.killed || state.connection != &connection) return true;
  const std::string name = "survivors' round " + std::to_string(key);
  if (std::find(members.begin(), members.end(), rank) == members.end()) {
    send_survivor_failure(connection, key, COLL_ERR_INVALID_ARG,
                          rank_name(rank) + " sent " + name + " but is not among the " +
                              std::to_string(members.size()) + " members it names");
    return !connection.dead;
  }
  const SurvivorKey id(connection.epoch, key);
  auto [it, created] = survivor_rounds_.try_emplace(id);
  SurvivorRound& round = it->second;
  if (created) {
    round.members = members;
    round.first_caller = rank;
    round.blobs.resize(members.size());
    round.timeout_s = static_cast<double>(timeout_ms) / 1000;
    round.deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  }
  if (round.failure) {
    send_survivor_failure(connection, key, COLL_ERR_INVALID_ARG, *round.failure);
    return !connection.dead;
  }
  const auto place = std::find(round.members.begin(), round.members.end(), rank);
  if (place == round.members.end()) {
    send_survivor_failure(connection, key, COLL_ERR_INVALID_ARG,
                          rank_name(rank) + " sent " + name + " but is not among its " +
                              std::to_string(round.members.size()) + " members (rank " +
                              std::to_string(round.first_caller) + "'s list; this rank's has " +
                              std::to_string(members.size()) + ")");
    return !connection.dead;
  }
  if (members != round.members) {
    // Where the lists part: the first place they differ, or where the
    // shorter one ends.
    size_t at = 0;
    while (at < members.size() && at < round.members.size() && members[at] == round.members[at])
      ++at;
    auto at_place = [at](const std::vector<int>& list) {
      return at < list.size() ? "rank " + std::to_string(list[at]) : std::string("its end");
    };
    round.failure = name + ": rank " + std::to_string(round.first_caller) + " named " +
                    std::to_string(round.members.size()) + " members, rank " +
                    std::to_string(rank) + " named " + std::to_string(members.size()) +
                    "; at place " + std::to_string(at) + " the first has " +
                    at_place(round.members) + ", the second " + at_place(members) +
                    " (every member must pass the same members)";
    std::fprintf(stderr, "collrun: %s; failing it for every caller\n", round.failure->c_str());
    for (size_t i = 0; i < round.members.size(); ++i) {
      Connection* asked = ranks_[static_cast<size_t>(round.members[i])].connection;
      if (round.blobs[i] && asked && asked->epoch == id.first)
        send_survivor_failure(*asked, key, COLL_ERR_INVALID_ARG, *round.failure);
    }
    round.blobs.clear();
    send_survivor_failure(connection, key, COLL_ERR_INVALID_ARG, *round.failure);
    return !connection.dead;
  }
  std::optional<std::string>& mine =
      round.blobs[static_cast<size_t>(place - round.members.begin())];
  if (mine) {
    send_survivor_failure(connection, key, COLL_ERR_INVALID_ARG,
                          rank_name(rank) + " sent " + name + " twice");
    return !connection.dead;
  }
  mine = std::string(blob);
  return true;
}

void RendezvousServer::send_survivor_failure(Connection& connection, uint64_t key, int status,
                                             const std::string& message) {
  send(connection, shared_frame(proto::FrameWriter(MessageType::kSurvivorResult)
                                    .put_u64(key)
                                    .put_u32(static_cast<uint32_t>(status))
                                    .put_bytes(message.substr(0, proto::kMaxMessageBytes))
                                    .put_u32(0)
                                    .finish()));
}

std::optional<std::chrono::steady_clock::time_point> RendezvousServer::next_deadline() const {
  std::optional<Clock::time_point> next;
  for (const auto& [key, round] : survivor_rounds_)
    if (!round.failure && (!next || round.deadline < *next)) next = round.deadline;
  return next;
}

void RendezvousServer::settle_survivor_rounds() {
  const auto now = Clock::now();
  for (auto it = survivor_rounds_.begin(); it != survivor_rounds_.end();) {
    SurvivorRound& round = it->second;
    if (round.failure) {
      ++it;
      continue;
    }
    const std::string name = "survivors' round " + std::to_string(it->first.second);
    std::vector<int> silent;  // alive, and not in it
    for (size_t i = 0; i < round.members.size(); ++i)
      if (!round.blobs[i] && !why_never(round.members[i], it->first.first, name))
        silent.push_back(round.members[i]);
    if (!silent.empty() && now < round.deadline) {
      ++it;
      continue;
    }
    // A silent member is a failed one: killed, and dead from now on for
    // every round, so that the answer cannot change when its blob comes
    // late.
    for (int rank : silent) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", round.timeout_s);
      std::fprintf(stderr,
                   "collrun: rank %d did not join the survivors' round in %s s; killed (a silent "
                   "rank counts as failed)\n",
                   rank, seconds);
      ranks_[static_cast<size_t>(rank)].killed =
          std::string("was killed for not joining ") + name + " within " + seconds + " s";
      if (killer_) killer_(rank);
    }
    complete_survivor_round(it->first, round);
    it = survivor_rounds_.erase(it);
  }
}

void RendezvousServer::complete_survivor_round(const SurvivorKey& key, const SurvivorRound& round) {
  proto::FrameWriter result(MessageType::kSurvivorResult);
  result.put_u64(key.second)
      .put_u32(COLL_SUCCESS)
      .put_bytes("")
      .put_u32(static_cast<uint32_t>(round.members.size()));
  for (const std::optional<std::string>& blob : round.blobs)
    result.put_u32(blob ? 1 : 0).put_bytes(blob.value_or(""));
  auto frame = shared_frame(result.finish());
  // Those that asked and can still hear it; a member that sent its blob
  // and died since is present in the answer all the same.
  for (size_t i = 0; i < round.members.size(); ++i) {
    Connection* connection = ranks_[static_cast<size_t>(round.members[i])].connection;
    if (round.blobs[i] && connection && connection->epoch == key.first) send(*connection, frame);
  }
}

void RendezvousServer::refuse(Connection& connection, bool stranger, const std::string& reason) {
  const std::string line = "refused a bootstrap connection: " + reason;
  if (stranger)
    report_stranger(line);
  else
    std::fprintf(stderr, "collrun: %s\n", line.c_str());
  connection.closing = true;
  send(connection, shared_frame(proto::FrameWriter(MessageType::kRefused)
                                    .put_bytes(reason.substr(0, proto::kMaxMessageBytes))
                                    .finish()));
}

void RendezvousServer::protocol_error(Connection& connection, const std::string& what) {
  std::string who =
      connection.rank >= 0 ? rank_name(connection.rank) : std::string("a new connection");
  std::string message = who + " sent " + what + ": closing its bootstrap connection";
  if (connection.rank < 0)
    report_stranger(message);
  else
    std::fprintf(stderr, "collrun: %s\n", message.c_str());
  connection.closing = true;
  send(connection, shared_frame(proto::FrameWriter(MessageType::kFailed)
                                    .put_u32(COLL_ERR_INTERNAL)
                                    .put_bytes(message.substr(0, proto::kMaxMessageBytes))
                                    .finish()));
}

void RendezvousServer::report_stranger(const std::string& line) {
  const auto now = Clock::now();
  if (now - stranger_interval_start_ >= kStrangerInterval) {
    flush_strangers();
    stranger_interval_start_ = now;
    stranger_lines_ = 0;
  }
  if (stranger_lines_ < kStrangerLines) {
    ++stranger_lines_;
    std::fprintf(stderr, "collrun: %s\n", line.c_str());
    return;
  }
  ++strangers_not_shown_;
}

void RendezvousServer::flush_strangers() {
  if (strangers_not_shown_ == 0) return;
  std::fprintf(stderr,
               "collrun: %llu more refused connections not shown (at most %d lines every %lld s)\n",
               static_cast<unsigned long long>(strangers_not_shown_), kStrangerLines,
               static_cast<long long>(kStrangerInterval.count()));
  strangers_not_shown_ = 0;
}

std::optional<std::string> RendezvousServer::why_never(int rank, const RoundKey& key) const {
  return why_never(rank, key.first, round_name(key.second));
}

std::optional<std::string> RendezvousServer::why_never(int rank, uint64_t epoch,
                                                       const std::string& round) const {
  const RankState& state = ranks_[static_cast<size_t>(rank)];
  if (state.exited) return rank_name(rank) + " " + *state.exited + " without sending " + round;
  if (state.killed) return rank_name(rank) + " " + *state.killed + " without sending " + round;
  if (state.epoch > static_cast<int64_t>(epoch))
    return rank_name(rank) +
           " started a new bootstrap (init again?) without "
           "sending " +
           round + " of the previous one";
  if (state.epoch == static_cast<int64_t>(epoch) && state.epoch_closed)
    return rank_name(rank) +
           " closed its bootstrap connection without "
           "sending " +
           round + " (did it fail, or finalize early?)";
  return std::nullopt;
}

void RendezvousServer::settle_rounds() {
  settle_survivor_rounds();
  for (auto it = rounds_.begin(); it != rounds_.end();) {
    PendingRound& round = it->second;
    if (round.received == world_size_) {
      complete_round(it->first, round);
      it = rounds_.erase(it);
      continue;
    }
    if (recovery_ && completes_without_missing(it->first, round)) {
      complete_round(it->first, round);
      it = rounds_.erase(it);
      continue;
    }
    // Under recovery a barrier that a dead rank will never send still
    // waits for the living that have not sent it yet (a survivor still at
    // work before its coll_finalize): failing it would let the ranks in it
    // tear down their windows while that survivor still talks to them.
    if (recovery_ && is_barrier(round)) {
      ++it;
      continue;
    }
    std::optional<std::string> reason;
    for (int rank = 0; rank < world_size_ && !reason; ++rank)
      if (!round.blobs[static_cast<size_t>(rank)]) reason = why_never(rank, it->first);
    if (reason) {
      fail_round(it->first, round, *reason);
      it = rounds_.erase(it);
      continue;
    }
    ++it;
  }
}

bool RendezvousServer::is_barrier(const PendingRound& round) {
  for (const std::optional<std::string>& blob : round.blobs)
    if (blob && !blob->empty()) return false;
  return true;
}

bool RendezvousServer::completes_without_missing(const RoundKey& key,
                                                 const PendingRound& round) const {
  bool any_missing = false;
  for (int rank = 0; rank < world_size_; ++rank) {
    const std::optional<std::string>& blob = round.blobs[static_cast<size_t>(rank)];
    if (blob && !blob->empty()) return false;  // data: the result would have a hole
    if (!blob) {
      if (!why_never(rank, key)) return false;  // it may still come
      any_missing = true;
    }
  }
  return any_missing;
}

void RendezvousServer::complete_round(const RoundKey& key, PendingRound& round) {
  proto::FrameWriter result(MessageType::kResult);
  result.put_u64(key.second).put_u32(static_cast<uint32_t>(world_size_));
  // A rank missing from it (a barrier under recovery) sent nothing: so
  // does its place.
  for (const std::optional<std::string>& blob : round.blobs) result.put_bytes(blob.value_or(""));
  // One copy of the frame, shared by every rank's output queue.
  auto frame = shared_frame(result.finish());
  round.blobs.clear();
  for (RankState& rank : ranks_)
    if (rank.connection && rank.connection->epoch == key.first) send(*rank.connection, frame);
}

void RendezvousServer::fail_round(const RoundKey& key, PendingRound& round,
                                  const std::string& reason) {
  // Which ranks are in it, when few: those are ahead of the others (a rank
  // in the round of its coll_finalize while the others are still in a
  // collective left them: they fail with COLL_ERR_PEER_LOST naming it).
  std::string ranks;
  int count = 0;
  for (size_t rank = 0; rank < round.blobs.size(); ++rank) {
    if (!round.blobs[rank]) continue;
    if (++count <= 8) ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  }
  if (count > 8) ranks += ", ...";
  const std::string in_it =
      count == 0 ? "" : (count == 1 ? " (rank " : " (ranks ") + ranks + ")";
  std::fprintf(stderr, "collrun: %s; failing %s for the ranks in it%s\n", reason.c_str(),
               round_name(key.second).c_str(), in_it.c_str());
  auto frame = shared_frame(proto::FrameWriter(MessageType::kFailed)
                                .put_u32(COLL_ERR_PEER_LOST)
                                .put_bytes(reason.substr(0, proto::kMaxMessageBytes))
                                .finish());
  for (size_t rank = 0; rank < round.blobs.size(); ++rank) {
    Connection* connection = ranks_[rank].connection;
    if (round.blobs[rank] && connection && connection->epoch == key.first) send(*connection, frame);
  }
}

std::string RendezvousServer::rank_name(int rank) const {
  const std::string& process = ranks_[static_cast<size_t>(rank)].process;
  std::string name = "rank " + std::to_string(rank);
  if (!process.empty()) name += " (" + process + ")";
  return name;
}

}  // namespace collrun
