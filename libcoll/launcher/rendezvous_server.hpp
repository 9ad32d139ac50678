// RendezvousServer: collrun's side of the bootstrap protocol
// (libcoll/bootstrap/collrun_protocol.hpp). It listens on TCP, checks
// each rank's hello against the job, and answers a round of allgather to
// every rank once all ranks have sent it.
//
// A round that can no longer complete — a rank exited, closed its
// connection or moved on to a new bootstrap without sending it — is failed
// at once with a message naming that rank, so the ranks waiting in it get
// COLL_ERR_PEER_LOST instead of waiting for their timeout.
//
// With recovery enabled (collrun --enable-recovery) a barrier round — every
// blob sent empty, as coll_finalize's — whose missing ranks can never send
// it completes among the ranks that did, instead of failing: the survivors
// of a dead rank finalize cleanly. A round that carries data still fails:
// its result would have a hole where the missing rank's data belongs.
//
// Survivors' rounds (kSurvivorRound, Bootstrap::survivor_round) are apart
// from those: keyed by (epoch, key), several open at once, each among the
// members its callers name. One completes when every member has sent its
// blob or is dead — its process ended, its connection closed, it began a
// new bootstrap (why_never, as above), or collrun killed it — and every
// member that asked gets the same answer, a dead member's place empty. A
// member alive that has not joined when the first caller's timeout passes
// is killed (set_rank_killer) and counted dead, so the answer is decided
// once. Callers naming different members all get COLL_ERR_INVALID_ARG,
// and so does every later caller of that key; a caller that is not a
// member gets it alone. With or without recovery: without it, the death
// ends the job as any other does.
//
// Non-blocking throughout: it does its I/O when collrun's poll() loop says
// a descriptor is ready, and never waits itself (next_deadline is when
// collrun must call handle() again even if nothing is ready).
#pragma once

#include <poll.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bootstrap/unique_fd.hpp"

namespace collrun {

class RendezvousServer {
 public:
  // Listens on `listen_ip` (IPv4; "0.0.0.0" for every address) at an
  // ephemeral port; admits only ranks that prove `secret` (the job
  // secret's bytes, job_secret.hpp). Throws std::system_error.
  RendezvousServer(int world_size, std::string job_id, std::string secret,
                   const std::string& listen_ip = "127.0.0.1");
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // "IP:PORT" for COLL_BOOTSTRAP: the listening address, 127.0.0.1 when
  // it listens on every address.
  std::string address() const;
  int port() const { return port_; }

  // How messages name the rank's process: "pid 1234", "host b, agent pid
  // 1234".
  void set_rank_process(int rank, std::string description);
  // The rank's process has ended (`how`: "exited with status 0", ...).
  void rank_exited(int rank, const std::string& how);

  // collrun --enable-recovery: barrier rounds that a dead rank can never
  // join complete among the others (see above). Off by default.
  void enable_recovery() { recovery_ = true; }
  // How collrun kills a rank that has not joined a survivors' round in
  // time: SIGKILL to a local rank, closing a remote rank's lifeline. Unset
  // (tests, the fuzzer), such a rank is only counted dead.
  void set_rank_killer(std::function<void(int rank)> killer) { killer_ = std::move(killer); }
  // When the earliest open survivors' round times out, if any: collrun
  // polls no longer than that.
  std::optional<std::chrono::steady_clock::time_point> next_deadline() const;

  // Whether the rank's latest connection said it finalized (kLeaving).
  // Reads what the rank sent and collrun has not read yet first: a rank
  // that finalized and exited at once has its notice in the socket when
  // collrun reaps it.
  bool rank_finalized(int rank);

  // poll() integration: append this server's descriptors, then hand the
  // same vector back after poll().
  void add_pollfds(std::vector<pollfd>& fds);
  void handle(const std::vector<pollfd>& fds);

  // Closes the listening socket and every connection: ranks still in the
  // bootstrap see the connection close (COLL_ERR_PEER_LOST).
  void shut_down();

 private:
  struct Connection;
  struct RankState {
    std::string process;                // set_rank_process
    Connection* connection = nullptr;   // its open connection, if any
    int64_t epoch = -1;                 // epoch of its latest connection
    uint64_t rounds_sent = 0;           // rounds sent on that connection
    bool epoch_closed = false;          // that connection has closed
    bool finalized = false;             // that connection sent kLeaving
    std::optional<std::string> exited;  // how its process ended
    std::optional<std::string> killed;  // why collrun killed it
  };
  struct PendingRound {
    std::vector<std::optional<std::string>> blobs;
    int received = 0;
  };
  using RoundKey = std::pair<uint64_t, uint64_t>;  // epoch, round
  struct SurvivorRound {
    std::vector<int> members;  // as its first caller named them
    int first_caller = -1;
    std::vector<std::optional<std::string>> blobs;   // by member's place
    std::chrono::steady_clock::time_point deadline;  // the first caller's timeout
    double timeout_s = 0;
    std::optional<std::string> failure;  // members differed: every caller's answer
  };
  using SurvivorKey = std::pair<uint64_t, uint64_t>;  // epoch, key

  void accept_connections();
  void close_stale_unidentified();
  void read_from(Connection& connection);
  void write_to(Connection& connection);
  void close_connection(Connection& connection);
  bool handle_frame(Connection& connection, uint32_t type, const std::string& payload);
  bool handle_hello(Connection& connection, const std::string& payload);
  bool handle_round(Connection& connection, const std::string& payload);
  bool handle_query(Connection& connection, const std::string& payload);
  bool handle_leaving(Connection& connection, const std::string& payload);
  bool handle_survivor_round(Connection& connection, const std::string& payload);
  // A survivors' round's failure, to one connection.
  void send_survivor_failure(Connection& connection, uint64_t key, int status,
                             const std::string& message);
  // stranger: the connection has not proved the job's secret, so the line
  // goes through report_stranger.
  void refuse(Connection& connection, bool stranger, const std::string& reason);
  void protocol_error(Connection& connection, const std::string& what);
  // A line about a stranger: printed while the interval's allowance lasts,
  // else counted; flush_strangers prints the count (once per interval, and
  // at the end).
  void report_stranger(const std::string& line);
  void flush_strangers();
  void send(Connection& connection, std::shared_ptr<const std::string> frame);

  // Why `rank` can never send round `key`, or nullopt while it still may.
  std::optional<std::string> why_never(int rank, const RoundKey& key) const;
  // The same for any round of `epoch`, named `round` in the reason.
  std::optional<std::string> why_never(int rank, uint64_t epoch, const std::string& round) const;
  // Completes or fails the rounds whose fate is now known.
  void settle_rounds();
  // Completes the survivors' rounds whose members have all sent or died,
  // killing first the members of a timed-out round that have not joined.
  void settle_survivor_rounds();
  void complete_survivor_round(const SurvivorKey& key, const SurvivorRound& round);
  void complete_round(const RoundKey& key, PendingRound& round);
  void fail_round(const RoundKey& key, PendingRound& round, const std::string& reason);
  std::string rank_name(int rank) const;

  // A barrier round whose missing ranks all have a reason never to send it.
  bool completes_without_missing(const RoundKey& key, const PendingRound& round) const;
  // Every blob received so far is empty (coll_finalize's barrier, and
  // setup's).
  static bool is_barrier(const PendingRound& round);

  int world_size_;
  bool recovery_ = false;
  std::string job_id_;
  std::string secret_;
  coll::UniqueFd listener_;
  std::string listen_ip_;
  int port_ = 0;
  std::vector<RankState> ranks_;
  std::list<Connection> connections_;
  std::map<RoundKey, PendingRound> rounds_;
  // Open ones, and failed ones (kept: every later caller gets the failure).
  std::map<SurvivorKey, SurvivorRound> survivor_rounds_;
  std::function<void(int rank)> killer_;
  size_t first_pollfd_ = 0;
  std::vector<Connection*> polled_;
  std::chrono::steady_clock::time_point stranger_interval_start_{};
  int stranger_lines_ = 0;
  uint64_t strangers_not_shown_ = 0;
};

}  // namespace collrun
