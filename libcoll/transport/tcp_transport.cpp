// TCP backend: the transport contract over TCP streams, for nodes without
// RDMA. A pair of ranks that writes to each other has one stream, made when
// one of them first needs it (issue 14).
//
// Setup. Each rank listens on an ephemeral port and publishes {address,
// port, host} through the bootstrap; that is all: no connection is made at
// setup. A full mesh would cost every rank n - 1 sockets (a 2,000-rank job
// hits the default limit of 1024 descriptors) where a ring uses 2 peers and
// a tree O(log n).
//
// Connections on first use. The first post_write or post_lines to a peer
// without a stream dials it, and waits - bounded by the timeout - until the
// stream is authenticated both ways; meanwhile it keeps the whole engine
// going (applies incoming frames, accepts, serves other ranks' handshakes),
// as the wait on a full socket does, so two ranks that dial each other, or
// a ring of ranks that each dial the next, all get through. Like a full
// socket, a first write to a peer that is not in the library (it computes)
// waits for it to come back, until the timeout. The listener stays open for
// the transport's life, watched by the progress engine (poll, every wait).
//
// One stream per pair, carrying both directions: whoever needs it first
// dials, the other uses it too (a ring's credits flow back on the stream
// its data came by: 2 sockets a rank, not 4). When both dial at once, the
// lower rank's connection stands: the lower refuses the higher's hello
// while its own dial to it is under way, and the higher takes the lower's
// and drops its own dial (which the lower never took). The ordering
// promise is per writer and target, and a writer's frames to a peer all go
// on the one stream, so it holds. (Two streams per pair, one per
// direction, would need no tie-break, but double the sockets of a pair
// whose credits flow back.)
//
// A connection is authenticated both ways before it carries a frame
// (tcp_wire::Challenge / Hello / Welcome): the accepting rank sends a fresh
// nonce, the connecting one answers with HMAC-SHA256 keyed by the job's
// secret (Bootstrap::secret: collrun's COLL_JOB_SECRET, or rank 0's through
// PMIx) over a label, both ranks, the job size and the nonces, and the
// accepting one proves the secret back. Nothing published is a credential:
// anyone on the host can read the port (/proc/net/tcp).
//
// Strangers (issue 15): before its hello is verified a connection is read
// only up to the hello's fixed size; it has 10 s (kHelloWithinSeconds) to
// send it; at most kMaxStrangers wait at once, and past that the oldest is
// dropped, so a flood of connections costs sockets, not a real rank's
// place, and a real rank that was dropped dials again (backing off up to
// 200 ms). A refused connection is closed without a word: a stranger
// learns nothing, and a connection timeout's message lists what was
// ignored (what the strangers said, never an expected value). With the
// listener open for the transport's life these hold for its life; the
// eager mesh (COLL_TCP_CONNECT=eager) closes it once every lower rank is
// in, as before.
//
// Lost and leaving peers. A stream that closes or resets (EOF,
// ECONNRESET, EPIPE) is a lost peer, and so is a peer whose port refuses a
// dial (below): that peer only, never the transport (fault recovery, issue
// 33: the survivors go on over their own streams). Per peer is safe
// because the pair's stream is the only ordering domain: no promise spans
// two streams, so nothing another peer sends or receives depends on the
// lost stream. Once lost, the peer's stream is read no more (a flag or a
// line frame cut short by the loss writes nothing: kWholePayload), credits held for
// it are dropped, and a write to it that is in flight - in this rank's
// socket buffer, or half sent - is dropped with it, as it would be on the
// dead peer's side. A later write to it fails at post (post_write returns
// -1, EPIPE) and check_peer(peer) throws COLL_ERR_PEER_LOST with the
// message ("rank %d lost rank %d over tcp: ..."); a signaled write to it
// fails at post rather than completing with an error (a tcp write is
// complete at post, and an error completion in the shared queue would fail
// whichever communicator polled it). The `left`, failure and refusal
// notices (kWriteLeaving, kWriteNotice) to it are dropped: there is no one
// to tell. A peer that does not take a first write's handshake, or does
// not read a full stream, within the timeout is lost the same way, with
// COLL_ERR_TIMEOUT (the stream is shut down: it holds part of a frame); a
// failure notice to a peer without a stream does not wait for the
// handshake (hold_notice). What still fails the whole transport is what
// says this rank or a peer breaks the protocol - a malformed frame, a bad
// rkey or range (refuse_frame), a peer's abort frame, a failed epoll or
// socket call - as before.
// A peer this rank has no stream with can be known dead only by asking: a
// check_peer on it (a wait for it that lasted 10 ms) dials it in the
// background - the connection one of the two would make anyway - and a
// refused connection means its listener is gone: the peer exited, or
// finalized. For the latter, a rank that finalizes posts its `left` notice
// to every peer (Channel::quiesce) with kWriteLeaving: where no stream
// exists the notice is dropped rather than dialed (n - 1 connections at
// finalize, and a dial to a peer already in its final bootstrap barrier,
// which serves nobody, would wait for its timeout), and once every peer has
// had its notice the listener closes. So a peer that waits for the first
// message of a rank that finalized is refused at its check, and fails with
// COLL_ERR_PEER_LOST at once, as the notice would have failed it. A peer
// that talked to it has the stream, and the notice on it. And no first
// write waits for a rank in its final barrier: it enters the barrier after
// its quiesce, so with its listener closed, and is refused at once. (After
// its quiesce a rank needs nothing more from anyone but credits for what
// it sent, which go on the stream that carried it.)
//
// Knobs:
//   COLL_TCP_CONNECT=lazy   connections on first use (the default), or
//                   =eager  every pair connected at setup, as before issue
//                           14: every rank dials every higher one and
//                           accepts every lower one, in one loop, and then
//                           closes its listener. Costs n - 1 sockets a rank
//                           and the whole mesh's handshakes at coll_init.
//   COLL_TCP_ADDR=a[,b...]  listen on the first of these IPv4 addresses that
//                           this host has (one list serves every host of a
//                           job), and publish it.
//   COLL_TCP_IFACE=name     listen on that interface's IPv4 address.
//   (neither)               listen on every address; publish the first
//                           non-loopback IPv4 address of the host (or
//                           127.0.0.1 when it has none). Peers on the same
//                           host, in the same network namespace, connect
//                           to 127.0.0.1.
//
// A write is a frame, tcp_wire::FrameHeader plus payload. The TARGET applies
// it, from its progress engine (poll(), run by every wait loop), after
// checking the rkey and the range against its own region table: a bad rkey,
// a range outside the region, or a malformed frame fails the target's
// transport with a message naming the sender and the problem; the target
// tells the sender (an abort frame) and writes nothing. A connection that
// closes, or resets, is a lost peer (that peer only, above). Every failure
// is sticky: a transport's failure poll() reports in an error completion
// and check_peer() throws with its message; a lost peer's, check_peer() on
// it throws. The
// one write a target drops instead is a notice (kWriteNotice: a notice
// frame, 8 bytes) whose region is gone: a failure or refusal notice to a
// communicator the target has freed since - moot there, and failing the
// stream for it would fail every communicator of the pair.
//
// Ordering promise: a writer sends all its frames to a peer on one stream
// (the pair's), and the target applies frames in stream order, each
// completely before the next; an 8-byte write to an 8-byte aligned address
// is one release store. So a flag lands after the data posted before it.
// Line messages (post_lines) are one frame of their own
// (tcp_wire::kLinesFrame), gathered whole, each line's flag stored after
// its payload.
//
// Syscalls, the cost of the small path (a loopback sendmsg of a small frame
// is ~1.5 us here, an empty recv or epoll_wait ~0.1 us): one sendmsg per
// frame (header and payload together, and a line message with its flag as
// one frame); received bytes are staged and parsed many frames per recv
// (until one finds the socket empty: a connection's frames often come
// back to back, and a second recv in the same pass finds them); with a
// single connection the transport recvs straight away instead of asking
// epoll first.
//
// Sends. post_write hands the whole frame to the kernel before it returns
// (so the source may change at once, and a signaled write is complete at
// return). When the socket is full it waits for room - bounded by the
// timeout - and meanwhile applies incoming frames from every peer, so two
// ranks that send to each other both make progress. Queueing the rest in
// user space instead would leave bytes that only the next library call on
// this rank moves: a peer waiting for them would time out while this rank
// computes between collectives. Only a peer that is not in the library
// holds a sender up, and only until the timeout. A first write waits for
// its connection for the same reason: queued behind a dial, it would move
// only when this rank next calls the library.
// The one exception is a credit (kWriteDeferrable), which needs no peer to
// wait for it while this rank is in the library: it is held until the
// next frame to that peer, which carries it in the same sendmsg (an
// allreduce's next message, typically), or until the next receive pass
// (defer_write).
//
// No threads: everything runs in the caller's thread. (A thread that
// answered handshakes would let a first write go through while the peer
// computes; not worth a thread in every process: the peer a rank writes to
// is, in a collective, almost always in the library.)
#include "transport/tcp_transport.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <string>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/unique_fd.hpp"
#include "env.hpp"
#include "error.hpp"
#include "job_secret.hpp"
#include "transport/anonymous_windows.hpp"
#include "transport/host_identity.hpp"

namespace coll {
namespace {

using Clock = std::chrono::steady_clock;
using tcp_wire::Address;
using tcp_wire::Challenge;
using tcp_wire::FrameHeader;
using tcp_wire::Hello;
using tcp_wire::Welcome;

// Payloads up to this size are gathered whole before they are applied (an
// 8-byte flag must land as one store, and a frame cut short by a lost peer
// must write nothing); larger ones are copied to their region as they come.
constexpr size_t kWholePayload = 64;
// A lines frame is gathered whole too (a line's flag is stored after its
// payload, and a frame cut short writes nothing): its flag and message.
constexpr size_t kWholeLines = 8 + tcp_wire::kMaxFrameLines * tcp_wire::kLinePayload;
// Received bytes are staged here, so that many small frames cost one recv.
constexpr size_t kStageBytes = 64 * 1024;
// A payload with at least this much still to come skips the stage and is
// received straight into its region.
constexpr size_t kDirectReceive = 16 * 1024;
// After a write frame of at least kLargeFrame from a peer, its stream is
// read kLargeRunStage bytes at a time while no payload is due: the next
// header comes with little of its payload, and the rest - from
// kLargeRunStage on - lands straight in its region. Large writes come in
// runs (a pipelined collective's chunks, each followed by its flag); read
// into the 64 KiB stage, up to 64 KiB of each was received there and then
// copied again: half the bytes of a 1 MiB bcast or allreduce at np 2
// (128 KiB slot messages).
constexpr size_t kLargeFrame = 64 * 1024;
constexpr size_t kLargeRunStage = 4096;
// recv calls per peer and progress pass: the other peers get their turn.
constexpr int kReceivesPerPass = 16;
// A connection has this long to say its hello once challenged (a real
// rank answers at once: it is in its own setup loop).
constexpr int kHelloWithinSeconds = 10;
// Unidentified connections held at once, and accepted per pass of the
// setup loop (see accept_strangers).
constexpr size_t kMaxStrangers = 64;
constexpr int kAcceptsPerPass = 16;
// With a single stream the engine recvs on it without asking epoll (see
// "Syscalls"); every this many passes it asks epoll anyway, for the
// listener's new connections.
constexpr unsigned kListenerEvery = 16;

// What an epoll event is about: the high word of its data.
enum EventKind : uint32_t {
  kStreamEvent = 0,
  kListenerEvent = 1,
  kStrangerEvent = 2,
  kDialEvent = 3
};
uint64_t event_tag(EventKind kind, uint32_t index) { return uint64_t(kind) << 32 | index; }

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int millis_until(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return int(std::clamp<long long>(left.count(), 0, 100));
}

std::string ip_string(const in_addr& a) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

// Every IPv4 address of an interface that is up, as {interface, address}.
std::vector<std::pair<std::string, in_addr>> interface_addresses() {
  std::vector<std::pair<std::string, in_addr>> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    out.emplace_back(i->ifa_name, reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr);
  }
  freeifaddrs(list);
  return out;
}

void set_int_option(int fd, int level, int name, int value) {
  // Tuning only: a kernel without the option still carries the stream.
  (void)setsockopt(fd, level, name, &value, sizeof value);
}

void tune_connection(int fd) {
  // Flags and credits are tiny and latency-bound: no Nagle delay.
  set_int_option(fd, IPPROTO_TCP, TCP_NODELAY, 1);
  // A peer host that vanishes without a FIN (power, cable) is found by
  // keepalive probes within ~25 s of silence, and reported as lost.
  set_int_option(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPIDLE, 10);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPINTVL, 5);
  set_int_option(fd, IPPROTO_TCP, TCP_KEEPCNT, 3);
}

// Where the bytes of the frame being received go.
enum class Sink { kNone, kWhole, kLines, kRegion, kText };

struct Receiver {
  std::unique_ptr<char[]> stage{new char[kStageBytes]};
  size_t begin = 0, end = 0;  // staged, not yet consumed
  FrameHeader header{};
  size_t header_got = 0;
  bool in_payload = false;
  uint64_t payload_got = 0;
  Sink sink = Sink::kNone;
  bool large_run = false;  // the latest write frame was large (kLargeFrame)
  char whole[std::max(kWholePayload, kWholeLines)];
  std::string text;
};

// A credit held back (kWriteDeferrable): sent before, and in the same
// sendmsg as, the next frame to its peer, or at the next receive pass.
struct DeferredWrite {
  FrameHeader header;
  uint64_t value;
};
constexpr size_t kMaxDeferred = 8;  // per peer: one per communicator it shares, in practice

struct Peer {
  UniqueFd fd;           // the pair's stream, once authenticated both ways
  std::vector<DeferredWrite> deferred;  // in posting order
  bool reach = false;    // a tcp peer (this rank's other transport serves it otherwise)
  bool reading = false;  // registered in epoll; false once its stream is broken
  bool noticed = false;  // this rank's `left` notice went to it (kWriteLeaving)
  // Lost: its stream closed or reset, or its port refused us (it is gone),
  // or it did not take a handshake or a frame within the timeout (it is
  // silent). lost_status is COLL_ERR_PEER_LOST or COLL_ERR_TIMEOUT, and
  // lost_message what check_peer throws for it.
  bool lost = false;
  int lost_status = 0;
  std::string lost_message;
  Receiver rx;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(Bootstrap& boot, const TransportOptions& opts, std::vector<bool> reach,
               const RegionEntry* external_regions)
      : rank_(boot.rank()), size_(boot.size()), timeout_s_(opts.timeout_s) {
    if (external_regions) {
      regions_ = external_regions;
    } else {
      own_entries_.reset(new RegionEntry[kMaxRegions]);
      table_ = std::make_unique<RegionTable>(own_entries_.get(), "tcp");
      regions_ = table_->entries();
    }
    peers_.resize(size_t(size_));
    for (int r = 0; r < size_; ++r)
      peers_[size_t(r)].reach = r != rank_ && (reach.empty() || reach[size_t(r)]);
    for (int r = 0; r < size_; ++r) reachable_ += peers_[size_t(r)].reach;
    const std::string mode = env_string("COLL_TCP_CONNECT");
    if (mode.empty() || mode == "lazy")
      lazy_ = true;
    else if (mode != "eager")
      fail(COLL_ERR_INVALID_ARG, "COLL_TCP_CONNECT=%s: say lazy (connect on first use) or eager",
           mode.c_str());
    epoll_.reset(epoll_create1(EPOLL_CLOEXEC));
    if (!epoll_) fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: epoll_create1");
    connect_all(boot);
  }

  const char* name() const override { return "tcp"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool needs_local_registration() const override { return false; }

  // The target applies every write itself, into its own memory: windows
  // are private anonymous memory. A write that arrives for a window after
  // its dereg is refused by the rkey check (and fails the transport), so
  // nothing ever lands in memory that free_window gave back.
  // Untouched pages of it cost nothing until a write lands there, so the
  // window is committed as its writers use it (eager_bytes is moot).
  void* alloc_window(size_t bytes, size_t /*eager_bytes*/) override {
    if (!table_)
      fail(COLL_ERR_INTERNAL, "tcp transport: windows belong to the shm half of shm+tcp");
    return windows_.alloc(bytes);
  }

  void free_window(void* addr, size_t bytes) override {
    if (!table_ || !windows_.owns(addr, bytes))
      fail(COLL_ERR_INVALID_ARG,
           "tcp transport: free_window(%p, %zu): not a window that alloc_window handed out "
           "(or freed already)",
           addr, bytes);
    const auto a = reinterpret_cast<uintptr_t>(addr);
    const size_t length = AnonymousWindows::page_round(bytes);
    for (uint32_t i = 0; i < kMaxRegions; ++i) {
      const RegionEntry& e = regions_[i];
      const uint32_t rkey = e.rkey.load(std::memory_order_relaxed);
      if (rkey != 0 && e.addr < a + length && a < e.addr + e.length)
        fail(COLL_ERR_INVALID_ARG,
             "tcp transport: free_window(%p, %zu): the window is still registered (rkey 0x%x: "
             "%llu bytes at 0x%llx); dereg it first",
             addr, bytes, rkey, static_cast<unsigned long long>(e.length),
             static_cast<unsigned long long>(e.addr));
    }
    windows_.release(addr);
  }

  MemoryRegion* reg_write(void* addr, size_t length) override {
    if (!table_)
      fail(COLL_ERR_INTERNAL, "tcp transport: registration belongs to the shm half of shm+tcp");
    return table_->add(addr, length, kRegionProcessMemory);
  }

  int dereg(MemoryRegion* mr) override {
    if (!table_) {
      errno = EINVAL;
      return -1;
    }
    return table_->remove(mr);
  }
  void set_writable(MemoryRegion* mr, bool writable) override {
    if (table_) table_->set_open(mr, writable);
  }

  int post_write(int peer, uint64_t context, const void* local_addr, size_t length,
                 MemoryRegion* /*mr: not needed, the bytes are sent before return*/, int flags,
                 uint64_t remote_addr, uint32_t rkey) override {
    if (peer < 0 || peer >= size_ || (length > 0 && local_addr == nullptr) ||
        (peer != rank_ && !peers_[size_t(peer)].reach)) {
      errno = EINVAL;
      return -1;
    }
    // As on a verbs queue pair in the error state, a write to a failed
    // transport is accepted and never lands; poll() reports the failure.
    // A write to a lost peer fails at post (see "Lost and leaving peers"
    // at the top), unless it is a notice: a leaving or failure notice to a
    // peer that is gone has no one to tell, and is dropped. A leaving
    // notice goes only on a stream that exists.
    const bool to_peer = peer != rank_;
    const bool dropped = (flags & kWriteLeaving) && to_peer && leave_notice(peer);
    const bool notice = flags & (kWriteLeaving | kWriteNotice);
    if (!failed_ && !dropped && to_peer && peers_[size_t(peer)].lost)
      return notice ? complete(flags, context, peer) : refuse_lost();
    if (!failed_ && !dropped) {
      if (!to_peer)
        write_to_self(local_addr, length, remote_addr, rkey);
      else if ((flags & kWriteDeferrable) && !(flags & kWriteSignaled) &&
               length == sizeof(uint64_t) && peers_[size_t(peer)].fd)
        defer_write(peer, local_addr, remote_addr, rkey);
      else if ((flags & kWriteNotice) && length == sizeof(uint64_t) && lazy_ &&
               !peers_[size_t(peer)].fd)
        hold_notice(peer, local_addr, remote_addr, rkey);
      else if (!send_frame(peer,
                           (flags & kWriteNotice) ? tcp_wire::kNoticeFrame : tcp_wire::kWriteFrame,
                           rkey, remote_addr, nullptr, local_addr, length) &&
               peers_[size_t(peer)].lost)
        return notice ? complete(flags, context, peer) : refuse_lost();
      network_bytes_ += to_peer ? length : 0;
    }
    return complete(flags, context, peer);
  }

  // Data and its flag as two frames in one sendmsg.
  int post_message(int peer, const void* src, size_t length, uint64_t remote_addr, uint64_t flag,
                   uint64_t flag_addr, uint32_t rkey) override {
    if (peer == rank_ || peer < 0 || peer >= size_ || !peers_[size_t(peer)].reach)
      return Transport::post_message(peer, src, length, remote_addr, flag, flag_addr, rkey);
    if (length > 0 && src == nullptr) {
      errno = EINVAL;
      return -1;
    }
    if (failed_) return 0;  // accepted, never lands (see post_write)
    if (peers_[size_t(peer)].lost ||
        (!send_frame(peer, tcp_wire::kWriteFrame, rkey, remote_addr, nullptr, src, length, &flag,
                     flag_addr) &&
         peers_[size_t(peer)].lost))
      return refuse_lost();
    network_bytes_ += length + sizeof flag;
    return 0;
  }

  // Line messages as one frame each (tcp_wire::kLinesFrame): the target
  // gathers the frame whole and stores every line's flag after its
  // payload, so the promise of line writes holds, and a small message
  // costs one sendmsg where data and flag cost two.
  bool line_writes(int /*peer*/) const override { return true; }
  // A zero-copy write is a frame like any other, received straight into
  // the exposed buffer.
  bool direct_writes_like_window() const override { return true; }
  int post_lines(int peer, const void* src, size_t len, uint64_t flag, uint64_t remote_addr,
                 uint32_t rkey) override {
    if (peer < 0 || peer >= size_ || (len > 0 && src == nullptr) ||
        remote_addr % tcp_wire::kLineBytes != 0 || (peer != rank_ && !peers_[size_t(peer)].reach)) {
      errno = EINVAL;
      return -1;
    }
    constexpr size_t kPerFrame = tcp_wire::kMaxFrameLines * tcp_wire::kLinePayload;
    const char* from = static_cast<const char*>(src);
    size_t at = 0;
    do {
      if (failed_) return 0;  // accepted, never lands (see post_write)
      if (peer != rank_ && peers_[size_t(peer)].lost) return refuse_lost();
      const size_t take = std::min(kPerFrame, len - at);
      const uint64_t addr = remote_addr + at / tcp_wire::kLinePayload * tcp_wire::kLineBytes;
      if (peer == rank_)
        lines_to_self(from + at, take, flag, addr, rkey);
      else if (!send_frame(peer, tcp_wire::kLinesFrame, rkey, addr, &flag, from + at, take) &&
               peers_[size_t(peer)].lost)
        return refuse_lost();
      network_bytes_ += peer == rank_ ? 0 : sizeof flag + take;
      at += take;
    } while (at < len);
    return 0;
  }

  int poll(Completion* out, int max) override {
    receive_progress();
    int n = 0;
    while (n < max && !completions_.empty()) {
      out[n++] = completions_.front();
      completions_.pop_front();
    }
    // Sticky: once failed, every poll reports it.
    if (n == 0 && max > 0 && failed_) out[n++] = Completion{0, failure_peer_, failure_status_};
    return n;
  }

  uint64_t network_bytes() const override { return network_bytes_; }
  // The streams open now (a dial under way, or a stranger, is none yet).
  int connections() const override {
    int n = 0;
    for (const Peer& p : peers_) n += p.reach && p.fd;
    return n;
  }

  void check_peer(int peer) override {
    // A failure of the transport (a protocol violation, a timeout) fails
    // every waiter; a lost peer fails only the waiters for it (see "Lost
    // and leaving peers" at the top). Either message names the peer and
    // the cause.
    if (!failed_) receive_progress();
    const bool known = peer >= 0 && peer < size_ && peer != rank_ && peers_[size_t(peer)].reach;
    // A peer without a stream is asked: a dial in the background, which
    // fails only when its listener refuses (it exited or finalized), and
    // otherwise makes the stream that its first write would have made.
    if (!failed_ && lazy_ && known && !peers_[size_t(peer)].lost && !peers_[size_t(peer)].fd &&
        !dials_[size_t(peer)].active)
      begin_dial(peer);
    if (failed_) throw Error(failure_status_, failure_message_);
    if (known && peers_[size_t(peer)].lost)
      throw Error(peers_[size_t(peer)].lost_status, peers_[size_t(peer)].lost_message);
  }

 private:
  // A signaled write is complete once the kernel has it (on a failed
  // transport: completes with the failure).
  int complete(int flags, uint64_t context, int peer) {
    if (flags & kWriteSignaled)
      completions_.push_back({context, peer, failed_ ? failure_status_ : 0});
    return 0;
  }

  // A write to a lost peer: refused at post, with no completion; the
  // caller's check_peer(peer) says why (COLL_ERR_PEER_LOST, or
  // COLL_ERR_TIMEOUT for a silent one).
  static int refuse_lost() {
    errno = EPIPE;
    return -1;
  }

  // --- setup ---------------------------------------------------------

  // An outgoing connection (eager: to a higher rank), until its welcome is
  // verified.
  struct Dial {
    enum State { kIdle, kConnecting, kAwaitChallenge, kAwaitWelcome, kDone } state = kIdle;
    bool active = false;  // lazy: wanted (a write or a check waits for it), not yet done
    UniqueFd fd;
    const char* ip = "";  // where it dials (the announced address, or loopback)
    uint16_t port = 0;
    Challenge challenge{};
    Hello hello{};
    Welcome welcome{};
    size_t got = 0;                 // bytes of the challenge or welcome read so far
    Clock::time_point redial_at{};  // kIdle after a drop: when to dial again
    int drops = 0;                  // connections the peer closed before its welcome
    std::string last_drop;          // why the latest ended
  };

  // An accepted connection that has not yet proved that a rank of this job
  // made it: it has sent nothing but (part of) a hello.
  struct Stranger {
    uint32_t id = 0;  // lazy: its epoll tag
    UniqueFd fd;
    Clock::time_point expires;
    Challenge challenge{};
    Hello hello{};
    size_t got = 0;
    bool gone = false;
  };

  void connect_all(Bootstrap& boot) {
    secret_ = boot.secret();
    if (secret_.size() != job_secret::kSecretBytes)
      fail(COLL_ERR_INTERNAL,
           "tcp transport: the %s bootstrap gave a job secret of %zu bytes, not %zu", boot.name(),
           secret_.size(), job_secret::kSecretBytes);
    UniqueFd listener = listen_socket();
    const auto all = boot.allgather(
        std::string(reinterpret_cast<const char*>(&published_), sizeof published_), timeout_s_);
    if (all.size() != size_t(size_))
      fail(COLL_ERR_INTERNAL, "tcp transport: bootstrap returned %zu addresses for %d ranks",
           all.size(), size_);
    std::vector<Address> addresses(all.size());
    for (int r = 0; r < size_; ++r) {
      if (all[size_t(r)].size() != sizeof(Address))
        fail(COLL_ERR_INTERNAL, "tcp transport: rank %d published %zu bytes, expected %zu", r,
             all[size_t(r)].size(), sizeof(Address));
      std::memcpy(&addresses[size_t(r)], all[size_t(r)].data(), sizeof(Address));
      addresses[size_t(r)].ip[sizeof Address::ip - 1] = 0;
      addresses[size_t(r)].host[sizeof Address::host - 1] = 0;
      addresses[size_t(r)].netns[sizeof Address::netns - 1] = 0;
    }
    if (lazy_) {
      listen_for_life(std::move(listener), addresses);
      return;
    }
    handshake_all(std::move(listener), addresses, deadline_after(timeout_s_));
    for (int q = 0; q < size_; ++q) {
      Peer& p = peers_[size_t(q)];
      if (!p.reach) continue;
      tune_connection(p.fd.get());
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = event_tag(kStreamEvent, uint32_t(q));
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p.fd.get(), &ev) != 0)
        fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: epoll_ctl");
      p.reading = true;
    }
    update_sole_reader();
  }

  // Where a dial to the rank that published `a` goes.
  void aim(Dial& d, const Address& a) const {
    // 127.0.0.1 reaches the peer only from its own network namespace
    // (ranks of one machine in several namespaces pose as several hosts).
    const bool same_netns =
        std::strcmp(a.host, published_.host) == 0 && std::strcmp(a.netns, published_.netns) == 0;
    d.ip = same_netns && a.bound_any ? "127.0.0.1" : a.ip;
    d.port = a.port;
  }

  // Lazy setup: nothing is dialed; the listener joins the epoll set for
  // the transport's life, and each peer's address is kept for its dial.
  void listen_for_life(UniqueFd listener, std::vector<Address>& addresses) {
    addresses_ = std::move(addresses);  // d.ip points into it
    dials_.resize(size_t(size_));
    for (int q = 0; q < size_; ++q)
      if (peers_[size_t(q)].reach) aim(dials_[size_t(q)], addresses_[size_t(q)]);
    if (fcntl(listener.get(), F_SETFL, fcntl(listener.get(), F_GETFL) | O_NONBLOCK) != 0)
      fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: fcntl(O_NONBLOCK) on the listener");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = event_tag(kListenerEvent, 0);
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, listener.get(), &ev) != 0)
      fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: epoll_ctl");
    listener_ = std::move(listener);
  }

  // Binds the listening socket as the knobs say and fills published_.
  UniqueFd listen_socket() {
    std::memset(&published_, 0, sizeof published_);  // padding too: it is sent
    std::snprintf(published_.host, sizeof published_.host, "%s", host_identity().c_str());
    // "net:[4026531992]": names the network namespace ("" where unreadable).
    (void)readlink("/proc/self/ns/net", published_.netns, sizeof published_.netns - 1);
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: socket");
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    const std::string addr_knob = env_string("COLL_TCP_ADDR");
    const std::string iface_knob = env_string("COLL_TCP_IFACE");
    if (!addr_knob.empty()) {
      bool bound = false;
      for (const std::string& a : env_list("COLL_TCP_ADDR")) {
        if (inet_pton(AF_INET, a.c_str(), &sa.sin_addr) != 1)
          fail(COLL_ERR_INVALID_ARG, "COLL_TCP_ADDR=%s: %s is not an IPv4 address",
               addr_knob.c_str(), a.c_str());
        if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
          bound = true;
          break;
        }
        if (errno != EADDRNOTAVAIL)
          fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: bind to %s", a.c_str());
      }
      if (!bound)
        fail(COLL_ERR_INVALID_ARG, "COLL_TCP_ADDR=%s: rank %d's host has none of these addresses",
             addr_knob.c_str(), rank_);
    } else if (!iface_knob.empty()) {
      std::string known;
      bool found = false;
      for (const auto& [name, a] : interface_addresses()) {
        known += (known.empty() ? "" : ", ") + name;
        if (name == iface_knob && !found) {
          sa.sin_addr = a;
          found = true;
        }
      }
      if (!found)
        fail(COLL_ERR_INVALID_ARG,
             "COLL_TCP_IFACE=%s: no such interface with an IPv4 address on rank %d's host "
             "(there are: %s)",
             iface_knob.c_str(), rank_, known.c_str());
      if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
        fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: bind to %s (COLL_TCP_IFACE=%s)",
                   ip_string(sa.sin_addr).c_str(), iface_knob.c_str());
    } else {
      // The address it announces (the first that is not loopback, else
      // 127.0.0.1), and only that: not every address of the host (issue
      // 15), so that the port is not offered on interfaces the job does not
      // use. Peers on this host reach it there too. Should that bind fail,
      // every address, as before (same-namespace peers then use 127.0.0.1).
      inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
      for (const auto& [name, a] : interface_addresses()) {
        if (ntohl(a.s_addr) >> 24 == 127) continue;  // loopback
        sa.sin_addr = a;
        break;
      }
      if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
        const in_addr announced = sa.sin_addr;
        sa.sin_addr.s_addr = htonl(INADDR_ANY);
        if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
          fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: bind");
        published_.bound_any = 1;
        sa.sin_addr = announced;
      }
    }
    if (listen(fd.get(), SOMAXCONN) != 0)
      fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: listen");
    sockaddr_in bound{};
    socklen_t len = sizeof bound;
    if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0)
      fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: getsockname");
    published_.port = ntohs(bound.sin_port);
    std::snprintf(published_.ip, sizeof published_.ip, "%s", ip_string(sa.sin_addr).c_str());
    return fd;
  }

  // Dials every reachable higher rank and accepts every reachable lower
  // one, in one loop: a rank answers the challenges of its own connections
  // while it accepts, so no two ranks wait for each other. Returns when
  // every such peer's connection is authenticated both ways; the listener
  // closes as soon as no lower rank is missing.
  void handshake_all(UniqueFd listener, const std::vector<Address>& addresses,
                     Clock::time_point deadline) {
    std::vector<Dial> dials(static_cast<size_t>(size_));
    int dialing = 0, missing = 0;
    for (int q = 0; q < size_; ++q) {
      if (!peers_[size_t(q)].reach) continue;
      if (q > rank_) {
        Dial& d = dials[size_t(q)];
        aim(d, addresses[size_t(q)]);
        start_dial(q, d);
        ++dialing;
      } else {
        ++missing;
      }
    }
    if (missing == 0) listener.reset();
    // accept_strangers takes what is queued and must not wait for more.
    if (listener &&
        fcntl(listener.get(), F_SETFL, fcntl(listener.get(), F_GETFL) | O_NONBLOCK) != 0)
      fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: fcntl(O_NONBLOCK) on the listener");
    std::deque<Stranger> strangers;
    Ignored ignored;
    std::vector<pollfd> fds;
    std::vector<int> who;  // per entry of fds: a peer (dial), -1 - i (stranger i), or kListener
    constexpr int kListener = std::numeric_limits<int>::min();
    while (dialing > 0 || missing > 0) {
      const auto now = Clock::now();
      if (now > deadline) handshake_timeout(dials, ignored);
      fds.clear();
      who.clear();
      Clock::time_point wake = deadline;
      for (int q = rank_ + 1; q < size_; ++q) {
        Dial& d = dials[size_t(q)];
        if (d.state == Dial::kIdle && peers_[size_t(q)].reach) {
          if (now >= d.redial_at)
            start_dial(q, d);
          else
            wake = std::min(wake, d.redial_at);
        }
        if (d.state == Dial::kConnecting || d.state == Dial::kAwaitChallenge ||
            d.state == Dial::kAwaitWelcome) {
          fds.push_back({d.fd.get(), short(d.state == Dial::kConnecting ? POLLOUT : POLLIN), 0});
          who.push_back(q);
        }
      }
      for (size_t i = 0; i < strangers.size(); ++i) {
        fds.push_back({strangers[i].fd.get(), POLLIN, 0});
        who.push_back(-1 - int(i));
        wake = std::min(wake, strangers[i].expires);
      }
      if (listener) {
        fds.push_back({listener.get(), POLLIN, 0});
        who.push_back(kListener);
      }
      if (::poll(fds.data(), fds.size(), millis_until(wake)) < 0 && errno != EINTR)
        fail_errno(COLL_ERR_TRANSPORT, errno, "tcp transport: poll during setup");
      bool accept_ready = false;
      for (size_t k = 0; k < fds.size(); ++k) {
        if (!fds[k].revents) continue;
        if (who[k] == kListener) {
          accept_ready = true;
        } else if (who[k] >= 0) {
          if (advance_dial(who[k], dials[size_t(who[k])], deadline)) --dialing;
        } else if (advance_stranger(strangers[size_t(-1 - who[k])], ignored)) {
          --missing;
        }
      }
      const auto later = Clock::now();
      drop_silent_strangers(strangers, later, ignored);
      if (missing == 0) {
        // Every lower rank is in: nobody else may connect, and whoever
        // is still unidentified is nobody this rank waits for.
        listener.reset();
        strangers.clear();
      } else if (accept_ready) {
        missing -= accept_strangers(listener.get(), strangers, ignored);
      }
    }
  }

  // Why connections were dropped, for the timeout message: the first few
  // reasons and a count of the rest (a flood must not grow it).
  struct Ignored {
    std::string text;
    size_t shown = 0, more = 0;
    void add(const std::string& why) {
      if (shown == 8) {
        ++more;
        return;
      }
      text += (text.empty() ? "" : "; ") + why;
      ++shown;
    }
    std::string summary() const {
      return more == 0 ? text : strfmt("%s; and %zu more", text.c_str(), more);
    }
  };

  // Drops the strangers whose hello is overdue at `now`
  // (kHelloWithinSeconds), noting why in `ignored`, and forgets the ones
  // already gone.
  static void drop_silent_strangers(std::deque<Stranger>& strangers, Clock::time_point now,
                                    Ignored& ignored) {
    for (Stranger& st : strangers)
      if (!st.gone && now >= st.expires) {
        ignored.add("a connection that sent no hello within " +
                    std::to_string(kHelloWithinSeconds) + " s");
        st.gone = true;
      }
    std::erase_if(strangers, [](const Stranger& st) { return st.gone; });
  }

  // Accepts what the listener has (a few per pass, so that hellos that
  // arrived are read between batches) and challenges each new connection.
  // Past kMaxStrangers the oldest stranger is dropped, unless its hello is
  // in already: a flood costs the job nothing but these connections, and a
  // real rank, which answers its challenge at once, is refused only when
  // more strangers came in that moment than the table holds (and then
  // dials again). Returns how many lower ranks got in while making room.
  int accept_strangers(int listener, std::deque<Stranger>& strangers, Ignored& ignored) {
    int joined = 0;
    for (int i = 0; i < kAcceptsPerPass; ++i) {
      int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: strangers first make room; only when there
          // are none is this rank itself short of them.
          if (strangers.empty())
            fail_errno(COLL_ERR_NO_RESOURCES, errno,
                       "tcp transport: rank %d cannot accept connections (one socket per peer: "
                       "ulimit -n?)",
                       rank_);
          ignored.add("a connection dropped to make room (out of file descriptors)");
          strangers.pop_front();
        }
        return joined;  // none left (EAGAIN), or it went away before accept (ECONNABORTED, ...)
      }
      Stranger s;
      s.fd = UniqueFd(fd);
      s.expires = Clock::now() + std::chrono::seconds(kHelloWithinSeconds);
      s.challenge.magic = tcp_wire::kChallengeMagic;
      const std::string nonce = secure_random_bytes(sizeof s.challenge.nonce, "a tcp challenge");
      std::memcpy(s.challenge.nonce, nonce.data(), sizeof s.challenge.nonce);
      // A new socket's send buffer takes 40 bytes whole; one that does not
      // is nobody this rank can wait for.
      if (send(fd, &s.challenge, sizeof s.challenge, MSG_NOSIGNAL | MSG_DONTWAIT) !=
          ssize_t(sizeof s.challenge)) {
        ignored.add("a connection that closed before its challenge");
        continue;
      }
      if (lazy_) {
        // Watched by the engine's epoll set from now on (its fd's close
        // takes it out again).
        s.id = next_stranger_++;
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.u64 = event_tag(kStrangerEvent, s.id);
        if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
          ignored.add("a connection this rank could not watch (epoll_ctl failed)");
          continue;
        }
      }
      strangers.push_back(std::move(s));
      while (strangers.size() > kMaxStrangers) {
        Stranger& oldest = strangers.front();
        if (advance_stranger(oldest, ignored)) ++joined;
        if (!oldest.gone) ignored.add("a connection dropped to make room for newer ones");
        strangers.pop_front();
      }
    }
    return joined;
  }

  // Reads what a stranger sent (never past its hello). True when it is a
  // lower rank of this job that has now proved it and been welcomed; gone
  // is set when the connection is done with, either way.
  bool advance_stranger(Stranger& s, Ignored& ignored) {
    if (s.gone) return false;
    ssize_t n = recv(s.fd.get(), reinterpret_cast<char*>(&s.hello) + s.got, sizeof(Hello) - s.got,
                     MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) {
      ignored.add(s.got == 0 ? "a connection that closed before its hello"
                             : "a connection that closed in the middle of its hello");
      s.gone = true;
      return false;
    }
    s.got += size_t(n);
    if (s.got < sizeof(Hello)) return false;
    s.gone = true;
    std::string why = check_hello(s.hello, s.challenge);
    if (why.empty() && lazy_) why = crossing(int(s.hello.rank));
    if (!why.empty()) {
      ignored.add(why);
      return false;
    }
    Welcome welcome{tcp_wire::kWelcomeMagic, {}};
    const auto proof = tcp_wire::welcome_proof(secret_, s.hello, s.challenge);
    std::memcpy(welcome.proof, proof.data(), sizeof welcome.proof);
    // As the challenge: a socket that has sent 88 bytes takes 40 whole.
    if (send(s.fd.get(), &welcome, sizeof welcome, MSG_NOSIGNAL | MSG_DONTWAIT) !=
        ssize_t(sizeof welcome)) {
      ignored.add(strfmt("rank %u, whose connection closed before its welcome", s.hello.rank));
      return false;
    }
    if (lazy_) {
      adopt(int(s.hello.rank), std::move(s.fd));
      return true;
    }
    Peer& p = peers_[s.hello.rank];
    const bool first = !p.fd;
    // A second proved connection from a rank means that its first broke
    // before our welcome reached it, and it dialled again: the newer is the
    // one it uses.
    p.fd = std::move(s.fd);
    return first;
  }

  // Lazy: why a proved hello from rank h is not taken (empty: it is). A
  // pair has one stream; when both dial at once the lower rank's stands
  // (see the top), so the lower refuses the higher's while its own dial is
  // under way. Refused like a stranger: the higher rank dials again a little
  // later, and by then has taken the lower's connection, or takes it then.
  std::string crossing(int h) const {
    if (peers_[size_t(h)].fd) return strfmt("a second connection from rank %d, which has one", h);
    if (h > rank_ && dials_[size_t(h)].active)
      return strfmt(
          "a connection from rank %d that crossed this rank's to it (the lower rank's "
          "stands)",
          h);
    return "";
  }

  // Lazy: makes fd, authenticated both ways, the stream with peer. A dial of
  // ours to it that is under way is dropped: the peer, the lower rank,
  // refuses or has refused its hello (crossing), so it never carries a frame.
  void adopt(int peer, UniqueFd fd) {
    Dial& d = dials_[size_t(peer)];
    if (d.active) {
      d.fd.reset();
      d.state = Dial::kIdle;
      d.active = false;
    }
    Peer& p = peers_[size_t(peer)];
    p.fd = std::move(fd);
    tune_connection(p.fd.get());
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = event_tag(kStreamEvent, uint32_t(peer));
    // A stranger's socket is in the set already; a dial's too.
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev) != 0 &&
        (errno != ENOENT || epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, p.fd.get(), &ev) != 0)) {
      mark_failed(
          COLL_ERR_NO_RESOURCES, peer,
          strfmt("tcp transport: epoll_ctl for rank %d's stream: %s", peer, std::strerror(errno)));
      return;
    }
    p.reading = true;
    update_sole_reader();
  }

  // Empty when the hello is from a lower rank of this job, to this rank,
  // answering this connection's challenge; otherwise why it is refused. The
  // proof is checked first, in constant time; the messages name what the
  // stranger said, never what was expected.
  std::string check_hello(const Hello& h, const Challenge& c) const {
    if (h.magic != tcp_wire::kHelloMagic) return "a connection that is not a libcoll rank";
    const auto want = tcp_wire::hello_proof(secret_, h, c);
    if (!job_secret::equal(h.proof, want.data(), sizeof h.proof))
      return strfmt(
          "a connection claiming rank %u without this job's secret (another job, or "
          "a replayed hello)",
          h.rank);
    // From here the hello is a rank's of this job: what it says is true.
    // Eager: only lower ranks dial. Lazy: any other rank may.
    const uint32_t below = lazy_ ? uint32_t(size_) : uint32_t(rank_);
    if (h.reserved != 0 || h.size != uint32_t(size_) || h.target != uint32_t(rank_) ||
        h.rank >= below || h.rank == uint32_t(rank_) || !peers_[h.rank].reach)
      return strfmt("a hello from rank %u of %u to rank %u, which does not connect here", h.rank,
                    h.size, h.target);
    return "";
  }

  void start_dial(int q, Dial& d) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(d.port);
    if (inet_pton(AF_INET, d.ip, &sa.sin_addr) != 1)
      fail(COLL_ERR_INTERNAL, "tcp transport: rank %d published address '%s'", q, d.ip);
    d.fd.reset(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!d.fd) fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: socket");
    d.got = 0;
    d.state = Dial::kConnecting;
    if (connect(d.fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      d.state = Dial::kAwaitChallenge;
    } else if (errno != EINPROGRESS) {
      cannot_connect(q, d, errno);
    }
    if (lazy_) watch_dial(q, d, EPOLL_CTL_ADD);
  }

  // Lazy: a dial's socket in the engine's epoll set, for what it waits for.
  void watch_dial(int q, const Dial& d, int op) {
    epoll_event ev{};
    ev.events = d.state == Dial::kConnecting ? EPOLLOUT : EPOLLIN;
    ev.data.u64 = event_tag(kDialEvent, uint32_t(q));
    if (epoll_ctl(epoll_.get(), op, d.fd.get(), &ev) != 0)
      fail_errno(COLL_ERR_NO_RESOURCES, errno, "tcp transport: epoll_ctl for a dial to rank %d", q);
  }

  [[noreturn]] void cannot_connect(int q, const Dial& d, int err) {
    // Lazy: the peer published this port and listened on it until it
    // exited or finalized (see the top): a refusal means it is gone.
    if (lazy_ && (err == ECONNREFUSED || err == ECONNRESET))
      fail(COLL_ERR_PEER_LOST,
           "rank %d lost rank %d over tcp: its port %s:%u refuses connections (the peer exited, "
           "or finalized)",
           rank_, q, d.ip, unsigned(d.port));
    fail_errno(err == ETIMEDOUT ? COLL_ERR_TIMEOUT : COLL_ERR_TRANSPORT, err,
               "tcp transport: rank %d cannot connect to rank %d at %s:%u (firewall? choose "
               "the network with COLL_TCP_IFACE or COLL_TCP_ADDR)",
               rank_, q, d.ip, unsigned(d.port));
  }

  // The peer closed a connection before its welcome: it dropped us (a flood
  // filled its table, or it did not take our proof), or it is gone. Dial
  // again a little later: a peer that is gone refuses the connection, and
  // one whose secret differs refuses every hello until the timeout, whose
  // message says so.
  void redial_later(Dial& d, const char* why) {
    d.fd.reset();
    d.state = Dial::kIdle;
    d.last_drop = why;
    ++d.drops;
    d.redial_at = Clock::now() + std::chrono::milliseconds(std::min(10 * d.drops, 200));
  }

  // Moves a dial on by what its socket says. True when it is done.
  bool advance_dial(int q, Dial& d, Clock::time_point deadline) {
    if (d.state == Dial::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(d.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) cannot_connect(q, d, err);
      d.state = Dial::kAwaitChallenge;
      if (lazy_) watch_dial(q, d, EPOLL_CTL_MOD);
      return false;
    }
    char* into = d.state == Dial::kAwaitChallenge ? reinterpret_cast<char*>(&d.challenge)
                                                  : reinterpret_cast<char*>(&d.welcome);
    const size_t want = d.state == Dial::kAwaitChallenge ? sizeof(Challenge) : sizeof(Welcome);
    ssize_t n = recv(d.fd.get(), into + d.got, want - d.got, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return false;
    if (n <= 0) {
      redial_later(d, d.state == Dial::kAwaitChallenge
                          ? "it closed our connection before its challenge"
                          : "it closed our connection after our hello");
      return false;
    }
    d.got += size_t(n);
    if (d.got < want) return false;
    d.got = 0;
    if (d.state == Dial::kAwaitChallenge) {
      if (d.challenge.magic != tcp_wire::kChallengeMagic)
        fail(COLL_ERR_TRANSPORT,
             "tcp transport: rank %d connected to rank %d at %s:%u and got no libcoll tcp "
             "challenge: not rank %d's port (the rank is gone, and another program has it?)",
             rank_, q, d.ip, unsigned(d.port), q);
      d.hello =
          Hello{tcp_wire::kHelloMagic, uint32_t(rank_), uint32_t(q), uint32_t(size_), 0, {}, {}};
      const std::string nonce = secure_random_bytes(sizeof d.hello.nonce, "a tcp hello");
      std::memcpy(d.hello.nonce, nonce.data(), sizeof d.hello.nonce);
      const auto proof = tcp_wire::hello_proof(secret_, d.hello, d.challenge);
      std::memcpy(d.hello.proof, proof.data(), sizeof d.hello.proof);
      if (!send_whole(d.fd.get(), &d.hello, sizeof d.hello, deadline)) {
        redial_later(d, "its connection failed while we sent our hello");
        return false;
      }
      d.state = Dial::kAwaitWelcome;
      return false;
    }
    const auto proof = tcp_wire::welcome_proof(secret_, d.hello, d.challenge);
    if (d.welcome.magic != tcp_wire::kWelcomeMagic ||
        !job_secret::equal(d.welcome.proof, proof.data(), sizeof d.welcome.proof))
      fail(COLL_ERR_TRANSPORT,
           "tcp transport: rank %d connected to rank %d at %s:%u, whose welcome does not prove "
           "this job's secret: not rank %d of this job (the rank is gone, and another process "
           "has its port?)",
           rank_, q, d.ip, unsigned(d.port), q);
    d.state = Dial::kDone;
    if (lazy_) {
      // The peer took it (its welcome): the pair's stream. Had the peer's
      // own dial been taken here first, this one would have been dropped.
      end_dial(d);
      adopt(q, std::move(d.fd));
    } else {
      peers_[size_t(q)].fd = std::move(d.fd);
    }
    return true;
  }

  // send() of a few bytes on a connected socket, bounded by the deadline.
  static bool send_whole(int fd, const void* data, size_t length, Clock::time_point deadline) {
    size_t sent = 0;
    while (sent < length) {
      ssize_t n = send(fd, static_cast<const char*>(data) + sent, length - sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += size_t(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR) && Clock::now() < deadline) {
        pollfd pfd{fd, POLLOUT, 0};
        ::poll(&pfd, 1, millis_until(deadline));
      } else {
        return false;
      }
    }
    return true;
  }

  [[noreturn]] void handshake_timeout(const std::vector<Dial>& dials, const Ignored& ignored) {
    std::string in, out;
    // append(), not "x" + std::to_string(): GCC 12 at -O3 warns
    // (-Wrestrict, a false positive) inside that operator+.
    for (int q = 0; q < rank_; ++q)
      if (peers_[size_t(q)].reach && !peers_[size_t(q)].fd) {
        if (!in.empty()) in += ' ';
        in.append(std::to_string(q));
      }
    for (int q = rank_ + 1; q < size_; ++q) {
      const Dial& d = dials[size_t(q)];
      if (!peers_[size_t(q)].reach || d.state == Dial::kDone) continue;
      if (!out.empty()) out += "; ";
      out.append(strfmt("rank %d at %s:%u", q, d.ip, unsigned(d.port)));
      if (d.drops > 0)
        out.append(
            strfmt(" (%s, %d time(s): does it hold this rank's job secret, "
                   "COLL_JOB_SECRET or PMIx's?)",
                   d.last_drop.c_str(), d.drops));
    }
    std::string what;
    if (!in.empty())
      what =
          strfmt("connections from rank(s) %s on port %u", in.c_str(), unsigned(published_.port));
    if (!out.empty()) what += (what.empty() ? "" : ", and ") + ("a welcome from " + out);
    const std::string dropped = ignored.summary();
    fail(COLL_ERR_TIMEOUT,
         "tcp transport: rank %d waited %.0f s for %s (firewall? COLL_TCP_IFACE / "
         "COLL_TCP_ADDR)%s%s",
         rank_, timeout_s_, what.c_str(), dropped.empty() ? "" : "; ignored: ", dropped.c_str());
  }

  // --- connections on first use (lazy) -------------------------------

  // Starts a dial to q (a write or a check needs the stream); the engine
  // moves it on. A failure to start fails the transport.
  void begin_dial(int q) {
    Dial& d = dials_[size_t(q)];
    d.active = true;
    ++active_dials_;
    d.drops = 0;
    d.last_drop.clear();
    try_start_dial(q, d);
  }

  // A dial that cannot even start fails the transport (sticky), never
  // throws out of the progress engine.
  void try_start_dial(int q, Dial& d) {
    try {
      start_dial(q, d);
    } catch (const Error& e) {
      end_dial(d);
      d.fd.reset();
      dial_failed(q, e);
    }
  }

  // A refused dial (cannot_connect: the peer's listener is gone) loses
  // that peer only; anything else fails the transport.
  void dial_failed(int q, const Error& e) {
    if (e.status() == COLL_ERR_PEER_LOST)
      mark_lost(q, COLL_ERR_PEER_LOST, e.what());
    else
      mark_failed(e.status(), q, e.what());
  }

  void end_dial(Dial& d) {
    if (!d.active) return;
    d.active = false;
    --active_dials_;
  }

  // A stream with peer, dialed now if there is none: waits for it (bounded
  // by the timeout) while the engine runs - applying frames, accepting,
  // answering other ranks' handshakes - so ranks that dial each other, or
  // dial round a ring, all get through. False when the transport failed,
  // or the peer is lost (its port refused the dial).
  bool connect_now(int peer) {
    Peer& p = peers_[size_t(peer)];
    if (!dials_[size_t(peer)].active) begin_dial(peer);
    const auto deadline = deadline_after(timeout_s_);
    while (!p.fd && !failed_ && !p.lost) {
      receive_progress();
      if (p.fd || failed_ || p.lost) break;
      if (Clock::now() > deadline) {
        const Dial& d = dials_[size_t(peer)];
        std::string why;
        if (d.drops > 0)
          why = strfmt(
              " (%s, %d time(s): does it hold this rank's job secret, COLL_JOB_SECRET or "
              "PMIx's?)",
              d.last_drop.c_str(), d.drops);
        const std::string dropped = ignored_.summary();
        mark_lost(peer, COLL_ERR_TIMEOUT,
                    strfmt("rank %d timed out after %.1f s waiting for a handshake from rank %d "
                           "over tcp at %s:%u%s: a first write to a peer waits until the peer "
                           "takes the connection in a libcoll call (COLL_TIMEOUT=%g; firewall? "
                           "COLL_TCP_IFACE / COLL_TCP_ADDR)%s%s",
                           rank_, timeout_s_, peer, d.ip, unsigned(d.port), why.c_str(), timeout_s_,
                           dropped.empty() ? "" : "; ignored: ", dropped.c_str()));
        break;
      }
      pollfd fds[1] = {{epoll_.get(), POLLIN, 0}};
      ::poll(fds, 1, 1);
    }
    return !failed_ && !p.lost;
  }

  // Engine work on handshakes, after a pass's epoll events: accepts what
  // the listener has, expires strangers, redials dropped dials.
  void handshake_progress(bool accept_ready) {
    try {
      if (accept_ready && listener_) accept_strangers(listener_.get(), strangers_, ignored_);
    } catch (const Error& e) {
      mark_failed(e.status(), -1, e.what());
      return;
    }
    if (strangers_.empty() && active_dials_ == 0) return;
    const auto now = Clock::now();
    drop_silent_strangers(strangers_, now, ignored_);
    for (int q = 0; q < size_ && active_dials_ > 0 && !failed_; ++q) {
      Dial& d = dials_[size_t(q)];
      if (!d.active || d.state != Dial::kIdle || now < d.redial_at) continue;
      try_start_dial(q, d);
    }
  }

  void stranger_event(uint32_t id) {
    for (auto it = strangers_.begin(); it != strangers_.end(); ++it) {
      if (it->id != id) continue;
      advance_stranger(*it, ignored_);
      if (it->gone) strangers_.erase(it);
      return;
    }
  }

  void dial_event(int q) {
    Dial& d = dials_[size_t(q)];
    if (!d.active || !d.fd) return;
    try {
      advance_dial(q, d, deadline_after(timeout_s_));
    } catch (const Error& e) {
      end_dial(d);
      d.fd.reset();
      dial_failed(q, e);
    }
  }

  // This rank's `left` notice to peer (kWriteLeaving): true when it is
  // dropped, for want of a stream. Once every peer has had it, the
  // listener closes: a peer that dials this rank from then on - one that
  // waits for a first message from it - is refused, and knows.
  bool leave_notice(int peer) {
    Peer& p = peers_[size_t(peer)];
    if (!p.noticed) {
      p.noticed = true;
      if (++noticed_ == reachable_ && listener_) {
        listener_.reset();
        strangers_.clear();
      }
    }
    return lazy_ && !p.fd;
  }

  // --- sending -------------------------------------------------------

  // Credits (kWriteDeferrable). Why holding one back is safe: the peer
  // needs it only to send a message num_slots - 1 past what this rank has
  // consumed, and this rank sends it at its next receive pass, which every
  // wait in the library makes, or with its next frame to the peer. So the
  // peer can wait on it only while this rank is outside the library - as it
  // would one message later without deferral. A credit at the same address
  // replaces the one held there (counts only grow).
  void defer_write(int peer, const void* src, uint64_t remote_addr, uint32_t rkey,
                   uint32_t type = tcp_wire::kWriteFrame) {
    Peer& p = peers_[size_t(peer)];
    uint64_t value;
    std::memcpy(&value, src, sizeof value);
    for (DeferredWrite& d : p.deferred)
      if (d.header.remote_addr == remote_addr && d.header.rkey == rkey) {
        d.header.type = type;
        d.value = value;
        return;
      }
    if (p.deferred.size() == kMaxDeferred) send_deferred(peer);
    if (p.deferred.empty()) ++deferring_peers_;
    p.deferred.push_back({{tcp_wire::kFrameMagic, type, rkey, 0, remote_addr, sizeof value},
                          value});
  }

  // A notice (kWriteNotice: a failure or a refusal) to a peer without a
  // stream: the dial starts, and the notice is held until the stream is
  // up (the next receive pass after it is sends it), instead of waiting
  // for the handshake here. A peer that is silent (stopped) would hold
  // this rank's failure up for the timeout, and a peer that never takes
  // the connection loses nothing: a notice is moot where it is gone.
  void hold_notice(int peer, const void* src, uint64_t remote_addr, uint32_t rkey) {
    if (!dials_[size_t(peer)].active) begin_dial(peer);
    if (peers_[size_t(peer)].lost || failed_) return;
    defer_write(peer, src, remote_addr, rkey, tcp_wire::kNoticeFrame);
  }

  // Moves peer's held credits into out (room for kMaxDeferred) and points
  // two iovecs at each: they go first, in the same sendmsg. Moved out
  // before the send: a full socket runs a receive pass, which sends what
  // is held, and must not find these again.
  size_t take_deferred(Peer& p, DeferredWrite* out, iovec* iov) {
    const size_t n = p.deferred.size();
    if (n == 0) return 0;
    std::copy(p.deferred.begin(), p.deferred.end(), out);
    p.deferred.clear();
    --deferring_peers_;
    for (size_t i = 0; i < n; ++i) {
      iov[2 * i] = {&out[i].header, sizeof out[i].header};
      iov[2 * i + 1] = {&out[i].value, sizeof out[i].value};
    }
    return 2 * n;
  }

  void send_deferred(int peer) {
    DeferredWrite held[kMaxDeferred];
    iovec iov[2 * kMaxDeferred];
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = take_deferred(peers_[size_t(peer)], held, iov);
    if (msg.msg_iovlen > 0) (void)send_message(peer, msg);  // to a lost peer: dropped
  }

  // A peer without a stream yet (a held notice) waits for it.
  void send_all_deferred() {
    for (int r = 0; r < size_ && deferring_peers_ > 0; ++r)
      if (!peers_[size_t(r)].deferred.empty() && peers_[size_t(r)].fd) send_deferred(r);
  }

  // Hands the held credits, header, flag (a lines frame's, else null) and
  // payload to the kernel in one sendmsg (see "Sends" at the top); then,
  // where then_word is given, an 8-byte write frame of it at then_addr
  // (post_message's flag) in the same sendmsg. False when it did not all
  // go: the transport failed, or the peer is lost.
  bool send_frame(int peer, uint32_t type, uint32_t rkey, uint64_t remote_addr,
                  const uint64_t* flag, const void* payload, size_t length,
                  const uint64_t* then_word = nullptr, uint64_t then_addr = 0) {
    const size_t flag_bytes = flag ? sizeof *flag : 0;
    const FrameHeader header{tcp_wire::kFrameMagic, type, rkey, 0, remote_addr,
                             flag_bytes + length};
    const FrameHeader then_header{tcp_wire::kFrameMagic, tcp_wire::kWriteFrame, rkey, 0,
                                  then_addr, sizeof *then_word};
    DeferredWrite held[kMaxDeferred];
    iovec iov[2 * kMaxDeferred + 5];
    msghdr msg{};
    msg.msg_iov = iov;
    Peer& p = peers_[size_t(peer)];
    msg.msg_iovlen = take_deferred(p, held, iov);
    iov[msg.msg_iovlen++] = {const_cast<FrameHeader*>(&header), sizeof header};
    if (flag) iov[msg.msg_iovlen++] = {const_cast<uint64_t*>(flag), flag_bytes};
    if (length > 0) iov[msg.msg_iovlen++] = {const_cast<void*>(payload), length};
    if (then_word) {
      iov[msg.msg_iovlen++] = {const_cast<FrameHeader*>(&then_header), sizeof then_header};
      iov[msg.msg_iovlen++] = {const_cast<uint64_t*>(then_word), sizeof *then_word};
    }
    return send_message(peer, msg);
  }

  // The sendmsg loop: the whole message, waiting for room while applying
  // what arrives (see "Sends" at the top). False when the message did not
  // all go: the transport failed, or the peer is lost (what part of it
  // went is lost with the peer).
  bool send_message(int peer, msghdr& msg) {
    Peer& p = peers_[size_t(peer)];
    if (p.lost || (!p.fd && !connect_now(peer))) return false;
    Clock::time_point deadline{};
    bool waited = false;
    for (;;) {
      ssize_t n = sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) {
        size_t done = size_t(n);
        while (msg.msg_iovlen > 0 && done >= msg.msg_iov[0].iov_len) {
          done -= msg.msg_iov[0].iov_len;
          ++msg.msg_iov;
          --msg.msg_iovlen;
        }
        if (msg.msg_iovlen == 0) return true;
        msg.msg_iov[0].iov_base = static_cast<char*>(msg.msg_iov[0].iov_base) + done;
        msg.msg_iov[0].iov_len -= done;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        lose_peer(peer, strfmt("sending to it failed: %s", std::strerror(errno)));
        return false;
      }
      // The socket is full: apply what arrives while the peer drains it.
      if (!waited) {
        deadline = deadline_after(timeout_s_);
        waited = true;
      }
      receive_progress();
      if (failed_ || p.lost) return false;
      if (Clock::now() > deadline) {
        // The stream holds part of a frame now: closed (the peer, if it
        // still runs, sees it cut in the middle of a frame, and loses us).
        mark_lost(peer, COLL_ERR_TIMEOUT,
                  strfmt("rank %d timed out after %.1f s sending to rank %d over tcp: the peer "
                         "does not read (COLL_TIMEOUT=%g): is every rank calling the same "
                         "collective?",
                         rank_, timeout_s_, peer, timeout_s_));
        shutdown(p.fd.get(), SHUT_RDWR);
        return false;
      }
      pollfd fds[2] = {{p.fd.get(), POLLOUT, 0}, {epoll_.get(), POLLIN, 0}};
      ::poll(fds, 2, 1);
    }
  }

  // A rank writing into its own memory: checked like any incoming write.
  void write_to_self(const void* src, size_t length, uint64_t remote_addr, uint32_t rkey) {
    std::string why = refuse_write(rkey, remote_addr, length);
    if (!why.empty()) {
      mark_failed(COLL_ERR_TRANSPORT, rank_,
                  strfmt("rank %d refused a tcp write from itself: %s", rank_, why.c_str()));
      return;
    }
    apply_write(reinterpret_cast<void*>(remote_addr), src, length);
  }

  // Lines a rank writes into its own memory: checked like incoming ones.
  void lines_to_self(const char* src, size_t len, uint64_t flag, uint64_t remote_addr,
                     uint32_t rkey) {
    std::string why = refuse_lines(rkey, remote_addr, 8 + len);
    if (!why.empty()) {
      mark_failed(COLL_ERR_TRANSPORT, rank_,
                  strfmt("rank %d refused tcp lines from itself: %s", rank_, why.c_str()));
      return;
    }
    apply_lines(reinterpret_cast<char*>(remote_addr), src, len, flag);
  }

  // Every line: its payload, then its flag with a release store, so that
  // a reader polling a line's flag finds that line's payload there.
  static void apply_lines(char* dst, const char* src, size_t len, uint64_t flag) {
    const size_t lines = tcp_wire::frame_lines(8 + len);
    for (size_t j = 0; j < lines; ++j, dst += tcp_wire::kLineBytes) {
      const size_t at = j * tcp_wire::kLinePayload;
      if (at < len) std::memcpy(dst + 8, src + at, std::min(tcp_wire::kLinePayload, len - at));
      __atomic_store_n(reinterpret_cast<uint64_t*>(dst), flag, __ATOMIC_RELEASE);
    }
  }

  // Best effort, never waits: the failed stream may be full or gone.
  void send_abort(int peer, const std::string& text) {
    Peer& p = peers_[size_t(peer)];
    if (!p.fd) return;
    const size_t len = std::min<size_t>(text.size(), tcp_wire::kMaxAbortText);
    const FrameHeader header{tcp_wire::kFrameMagic, tcp_wire::kAbortFrame, 0, 0, 0, len};
    iovec iov[2] = {{const_cast<FrameHeader*>(&header), sizeof header},
                    {const_cast<char*>(text.data()), len}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    (void)sendmsg(p.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  }

  // --- receiving -----------------------------------------------------

  void receive_progress() {
    if (failed_) return;
    if (deferring_peers_ > 0) send_all_deferred();
    if (failed_) return;
    // One connection: ask it straight away. A recv that finds nothing
    // costs what an epoll_wait that finds nothing does, and one that finds
    // bytes saves the epoll_wait before it.
    // While handshakes are under way, and every kListenerEvery passes
    // while the listener is open, epoll is asked.
    if (sole_reader_ >= 0 && active_dials_ == 0 && strangers_.empty() &&
        (!listener_ || ++passes_ % kListenerEvery != 0)) {
      receive_from(sole_reader_);
      return;
    }
    epoll_event events[64];
    int n = epoll_wait(epoll_.get(), events, 64, 0);
    bool accept_ready = false;
    for (int i = 0; i < n && !failed_; ++i) {
      const auto index = uint32_t(events[i].data.u64);
      switch (EventKind(events[i].data.u64 >> 32)) {
        case kStreamEvent:
          receive_from(int(index));
          break;
        case kListenerEvent:
          accept_ready = true;
          break;
        case kStrangerEvent:
          stranger_event(index);
          break;
        case kDialEvent:
          dial_event(int(index));
          break;
      }
    }
    if (lazy_ && !failed_) handshake_progress(accept_ready);
  }

  void receive_from(int peer) {
    Peer& p = peers_[size_t(peer)];
    Receiver& rx = p.rx;
    for (int round = 0; round < kReceivesPerPass && p.reading && !failed_; ++round) {
      ssize_t n;
      const uint64_t left = rx.in_payload ? rx.header.length - rx.payload_got : 0;
      const size_t direct_from = rx.large_run ? kLargeRunStage : kDirectReceive;
      if (rx.sink == Sink::kRegion && rx.begin == rx.end && left >= direct_from) {
        // A large payload goes straight into its region.
        if (!still_registered(peer)) return;
        char* dst = reinterpret_cast<char*>(rx.header.remote_addr) + rx.payload_got;
        n = recv(p.fd.get(), dst, size_t(std::min<uint64_t>(left, 1u << 30)), MSG_DONTWAIT);
        if (n > 0) {
          rx.payload_got += uint64_t(n);
          if (rx.payload_got == rx.header.length) end_frame(rx);
          continue;
        }
      } else {
        if (rx.begin == rx.end) rx.begin = rx.end = 0;
        const size_t room = kStageBytes - rx.end;
        n = recv(p.fd.get(), rx.stage.get() + rx.end,
                 rx.large_run ? std::min(room, kLargeRunStage) : room, MSG_DONTWAIT);
        if (n > 0) {
          rx.end += size_t(n);
          consume_staged(peer);
          continue;
        }
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n == 0 && (rx.header_got > 0 || rx.in_payload)) {
        const uint64_t got = rx.in_payload ? sizeof(FrameHeader) + rx.payload_got : rx.header_got;
        const uint64_t want =
            rx.in_payload ? sizeof(FrameHeader) + rx.header.length : sizeof(FrameHeader);
        lose_peer(peer, strfmt("its connection closed in the middle of a frame (%llu of %llu "
                               "bytes: truncated)",
                               static_cast<unsigned long long>(got),
                               static_cast<unsigned long long>(want)));
      } else {
        lose_peer(peer, n == 0 ? std::string("its connection closed")
                               : strfmt("its connection failed: %s", std::strerror(errno)));
      }
      return;
    }
  }

  // Parses and applies staged bytes. The stage always ends at a point the
  // parser can resume from: a partial header or payload is kept in rx.
  void consume_staged(int peer) {
    Peer& p = peers_[size_t(peer)];
    Receiver& rx = p.rx;
    while (rx.begin < rx.end && p.reading && !failed_) {
      const size_t avail = rx.end - rx.begin;
      const char* data = rx.stage.get() + rx.begin;
      if (!rx.in_payload) {
        const size_t take = std::min(avail, sizeof(FrameHeader) - rx.header_got);
        std::memcpy(reinterpret_cast<char*>(&rx.header) + rx.header_got, data, take);
        rx.header_got += take;
        rx.begin += take;
        if (rx.header_got == sizeof(FrameHeader)) begin_frame(peer);
        continue;
      }
      const size_t take = size_t(std::min<uint64_t>(avail, rx.header.length - rx.payload_got));
      switch (rx.sink) {
        case Sink::kWhole:
        case Sink::kLines:
          std::memcpy(rx.whole + rx.payload_got, data, take);
          break;
        case Sink::kText:
          rx.text.append(data, take);
          break;
        case Sink::kRegion:
          if (!still_registered(peer)) return;
          std::memcpy(reinterpret_cast<char*>(rx.header.remote_addr) + rx.payload_got, data, take);
          break;
        case Sink::kNone:
          break;
      }
      rx.payload_got += take;
      rx.begin += take;
      if (rx.payload_got == rx.header.length) finish_frame(peer);
    }
  }

  // A whole header has arrived: check it before a byte of payload lands.
  void begin_frame(int peer) {
    Receiver& rx = peers_[size_t(peer)].rx;
    const FrameHeader& h = rx.header;
    rx.header_got = 0;
    if (h.magic != tcp_wire::kFrameMagic || h.reserved != 0) {
      refuse_frame(peer, strfmt("a malformed frame (magic 0x%08x, reserved %u: not a libcoll "
                                "tcp frame, the stream is corrupt)",
                                h.magic, h.reserved));
      return;
    }
    if (h.type == tcp_wire::kAbortFrame) {
      if (h.length > tcp_wire::kMaxAbortText) {
        refuse_frame(peer, strfmt("a malformed abort frame of %llu bytes",
                                  static_cast<unsigned long long>(h.length)));
        return;
      }
      rx.sink = Sink::kText;
      rx.text.clear();
    } else if (h.type == tcp_wire::kWriteFrame) {
      std::string why = refuse_write(h.rkey, h.remote_addr, h.length);
      if (!why.empty()) {
        refuse_frame(peer, why);
        return;
      }
      rx.sink = h.length <= kWholePayload ? Sink::kWhole : Sink::kRegion;
      if (rx.sink == Sink::kRegion) rx.large_run = h.length >= kLargeFrame;
    } else if (h.type == tcp_wire::kNoticeFrame) {
      if (h.length != sizeof(uint64_t)) {
        refuse_frame(peer, strfmt("a malformed notice frame of %llu bytes",
                                  static_cast<unsigned long long>(h.length)));
        return;
      }
      // Dropped (read and discarded) where its region is gone; anything
      // else wrong with it is refused like a write.
      RegionGrant grant;
      const RegionCheck check = check_region(regions_, h.rkey, h.remote_addr, h.length, &grant);
      if (check == RegionCheck::kUnknownRkey || check == RegionCheck::kClosed) {
        rx.sink = Sink::kNone;
      } else {
        std::string why = refuse_write(h.rkey, h.remote_addr, h.length);
        if (!why.empty()) {
          refuse_frame(peer, why);
          return;
        }
        rx.sink = Sink::kWhole;
      }
    } else if (h.type == tcp_wire::kLinesFrame) {
      std::string why = refuse_lines(h.rkey, h.remote_addr, h.length);
      if (!why.empty()) {
        refuse_frame(peer, why);
        return;
      }
      rx.sink = Sink::kLines;
    } else {
      refuse_frame(peer, strfmt("a malformed frame (unknown type %u)", h.type));
      return;
    }
    rx.in_payload = true;
    rx.payload_got = 0;
    if (h.length == 0) finish_frame(peer);
  }

  void finish_frame(int peer) {
    Receiver& rx = peers_[size_t(peer)].rx;
    const FrameHeader& h = rx.header;
    if (rx.sink == Sink::kWhole) {
      if (!still_registered(peer)) return;
      apply_write(reinterpret_cast<void*>(h.remote_addr), rx.whole, size_t(h.length));
    } else if (rx.sink == Sink::kLines) {
      if (!still_registered(peer)) return;
      uint64_t flag;
      std::memcpy(&flag, rx.whole, sizeof flag);
      apply_lines(reinterpret_cast<char*>(h.remote_addr), rx.whole + 8, size_t(h.length) - 8, flag);
    } else if (rx.sink == Sink::kText) {
      mark_failed(
          COLL_ERR_TRANSPORT, peer,
          strfmt("rank %d refused a tcp write from rank %d: %s", peer, rank_, rx.text.c_str()));
    }
    end_frame(rx);
  }

  static void end_frame(Receiver& rx) {
    rx.in_payload = false;
    rx.payload_got = 0;
    rx.sink = Sink::kNone;
  }

  // A write is applied over several progress calls, and dereg() may come
  // between them: false (and the frame refused) when its region is gone.
  bool still_registered(int peer) {
    const FrameHeader& h = peers_[size_t(peer)].rx.header;
    if (region_alive(regions_, h.rkey)) return true;
    refuse_frame(peer, strfmt("rkey 0x%x was deregistered or closed while its write of %llu "
                              "bytes was arriving",
                              h.rkey, static_cast<unsigned long long>(h.length)));
    return false;
  }

  // Empty when rkey names a live region of ours that covers the range.
  std::string refuse_write(uint32_t rkey, uint64_t remote_addr, uint64_t length) const {
    RegionGrant grant;
    const RegionCheck check = check_region(regions_, rkey, remote_addr, length, &grant);
    if (check == RegionCheck::kOk) return "";  // every frame: no formatting on this path
    const std::string write = strfmt("a write of %llu bytes to 0x%llx with rkey 0x%x",
                                     static_cast<unsigned long long>(length),
                                     static_cast<unsigned long long>(remote_addr), rkey);
    switch (check) {
      case RegionCheck::kOk:
        return "";
      case RegionCheck::kUnknownRkey:
        return write + ", which names no registered region (never registered, or deregistered)";
      case RegionCheck::kClosed:
        return write +
               ", whose exposure is over (the operation that exposed that buffer has "
               "ended: a late or replayed write)";
      case RegionCheck::kOutOfRange:
        return strfmt(
            "a write of %llu bytes to 0x%llx outside its region (rkey 0x%x: %llu bytes "
            "at 0x%llx)",
            static_cast<unsigned long long>(length), static_cast<unsigned long long>(remote_addr),
            rkey, static_cast<unsigned long long>(grant.length),
            static_cast<unsigned long long>(grant.addr));
    }
    return "unknown check result";
  }

  // Empty when a lines frame of `length` payload bytes (flag included) at
  // remote_addr is well formed and its lines lie in a live region of rkey.
  std::string refuse_lines(uint32_t rkey, uint64_t remote_addr, uint64_t length) const {
    if (length < 8 || length > kWholeLines || remote_addr % tcp_wire::kLineBytes != 0)
      return strfmt(
          "a malformed lines frame (%llu bytes to 0x%llx: wants 8 to %zu bytes, "
          "64-byte aligned)",
          static_cast<unsigned long long>(length), static_cast<unsigned long long>(remote_addr),
          kWholeLines);
    return refuse_write(rkey, remote_addr, tcp_wire::frame_lines(length) * tcp_wire::kLineBytes);
  }

  // --- failure -------------------------------------------------------

  // A frame from peer that we will not apply: the stream cannot be trusted
  // any more, so we stop reading it, tell the sender, and fail.
  void refuse_frame(int peer, const std::string& why) {
    stop_reading(peer);
    send_abort(peer, why);
    mark_failed(COLL_ERR_TRANSPORT, peer,
                strfmt("rank %d refused a tcp frame from rank %d: %s", rank_, peer, why.c_str()));
  }

  // The peer's stream closed or reset: that peer is lost, no other (see
  // "Lost and leaving peers" at the top).
  void lose_peer(int peer, const std::string& why) {
    mark_lost(peer, COLL_ERR_PEER_LOST,
              strfmt("rank %d lost rank %d over tcp: %s (the peer exited, or closed its "
                     "communicator)",
                     rank_, peer, why.c_str()));
  }

  // Sticky for that peer: its stream is read no more, credits held for it
  // are dropped, a dial to it ends; every later write to it fails at post,
  // and check_peer(peer) throws `message` with `status`. The first cause is
  // kept.
  void mark_lost(int peer, int status, std::string message) {
    Peer& p = peers_[size_t(peer)];
    if (p.lost) return;
    p.lost = true;
    p.lost_status = status;
    p.lost_message = std::move(message);
    stop_reading(peer);
    if (!p.deferred.empty()) {
      p.deferred.clear();
      --deferring_peers_;
    }
    if (lazy_) {
      Dial& d = dials_[size_t(peer)];
      end_dial(d);
      d.fd.reset();
      d.state = Dial::kIdle;
    }
  }

  void stop_reading(int peer) {
    Peer& p = peers_[size_t(peer)];
    if (!p.reading) return;
    p.reading = false;
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
    update_sole_reader();
  }

  void update_sole_reader() {
    int readers = 0;
    for (int q = 0; q < size_; ++q)
      if (peers_[size_t(q)].reading) {
        ++readers;
        sole_reader_ = q;
      }
    if (readers != 1) sole_reader_ = -1;
  }

  void mark_failed(int status, int peer, std::string message) {
    if (failed_) return;  // the first failure is the cause; keep it
    failed_ = true;
    failure_status_ = status;
    failure_peer_ = peer;
    failure_message_ = std::move(message);
  }

  int rank_;
  int size_;
  double timeout_s_;
  std::unique_ptr<RegionEntry[]> own_entries_;  // tcp alone: the table's storage
  std::unique_ptr<RegionTable> table_;          // tcp alone; null in shm+tcp
  const RegionEntry* regions_ = nullptr;        // what incoming writes are checked against
  AnonymousWindows windows_{"tcp"};             // tcp alone; unused in shm+tcp
  Address published_{};
  std::string secret_;  // the job's (Bootstrap::secret): what the handshake proves
  UniqueFd epoll_;
  std::vector<Peer> peers_;
  uint64_t network_bytes_ = 0;  // payload of write and lines frames sent (network_bytes)
  size_t deferring_peers_ = 0;  // peers holding credits (Peer::deferred)
  int sole_reader_ = -1;        // the only peer being read, or -1 (none, or several: epoll)
  bool lazy_ = false;           // COLL_TCP_CONNECT: connections on first use
  int reachable_ = 0;           // peers this transport serves
  int noticed_ = 0;             // ... that had this rank's `left` notice
  // Lazy: the listener (open until every peer had the notice), every
  // peer's address and dial, and the strangers on the listener.
  UniqueFd listener_;
  std::vector<Address> addresses_;
  std::vector<Dial> dials_;
  int active_dials_ = 0;
  std::deque<Stranger> strangers_;
  uint32_t next_stranger_ = 0;
  Ignored ignored_;
  unsigned passes_ = 0;  // of the sole-reader path (kListenerEvery)
  std::deque<Completion> completions_;
  bool failed_ = false;
  int failure_status_ = 0;
  int failure_peer_ = -1;
  std::string failure_message_;
};

}  // namespace

namespace tcp_wire {
namespace {

// What both proofs of a handshake are over: who speaks to whom in which
// job, and both nonces (job_secret::prove adds the label and the nonce
// answered).
std::string handshake_statement(const Hello& hello, const Challenge& challenge) {
  std::string s;
  for (uint32_t v : {hello.rank, hello.target, hello.size})
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
  s.append(reinterpret_cast<const char*>(challenge.nonce), sizeof challenge.nonce);
  s.append(reinterpret_cast<const char*>(hello.nonce), sizeof hello.nonce);
  return s;
}

std::string_view bytes_of(const uint8_t* p, size_t n) {
  return {reinterpret_cast<const char*>(p), n};
}

}  // namespace

std::array<uint8_t, kProofBytes> hello_proof(std::string_view secret, const Hello& hello,
                                             const Challenge& challenge) {
  return job_secret::prove(secret, kHelloLabel, bytes_of(challenge.nonce, kNonceBytes),
                           handshake_statement(hello, challenge));
}

std::array<uint8_t, kProofBytes> welcome_proof(std::string_view secret, const Hello& hello,
                                               const Challenge& challenge) {
  return job_secret::prove(secret, kWelcomeLabel, bytes_of(hello.nonce, kNonceBytes),
                           handshake_statement(hello, challenge));
}

}  // namespace tcp_wire

std::unique_ptr<Transport> make_tcp_transport(Bootstrap& boot, const TransportOptions& opts) {
  return std::make_unique<TcpTransport>(boot, opts, std::vector<bool>(), nullptr);
}

std::unique_ptr<Transport> make_tcp_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<bool>& reach,
                                                   const RegionEntry* regions) {
  if (reach.size() != size_t(boot.size()) || regions == nullptr)
    fail(COLL_ERR_INTERNAL, "tcp part: %zu reach flags for %d ranks", reach.size(), boot.size());
  return std::make_unique<TcpTransport>(boot, opts, reach, regions);
}

}  // namespace coll
