// RdmaTransport: the Transport contract on librdmacm + libibverbs.
//
// Queue pairs are made on first use (issue 14): a ring writes to two
// peers, a tree or recursive doubling to O(log n), and a full mesh of RC
// QPs is what fails first at scale (at 7,200 ranks QP creation fails
// outright: openucx/ucx#3097; NCCL connects on first use since 2.22).
//
// Setup (every wait bounded by TransportOptions::timeout_s):
//  1. pick this rank's address (see the knobs below), rdma_getaddrinfo +
//     rdma_create_ep(RAI_PASSIVE) + rdma_listen on an ephemeral port;
//  2. trade "address port" with every rank through Bootstrap::allgather,
//     and a barrier: from then on every rank listens.
//
// Connections are one-way: a rank's writes to p go on the QP it dialed to p
// (rdma_create_ep resolves address and route and creates the QP;
// rdma_connect), and p's writes to it arrive on the QP p dialed; the side
// that accepts (rdma_get_request, rdma_create_qp, rdma_accept) never posts
// on its QP. The ordering promise is per writer and target, so one QP per
// direction keeps it, and two ranks that dial each other at once are not a
// race to settle. A pair in use both ways (data one way, credits back)
// holds two QPs: still O(peers used), not O(n).
//
// The first write to a peer dials it and waits (bounded) until the peer
// has accepted, meanwhile accepting and finishing other handshakes, so two
// ranks dialing each other, or a cycle of them, cannot deadlock. The peer
// accepts from its progress calls: check_peer (every wait loop, every
// 10 ms) and one poll in 256. A peer outside the library accepts only when
// it is back, as a peer outside the library does not read a tcp socket.
// All channel fds are non-blocking: no rank ever blocks inside librdmacm.
// The dialing rank's number travels as CM private data.
//
// Lost and leaving peers. A QP whose connection ends (DISCONNECTED) is a
// lost peer, as before. A peer this rank has no QP with, either way, can be
// known dead only by asking: a check_peer on it (a wait for it that lasted
// 10 ms) dials it in the background - the QP this rank's write would make
// anyway - and a refused connection (the process, and its listener, gone)
// is a lost peer. A rank that finalizes posts its `left` notice to every
// peer with kWriteLeaving (Channel::quiesce): where this rank has no QP the
// notice is dropped, not dialed - dialing would be the full mesh again at
// finalize, and a dial to a peer already in its final bootstrap barrier,
// which accepts nothing there, would wait for its timeout. Its credits go
// on the QPs that carried the traffic they answer. (Unlike tcp, the
// listener stays open to the end: destroying the last rdma_cm id on a
// device may close the device under the PD. So a rank that waits for the
// first message of a rank that finalized, an erroneous program, waits for
// COLL_TIMEOUT instead of being refused.)
//
// librdmacm ids made by rdma_create_ep / rdma_get_request are "synchronous":
// each has a private event channel and the library's calls wait on it. Making
// those fds O_NONBLOCK turns the waits inside rdma_connect/rdma_accept into
// EAGAIN, and the events are then read here with rdma_get_cm_event. Every
// event read is acked (rdma_ack_cm_event), or rdma_destroy_id would wait
// forever for it.
//
// Knobs (environment):
//  COLL_RDMA_ADDR=a[,b...]   IP address(es) of RDMA devices to use; rank r
//                            takes entry r % count. E.g. in the Soft-RoCE VM
//                            "192.0.2.1,192.0.2.2": even ranks on rxe0, odd on
//                            rxe1.
//  COLL_RDMA_DEVICE=d[,e...] device name(s) (ibv_devices); rank r takes entry
//                            r % count and the first IPv4 address of it.
//  (neither)                 the RDMA-capable IPv4 addresses (interfaces in
//                            getifaddrs order, loopback skipped, whose address
//                            rdma_bind_addr accepts): with one device, its
//                            first address; with several, the device hwloc
//                            places nearest the rank's CPUs (ties spread by
//                            rank: rails), rdma_device_choice.hpp; where
//                            hwloc places none (software devices such as
//                            rxe), the first address.
//  COLL_RDMA_SAFE_ORDERING=1 every write is signaled, and an 8-byte write (a
//                            flag or credit) is posted only after all earlier
//                            writes to that peer have completed. For devices
//                            or fabrics that do not place RC writes in order.
//  COLL_RDMA_SQ_DEPTH=n      send queue depth per peer (default 256).
//
// Windows registered in part (issue 14). A registration pins every page,
// so a window (alloc_window(bytes, eager_bytes)) is registered at reg_write
// only for its first eager_bytes, the headers every writer touches; each
// writer's slot area is registered when that writer first needs it
// (prepare_write, from Channel::commit_slot), never at the owner's first
// recv (a ring, where every rank sends first, would deadlock) nor at QP
// connect (windows made later would be missed). The writer asks through
// the owner's control block, a small registered array with an entry per
// peer whose {addr, rkey} travels in the setup exchange (the transport
// cannot use the window's headers: their layout is the Channel's):
//   writer: its request {area, window rkey} into its entry at the owner,
//           then the request's sequence number, then the owner's doorbell
//           (three writes on its QP, so each lands after the one before);
//   owner:  in its progress calls (every poll reads the doorbell: one load)
//           registers the area (one MR per window and writer, the unit the
//           Channel names) and writes back sequence and rkey as one 8-byte
//           word into its entry at the writer, dialing the writer if need be;
//   writer: waits for that word (bounded, serving requests to itself and
//           accepting connections meanwhile: two ranks may ask each other at
//           once), then writes into the area under the new rkey: post_write
//           swaps the window's rkey for it on writes that land in the area
//           (Peer::areas), so the Channel keeps one rkey per window.
// A registration that fails (RLIMIT_MEMLOCK) fails the owner's transport
// with COLL_ERR_NO_RESOURCES and the memlock hint, and the answer says so to
// the writer, whose prepare_write fails with ENOMEM. dereg of the window
// deregisters its areas too; forget_window drops the writer's rkeys.
//
// Ordering (the contract's promise): on one RC QP, RDMA writes are placed in
// the responder's memory in the order they were posted (InfiniBand spec, RC
// ordering rules; RoCE and rxe keep them), so a flag written after its data
// on the same QP is placed after that data. COLL_RDMA_SAFE_ORDERING=1 gives
// the stronger, slower guarantee above.
//
// Not thread-safe: one thread drives a communicator's transport.
#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "env.hpp"
#include "error.hpp"
#include "regcache.hpp"  // describe_memlock_limit
#include "transport/anonymous_windows.hpp"
#include "transport/rdma_device_choice.hpp"
#include "transport/rdma_transport.hpp"
#include "transport/transport.hpp"

namespace coll {
namespace {

// ---------------------------------------------------------------- RAII owners

// A unique_ptr whose deleter is the library's release call.
template <auto Release>
struct Releaser {
  template <class T>
  void operator()(T* p) const {
    Release(p);
  }
};
template <class T, auto Release>
using Owned = std::unique_ptr<T, Releaser<Release>>;

using AddrInfoPtr = Owned<rdma_addrinfo, rdma_freeaddrinfo>;
// rdma_destroy_ep destroys the id's QP (rdma_destroy_qp) and then the id.
using EndpointPtr = Owned<rdma_cm_id, rdma_destroy_ep>;
// A bare id (no QP), for probing addresses.
using CmIdPtr = Owned<rdma_cm_id, rdma_destroy_id>;
using CmEventPtr = Owned<rdma_cm_event, rdma_ack_cm_event>;
using PdPtr = Owned<ibv_pd, ibv_dealloc_pd>;
using CqPtr = Owned<ibv_cq, ibv_destroy_cq>;
using MrPtr = Owned<ibv_mr, rdma_dereg_mr>;

// A writer's slot area of a window, registered on that writer's request.
struct SlotArea {
  uint64_t addr = 0;
  size_t length = 0;
  MrPtr mr;
};

// What reg_write hands out: the contract's view plus the verbs MR behind it.
// A window registered in part ("Windows registered in part" above) spans
// the whole window in the contract's view (addr, length, rkey: what the
// Channel trades) while mr covers only its first `registered` bytes, the
// headers; `areas` are the writers' slot areas registered since.
struct RdmaMemoryRegion : MemoryRegion {
  MrPtr mr;
  size_t registered = 0;
  std::vector<SlotArea> areas;
};

// ---------------------------------------------------------------- knobs

bool env_flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0;
}

uint32_t env_uint(const char* name, uint32_t fallback, uint32_t min, uint32_t max) {
  const char* value = std::getenv(name);
  if (value == nullptr || value[0] == '\0') return fallback;
  char* end = nullptr;
  errno = 0;
  unsigned long parsed = std::strtoul(value, &end, 10);
  // Digits only: strtoul takes a sign ("-1" is ULONG_MAX) and blanks.
  if (value[0] < '0' || value[0] > '9' || errno || *end != '\0' || parsed < min || parsed > max) {
    fail(COLL_ERR_INVALID_ARG, "%s=%s: expected a number from %u to %u", name, value, min, max);
  }
  return static_cast<uint32_t>(parsed);
}

// ---------------------------------------------------------------- addresses

struct LocalAddress {
  std::string ip;
  std::string device;  // ibv device name
};

// IPv4 addresses that an RDMA device serves: rdma_bind_addr succeeds only for
// an address whose netdev has an RDMA device (RoCE, iWARP, IPoIB).
std::vector<LocalAddress> rdma_capable_ipv4_addresses() {
  std::vector<LocalAddress> found;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return found;
  Owned<ifaddrs, freeifaddrs> owner(list);
  for (ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || entry->ifa_addr->sa_family != AF_INET) continue;
    if ((entry->ifa_flags & IFF_UP) == 0 || (entry->ifa_flags & IFF_LOOPBACK) != 0) continue;
    rdma_cm_id* raw = nullptr;
    if (rdma_create_id(nullptr, &raw, nullptr, RDMA_PS_TCP) != 0) break;  // no RDMA at all
    CmIdPtr probe(raw);
    if (rdma_bind_addr(probe.get(), entry->ifa_addr) != 0 || probe->verbs == nullptr) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(entry->ifa_addr)->sin_addr, text,
              sizeof text);
    found.push_back({text, ibv_get_device_name(probe->verbs->device)});
  }
  return found;
}

std::string describe(const std::vector<LocalAddress>& addresses) {
  if (addresses.empty()) return "none";
  std::string text;
  for (const LocalAddress& a : addresses) {
    if (!text.empty()) text += ", ";
    text += a.ip + " (" + a.device + ")";
  }
  return text;
}

std::string choose_local_address(int rank) {
  std::vector<std::string> addresses = env_list("COLL_RDMA_ADDR");
  if (!addresses.empty()) return addresses[static_cast<size_t>(rank) % addresses.size()];

  std::vector<LocalAddress> capable = rdma_capable_ipv4_addresses();
  std::vector<std::string> devices = env_list("COLL_RDMA_DEVICE");
  if (!devices.empty()) {
    const std::string& wanted = devices[static_cast<size_t>(rank) % devices.size()];
    for (const LocalAddress& a : capable) {
      if (a.device == wanted) return a.ip;
    }
    fail(COLL_ERR_TRANSPORT,
         "RDMA transport: COLL_RDMA_DEVICE names %s, which has no usable IPv4 address "
         "(RDMA-capable addresses: %s)",
         wanted.c_str(), describe(capable).c_str());
  }
  if (capable.empty()) {
    fail(COLL_ERR_TRANSPORT,
         "RDMA transport: no RDMA-capable IPv4 address on this host (is an RDMA device "
         "present and its interface up with an address? `ibv_devices`, `rdma link`); set "
         "COLL_RDMA_ADDR to choose one, or use another transport (COLL_TRANSPORT)");
  }
  // Several devices: the one nearest this rank's CPUs (hwloc), so that a
  // rank on the second package does not cross the inter-socket link on
  // every write; where hwloc places none of them, the first, as before.
  std::vector<DeviceLocality> located;
  for (const LocalAddress& a : capable) {
    bool seen = false;
    for (const DeviceLocality& d : located) seen = seen || d.device == a.device;
    if (!seen) located.push_back({a.device, false, {}});
  }
  if (located.size() == 1) return capable.front().ip;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0) return capable.front().ip;
  locate_devices(&located);
  const std::string& chosen = located[choose_nearest_device(located, mine, rank)].device;
  for (const LocalAddress& a : capable)
    if (a.device == chosen) return a.ip;
  return capable.front().ip;
}

// ---------------------------------------------------------------- helpers

using Clock = std::chrono::steady_clock;

Clock::time_point deadline_after(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

void set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    fail_errno(COLL_ERR_TRANSPORT, errno,
               "RDMA transport: cannot make an rdma_cm channel non-blocking");
  }
}

// A failure that may be the locked-memory limit gets the hint.
[[noreturn]] void fail_verbs(int err, const std::string& what) {
  if (err == ENOMEM) {
    fail(COLL_ERR_NO_RESOURCES, "RDMA transport: %s failed: %s; %s", what.c_str(),
         std::strerror(err), describe_memlock_limit().c_str());
  }
  fail(COLL_ERR_TRANSPORT, "RDMA transport: %s failed: %s", what.c_str(), std::strerror(err));
}

// The connecting rank introduces itself in the CM private data.
struct Hello {
  uint32_t magic;
  int32_t rank;
  int32_t size;
  uint32_t reserved;
};
constexpr uint32_t kHelloMagic = 0x636f6c31;  // "col1"
constexpr const char* kBlobTag = "coll-rdma-2";

// ---------------------------------------------------------------- control block

// A writer's request that the owner register its slot area of a window
// ("Windows registered in part"), as it travels: the fields, then the
// sequence number in a write of its own, so that the owner never reads a
// sequence ahead of its fields.
struct AreaRequest {
  uint64_t addr;
  uint64_t length;
  uint64_t window_rkey;
  uint64_t sequence;
};

// Entry q of a rank's control block. A rank never asks itself, so its own
// entry holds its doorbell (request.sequence: set by a writer after its
// request) and the 1 its own doorbell writes come from (out_answer).
struct ControlEntry {
  AreaRequest request;      // q's request to this rank (q writes it)
  uint64_t answer;          // q's answer to this rank's request (q writes it)
  AreaRequest out_request;  // this rank's request to q: the source of its writes
  uint64_t out_answer;      // this rank's answer to q: the source of its write
  uint64_t reserved;
};

// An answer is one 8-byte word, so that it lands whole (the contract's
// atomic 8-byte write): the request's sequence (low 24 bits), a status,
// the rkey.
enum AnswerStatus : uint64_t { kAreaRegistered = 0, kAreaNoMemory = 1, kAreaRefused = 2 };
constexpr uint64_t kAnswerSequenceMask = (uint64_t(1) << 24) - 1;

uint64_t encode_answer(uint64_t sequence, AnswerStatus status, uint32_t rkey) {
  return (sequence & kAnswerSequenceMask) << 40 | uint64_t(status) << 32 | rkey;
}
uint64_t answer_sequence(uint64_t answer) { return answer >> 40; }
AnswerStatus answer_status(uint64_t answer) { return AnswerStatus((answer >> 32) & 0xff); }
uint32_t answer_rkey(uint64_t answer) { return static_cast<uint32_t>(answer); }
constexpr uint32_t kRequestedInline = 64;

// ---------------------------------------------------------------- transport

class RdmaTransport final : public RdmaPart {
 public:
  // reach: the peers to connect (empty: every rank); writes to the others
  // fail with EINVAL and check_peer ignores them (shm+rdma's other half
  // carries them).
  RdmaTransport(Bootstrap& boot, const TransportOptions& opts, std::vector<bool> reach);
  ~RdmaTransport() override;

  const char* name() const override { return "rdma"; }

  std::string describe() const override {
    return strfmt("rdma on %s (%s)", ibv_get_device_name(listen_id_->verbs->device),
                  local_ip_.c_str());
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void* alloc_window(size_t bytes, size_t eager_bytes) override;
  void free_window(void* addr, size_t bytes) override;
  void register_in_part(void* addr, size_t bytes, size_t eager_bytes) override;
  void window_freed(void* addr) override { in_part_.erase(addr); }

  MemoryRegion* reg_write(void* addr, size_t length) override;
  int dereg(MemoryRegion* mr) override;
  int post_write(int peer, uint64_t context, const void* local_addr, size_t length,
                 MemoryRegion* mr, int flags, uint64_t remote_addr, uint32_t rkey) override;
  int prepare_write(int peer, uint64_t remote_addr, size_t length, uint32_t rkey,
                    uint64_t area_addr, size_t area_length) override;
  void forget_window(int peer, uint32_t rkey) override;
  uint64_t internal_registrations() const override;
  uint64_t pinned_bytes() const override;
  int poll(Completion* out, int max) override;
  bool needs_local_registration() const override { return true; }
  bool direct_writes_like_window() const override { return true; }  // an RDMA write either way
  void check_peer(int peer) override;
  uint64_t network_bytes() const override { return network_bytes_; }
  int connections() const override {
    int n = 0;
    for (const Peer& p : peers_)
      n += p.state == State::kEstablished || p.in_state == State::kEstablished;
    return n;
  }

 private:
  enum class State { kNone, kConnecting, kAccepting, kEstablished };

  // This rank's slot area in a peer's window, and the rkey the peer
  // registered it under (prepare_write).
  struct AreaKey {
    uint32_t window_rkey;
    uint64_t begin, end;
    uint32_t rkey;
  };

  // A signaled work request, in posting order on its QP.
  struct SignaledWrite {
    uint64_t sequence;  // its number among all WRs posted to the peer
    bool for_user;      // the caller asked for its completion
  };

  struct Peer {
    std::string ip, port;  // where it listens
    EndpointPtr id;        // the QP this rank dialed: its writes to the peer
    State state = State::kNone;
    EndpointPtr in_id;     // the QP the peer dialed: never posted on
    State in_state = State::kNone;
    // Work-request accounting. On an RC send queue, completions arrive in
    // posting order, and an unsignaled WR's slot is freed only when a later
    // signaled WR completes: `completed` is the sequence number of the last
    // signaled WR seen completing, so posted - completed WRs hold SQ slots.
    uint64_t posted = 0;
    uint64_t completed = 0;
    uint64_t last_signaled = 0;
    std::deque<SignaledWrite> signaled;
    bool lost = false;
    std::string lost_reason;
    RemoteRegion control;          // its control block
    std::vector<AreaKey> areas;    // this rank's slot areas in its windows
    uint64_t requests_sent = 0;    // area requests this rank made to it
    uint64_t requests_served = 0;  // the sequence of its last request answered here
  };

  // Setup.
  void listen_on(const std::string& ip);
  void create_verbs_resources();
  ibv_qp_init_attr qp_attributes() const;
  void note_qp(int peer, const ibv_qp_init_attr& created);
  void start_connect(int peer);
  void accept_pending_requests();
  void read_events(int peer, bool incoming);
  // Accepts, and drives the handshakes under way; a failure there fails
  // the transport (sticky), never throws.
  void progress_connections();
  // Dials peer if need be and waits (bounded) until its QP is up: false
  // (errno set, the transport failed) when it cannot be.
  bool ensure_connected(int peer);

  // Windows registered in part (the header's section).
  void create_control_block();
  ControlEntry& entry(int peer) { return control_[static_cast<size_t>(peer)]; }
  uint64_t& doorbell() { return entry(rank_).request.sequence; }
  // Where entry `of` lies in peer's control block.
  uint64_t remote_entry(int peer, int of) const {
    return peers_[static_cast<size_t>(peer)].control.addr +
           static_cast<uint64_t>(of) * sizeof(ControlEntry);
  }
  // ibv_reg_mr with the contract's access; throws (NO_RESOURCES for ENOMEM,
  // with the memlock hint).
  MrPtr pin(void* addr, size_t length, const char* what);
  int request_area(int peer, uint64_t area_addr, size_t area_length, uint32_t window_rkey);
  int post_area_request(int peer);
  int wait_for_answer(int peer, uint64_t sequence, uint64_t* answer);
  void serve_area_requests();
  void answer_area_request(int writer);
  RdmaMemoryRegion* window_holding(const AreaRequest& request);
  // The slot area in p's window (rkey) that a write of length bytes at
  // remote_addr lands in, if any; the rkey to write it with.
  static const AreaKey* find_area(const Peer& p, uint64_t remote_addr, size_t length,
                                  uint32_t rkey);
  uint32_t area_rkey(const Peer& p, uint64_t remote_addr, size_t length, uint32_t rkey) const;

  // Data path.
  void drain_completions();
  bool wait_until_completed(Peer& peer, uint64_t sequence, const char* why);
  int write_to_self(uint64_t context, const void* local_addr, size_t length, int flags,
                    uint64_t remote_addr, uint32_t rkey);
  void mark_failed(int status, int peer, std::string message);
  bool reaches(int peer) const { return reach_.empty() || reach_[static_cast<size_t>(peer)]; }

  int rank_;
  int size_;
  std::vector<bool> reach_;
  double timeout_s_;
  bool safe_ordering_;
  uint32_t sq_depth_;                       // lowered to what the device allows
  uint32_t signal_interval_;                // sq_depth_ / 2: see post_write
  uint32_t max_inline_ = kRequestedInline;  // lowered to what the QPs grant
  std::string local_ip_;

  // Destroyed in reverse order, after the destructor body has deregistered
  // every MR and disconnected every peer: QPs (peers_) before the CQ they
  // post to and the PD they belong to; the window memory last.
  AnonymousWindows windows_{"RDMA"};
  // The windows registered in part, by base address: their bytes and the
  // bytes registered at reg_write (eager_bytes), both page rounded.
  struct InPart {
    size_t bytes, eager;
  };
  std::unordered_map<const void*, InPart> in_part_;
  std::vector<ControlEntry> control_;  // an entry per rank (the header's section)
  EndpointPtr listen_id_;
  PdPtr pd_;
  std::unique_ptr<RdmaMemoryRegion> control_mr_;
  CqPtr cq_;
  std::vector<Peer> peers_;
  std::vector<int> handshaking_;  // peers with a handshake under way (either side)
  uint32_t polls_ = 0;            // poll() calls: one in 256 accepts
  uint64_t network_bytes_ = 0;  // bytes of the writes posted to peers (network_bytes)
  std::unordered_map<uint32_t, int> peer_of_qp_;
  std::unordered_map<const MemoryRegion*, std::unique_ptr<RdmaMemoryRegion>> regions_;

  std::deque<Completion> ready_;  // completions read from the CQ, not yet handed out
  bool failed_ = false;
  int failure_status_ = 0;
  int failure_peer_ = -1;
  std::string failure_message_;
};

RdmaTransport::RdmaTransport(Bootstrap& boot, const TransportOptions& opts,
                             std::vector<bool> reach)
    : rank_(boot.rank()),
      size_(boot.size()),
      reach_(std::move(reach)),
      timeout_s_(opts.timeout_s),
      safe_ordering_(env_flag("COLL_RDMA_SAFE_ORDERING")),
      sq_depth_(env_uint("COLL_RDMA_SQ_DEPTH", 256, 4, 32768)),
      peers_(static_cast<size_t>(boot.size())) {
  const Clock::time_point deadline = deadline_after(opts.timeout_s);
  local_ip_ = choose_local_address(rank_);
  listen_on(local_ip_);
  create_verbs_resources();
  create_control_block();

  std::string port = std::to_string(ntohs(rdma_get_src_port(listen_id_.get())));
  std::vector<std::string> blobs = boot.allgather(
      strfmt("%s %s %s %llu %u", kBlobTag, local_ip_.c_str(), port.c_str(),
             static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(control_.data())),
             control_mr_->rkey),
      opts.timeout_s);
  if (blobs.size() != static_cast<size_t>(size_)) {
    fail(COLL_ERR_INTERNAL, "RDMA transport: bootstrap returned %zu addresses for %d ranks",
         blobs.size(), size_);
  }
  for (int peer = 0; peer < size_; ++peer) {
    std::istringstream fields(blobs[static_cast<size_t>(peer)]);
    std::string tag;
    Peer& p = peers_[static_cast<size_t>(peer)];
    fields >> tag >> p.ip >> p.port >> p.control.addr >> p.control.rkey;
    if (tag != kBlobTag || p.ip.empty() || p.port.empty() || !fields) {
      fail(COLL_ERR_INTERNAL, "RDMA transport: rank %d published '%s', not an RDMA address", peer,
           blobs[static_cast<size_t>(peer)].c_str());
    }
  }
  // Nobody leaves setup before every rank listens: a rank whose setup
  // failed is noticed here, not in the first collective.
  boot.barrier(std::max(1.0, seconds_left(deadline)));
}

RdmaTransport::~RdmaTransport() {
  // rdma_dereg_mr(3): deregister all memory registered on the id's PD before
  // the ids and the PD are destroyed.
  regions_.clear();
  control_mr_.reset();
  for (Peer& peer : peers_) {
    // With the channel non-blocking, rdma_disconnect does not wait for the
    // DISCONNECTED event (EAGAIN instead): teardown cannot hang on a peer.
    if (peer.id && peer.state == State::kEstablished) rdma_disconnect(peer.id.get());
    if (peer.in_id && peer.in_state == State::kEstablished) rdma_disconnect(peer.in_id.get());
  }
  peers_.clear();  // QPs and ids
  cq_.reset();
  listen_id_.reset();
  pd_.reset();
  // windows_ goes with the members.
}

void RdmaTransport::listen_on(const std::string& ip) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_qp_type = IBV_QPT_RC;
  rdma_addrinfo* raw_info = nullptr;
  if (rdma_getaddrinfo(ip.c_str(), "0", &hints, &raw_info) != 0) {
    fail_errno(COLL_ERR_TRANSPORT, errno,
               "RDMA transport: rdma_getaddrinfo(%s) failed (COLL_RDMA_ADDR?)", ip.c_str());
  }
  AddrInfoPtr info(raw_info);
  rdma_cm_id* raw_id = nullptr;
  if (rdma_create_ep(&raw_id, info.get(), nullptr, nullptr) != 0) {
    fail_errno(COLL_ERR_TRANSPORT, errno,
               "RDMA transport: cannot bind to %s (rdma_create_ep): is it the address of an "
               "RDMA device? (`rdma link`, COLL_RDMA_ADDR)",
               ip.c_str());
  }
  listen_id_.reset(raw_id);
  if (listen_id_->verbs == nullptr) {
    fail(COLL_ERR_TRANSPORT, "RDMA transport: %s is not served by an RDMA device", ip.c_str());
  }
  if (rdma_listen(listen_id_.get(), std::max(size_, 8)) != 0) {
    fail_errno(COLL_ERR_TRANSPORT, errno, "RDMA transport: rdma_listen on %s failed", ip.c_str());
  }
  set_nonblocking(listen_id_->channel->fd);

  // Publish the address as bound (numeric, whatever COLL_RDMA_ADDR said).
  sockaddr* bound = rdma_get_local_addr(listen_id_.get());
  char text[INET6_ADDRSTRLEN] = {};
  const void* raw_address =
      (bound->sa_family == AF_INET6)
          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(bound)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(bound)->sin_addr);
  if (inet_ntop(bound->sa_family, raw_address, text, sizeof text) == nullptr) {
    fail(COLL_ERR_TRANSPORT, "RDMA transport: %s is not an IP address", ip.c_str());
  }
  local_ip_ = text;
}

void RdmaTransport::create_verbs_resources() {
  ibv_context* verbs = listen_id_->verbs;
  // One PD for every QP and MR of this transport: then one registration
  // (one rkey) serves every peer.
  pd_.reset(ibv_alloc_pd(verbs));
  if (!pd_) fail_verbs(errno, "ibv_alloc_pd");

  ibv_device_attr device{};
  if (ibv_query_device(verbs, &device) != 0) fail_verbs(errno, "ibv_query_device");
  size_t peers = static_cast<size_t>(std::max(size_ - 1, 1));
  // One CQ for all send queues. It must hold every completion that can be
  // outstanding: a flushed QP reports all of its sq_depth WRs.
  if (device.max_cqe > 0 && peers * sq_depth_ + 16 > static_cast<size_t>(device.max_cqe)) {
    sq_depth_ = static_cast<uint32_t>(
        std::max<size_t>(4, (static_cast<size_t>(device.max_cqe) - 16) / peers));
  }
  if (device.max_qp_wr > 0 && sq_depth_ > static_cast<uint32_t>(device.max_qp_wr))
    sq_depth_ = static_cast<uint32_t>(device.max_qp_wr);
  signal_interval_ = std::max<uint32_t>(1, sq_depth_ / 2);
  int cqe = static_cast<int>(peers * sq_depth_ + 16);
  cq_.reset(ibv_create_cq(verbs, cqe, nullptr, nullptr, 0));
  if (!cq_) fail_verbs(errno, strfmt("ibv_create_cq(%d entries)", cqe));
}

ibv_qp_init_attr RdmaTransport::qp_attributes() const {
  ibv_qp_init_attr attr{};
  attr.send_cq = cq_.get();
  attr.recv_cq = cq_.get();  // nothing is ever received: writes only
  attr.qp_type = IBV_QPT_RC;
  attr.sq_sig_all = 0;
  attr.cap.max_send_wr = sq_depth_;
  attr.cap.max_recv_wr = 1;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  attr.cap.max_inline_data = kRequestedInline;  // flags and credits (8 bytes) go inline
  return attr;
}

void RdmaTransport::note_qp(int peer, const ibv_qp_init_attr& created) {
  // The provider reports what it granted; keep the smallest over the QPs
  // this rank posts on.
  max_inline_ = std::min(max_inline_, created.cap.max_inline_data);
  peer_of_qp_[peers_[static_cast<size_t>(peer)].id->qp->qp_num] = peer;
}

void RdmaTransport::start_connect(int peer) {
  const std::string& ip = peers_[static_cast<size_t>(peer)].ip;
  const std::string& port = peers_[static_cast<size_t>(peer)].port;
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_NUMERICHOST;
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_qp_type = IBV_QPT_RC;
  // Leave from this rank's own device: the listening address, any port.
  sockaddr_storage source{};
  sockaddr* bound = rdma_get_local_addr(listen_id_.get());
  socklen_t source_len =
      (bound->sa_family == AF_INET6) ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::memcpy(&source, bound, source_len);
  if (source.ss_family == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&source)->sin6_port = 0;
  } else {
    reinterpret_cast<sockaddr_in*>(&source)->sin_port = 0;
  }
  hints.ai_family = source.ss_family;
  hints.ai_src_addr = reinterpret_cast<sockaddr*>(&source);
  hints.ai_src_len = source_len;
  rdma_addrinfo* raw_info = nullptr;
  if (rdma_getaddrinfo(ip.c_str(), port.c_str(), &hints, &raw_info) != 0) {
    fail(COLL_ERR_TRANSPORT,
         "RDMA transport: rank %d published address %s port %s, which "
         "rdma_getaddrinfo does not accept",
         peer, ip.c_str(), port.c_str());
  }
  AddrInfoPtr info(raw_info);
  // Resolves address and route (each bounded by librdmacm at 2 s) and
  // creates the QP on our PD and CQ.
  ibv_qp_init_attr attr = qp_attributes();
  rdma_cm_id* raw_id = nullptr;
  if (rdma_create_ep(&raw_id, info.get(), pd_.get(), &attr) != 0) {
    int err = errno;
    if (err == ENOMEM) fail_verbs(err, strfmt("creating the queue pair to rank %d", peer));
    fail_errno(COLL_ERR_TRANSPORT, err,
               "RDMA transport: rank %d cannot reach rank %d at %s:%s from %s (rdma_create_ep)",
               rank_, peer, ip.c_str(), port.c_str(), local_ip_.c_str());
  }
  Peer& p = peers_[static_cast<size_t>(peer)];
  p.id.reset(raw_id);
  note_qp(peer, attr);
  set_nonblocking(p.id->channel->fd);

  Hello hello{kHelloMagic, rank_, size_, 0};
  rdma_conn_param param{};
  param.private_data = &hello;
  param.private_data_len = sizeof hello;
  param.responder_resources = 0;  // writes only: no RDMA reads or atomics
  param.initiator_depth = 0;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  if (rdma_connect(p.id.get(), &param) == 0) {
    p.state = State::kEstablished;  // the event was already there
  } else if (errno == EAGAIN) {
    p.state = State::kConnecting;
    handshaking_.push_back(peer);
  } else if (errno == ECONNREFUSED) {
    // Nothing listens there any more: the rank's process is gone.
    fail(COLL_ERR_PEER_LOST,
         "RDMA transport: rank %d could not connect to rank %d at %s:%s: refused, the rank has "
         "left (finalized or failed)",
         rank_, peer, ip.c_str(), port.c_str());
  } else {
    fail_errno(COLL_ERR_TRANSPORT, errno,
               "RDMA transport: rdma_connect from rank %d to rank %d failed", rank_, peer);
  }
}

void RdmaTransport::accept_pending_requests() {
  for (;;) {
    rdma_cm_id* raw_id = nullptr;
    if (rdma_get_request(listen_id_.get(), &raw_id) != 0) {
      if (errno == EAGAIN) return;
      fail_errno(COLL_ERR_TRANSPORT, errno, "RDMA transport: rank %d: rdma_get_request failed",
                 rank_);
    }
    EndpointPtr id(raw_id);  // owns the request until accepted
    Hello hello{};
    const rdma_conn_param& conn = id->event->param.conn;
    if (conn.private_data != nullptr && conn.private_data_len >= sizeof hello) {
      std::memcpy(&hello, conn.private_data, sizeof hello);
    }
    int from = hello.rank;
    if (hello.magic != kHelloMagic || hello.size != size_ || from < 0 || from >= size_ ||
        from == rank_ || !reaches(from) ||
        peers_[static_cast<size_t>(from)].in_state != State::kNone) {
      // Not a rank of this job that may dial us now: refuse it.
      rdma_reject(id.get(), nullptr, 0);
      continue;
    }
    set_nonblocking(id->channel->fd);
    ibv_qp_init_attr attr = qp_attributes();
    // Never posted on: its send queue only has to exist.
    attr.cap.max_send_wr = 1;
    attr.cap.max_inline_data = 0;
    if (rdma_create_qp(id.get(), pd_.get(), &attr) != 0) {
      fail_verbs(errno, strfmt("creating the queue pair for rank %d", from));
    }
    Peer& p = peers_[static_cast<size_t>(from)];
    p.in_id = std::move(id);
    peer_of_qp_[p.in_id->qp->qp_num] = from;
    rdma_conn_param param{};
    param.responder_resources = 0;
    param.initiator_depth = 0;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    if (rdma_accept(p.in_id.get(), &param) == 0) {
      p.in_state = State::kEstablished;
    } else if (errno == EAGAIN) {
      p.in_state = State::kAccepting;
      handshaking_.push_back(from);
    } else {
      fail_errno(COLL_ERR_TRANSPORT, errno,
                 "RDMA transport: rank %d: rdma_accept of rank %d failed", rank_, from);
    }
  }
}

// The CM events of one of a peer's two ids: the end of a handshake, or the
// end of the connection (either way, the peer is lost then).
void RdmaTransport::read_events(int peer, bool incoming) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  EndpointPtr& id = incoming ? p.in_id : p.id;
  State& state = incoming ? p.in_state : p.state;
  if (!id) return;
  for (;;) {
    rdma_cm_event* raw_event = nullptr;
    if (rdma_get_cm_event(id->channel, &raw_event) != 0) {
      if (errno == EAGAIN) return;  // nothing new
      fail_errno(COLL_ERR_TRANSPORT, errno, "RDMA transport: rdma_get_cm_event failed");
    }
    CmEventPtr event(raw_event);
    switch (event->event) {
      case RDMA_CM_EVENT_ESTABLISHED:
        state = State::kEstablished;
        break;
      case RDMA_CM_EVENT_DISCONNECTED:
      case RDMA_CM_EVENT_DEVICE_REMOVAL:
      case RDMA_CM_EVENT_TIMEWAIT_EXIT:
        p.lost = true;
        p.lost_reason = rdma_event_str(event->event);
        break;
      case RDMA_CM_EVENT_REJECTED:
      case RDMA_CM_EVENT_UNREACHABLE:
      case RDMA_CM_EVENT_CONNECT_ERROR:
      case RDMA_CM_EVENT_ADDR_ERROR:
      case RDMA_CM_EVENT_ROUTE_ERROR:
        if (state == State::kEstablished) break;  // late noise on a live QP
        fail(event->event == RDMA_CM_EVENT_REJECTED ? COLL_ERR_PEER_LOST : COLL_ERR_TRANSPORT,
             "RDMA transport: rank %d could not connect to rank %d at %s:%s: %s (status %d)%s",
             rank_, peer, p.ip.c_str(), p.port.c_str(), rdma_event_str(event->event),
             event->status,
             event->event == RDMA_CM_EVENT_REJECTED
                 ? ": the rank refused it, or has left (finalized or failed)"
                 : "");
      default:
        break;  // ADDR_CHANGE and the like: nothing to do
    }
  }
}

void RdmaTransport::progress_connections() {
  if (failed_) return;
  try {
    accept_pending_requests();
    for (size_t i = 0; i < handshaking_.size();) {
      const int peer = handshaking_[i];
      Peer& p = peers_[static_cast<size_t>(peer)];
      if (p.state == State::kConnecting) read_events(peer, false);
      if (p.in_state == State::kAccepting) read_events(peer, true);
      const bool done = p.state != State::kConnecting && p.in_state != State::kAccepting;
      if (done) {
        handshaking_[i] = handshaking_.back();
        handshaking_.pop_back();
      } else {
        ++i;
      }
    }
  } catch (const Error& e) {
    mark_failed(e.status(), -1, e.what());
  }
}

bool RdmaTransport::ensure_connected(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.state == State::kEstablished) return true;
  if (!failed_ && p.state == State::kNone) {
    try {
      start_connect(peer);
    } catch (const Error& e) {
      mark_failed(e.status(), peer, e.what());
    }
  }
  const Clock::time_point deadline = deadline_after(timeout_s_);
  while (!failed_ && p.state != State::kEstablished) {
    // Sleeps in poll(2) on what can move a handshake on: this rank's
    // listener (a peer dialing it) and the ids under way.
    std::vector<pollfd> fds{{listen_id_->channel->fd, POLLIN, 0}};
    for (int q : handshaking_) {
      const Peer& h = peers_[static_cast<size_t>(q)];
      if (h.state == State::kConnecting) fds.push_back({h.id->channel->fd, POLLIN, 0});
      if (h.in_state == State::kAccepting) fds.push_back({h.in_id->channel->fd, POLLIN, 0});
    }
    const double left = seconds_left(deadline);
    if (left <= 0) {
      mark_failed(COLL_ERR_TIMEOUT, peer,
                  strfmt("RDMA transport: rank %d waited %.0f s for rank %d to accept its "
                         "connection (COLL_TIMEOUT): is that rank inside libcoll?",
                         rank_, timeout_s_, peer));
      break;
    }
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::min(left * 1000 + 1, 100.0))) < 0 &&
        errno != EINTR) {
      mark_failed(COLL_ERR_TRANSPORT, peer,
                  strfmt("RDMA transport: poll during connection setup: %s", std::strerror(errno)));
      break;
    }
    progress_connections();
  }
  if (failed_) {
    errno = (failure_status_ == COLL_ERR_PEER_LOST) ? ENOTCONN : EIO;
    return false;
  }
  return true;
}

MrPtr RdmaTransport::pin(void* addr, size_t length, const char* what) {
  // rdma_reg_write(3) is ibv_reg_mr(id->pd, addr, length,
  // IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) (rdma/rdma_verbs.h).
  // Registered on the PD shared by every QP, with exactly that access, so the
  // one MR serves all peers.
  ibv_mr* mr =
      ibv_reg_mr(pd_.get(), addr, length, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (mr == nullptr) {
    int err = errno;
    if (err == ENOMEM) {
      fail(COLL_ERR_NO_RESOURCES,
           "RDMA transport: rank %d: rdma_reg_write of %s, %zu bytes at %p, failed: %s; %s", rank_,
           what, length, addr, std::strerror(err), describe_memlock_limit().c_str());
    }
    fail_errno(COLL_ERR_TRANSPORT, err,
               "RDMA transport: rank %d: rdma_reg_write of %s, %zu bytes at %p, failed", rank_,
               what, length, addr);
  }
  return MrPtr(mr);
}

// A window registered in part ("Windows registered in part") is pinned
// here for its headers only.
void* RdmaTransport::alloc_window(size_t bytes, size_t eager_bytes) {
  void* addr = windows_.alloc(bytes);
  register_in_part(addr, bytes, eager_bytes);
  return addr;
}

void RdmaTransport::register_in_part(void* addr, size_t bytes, size_t eager_bytes) {
  const size_t eager = AnonymousWindows::page_round(eager_bytes);
  const size_t length = AnonymousWindows::page_round(bytes);
  if (eager > 0 && eager < length) in_part_[addr] = {length, eager};
}

MemoryRegion* RdmaTransport::reg_write(void* addr, size_t length) {
  if (length == 0) fail(COLL_ERR_INVALID_ARG, "RDMA transport: registration of 0 bytes");
  auto window = in_part_.find(addr);
  const size_t registered =
      (window != in_part_.end() && AnonymousWindows::page_round(length) == window->second.bytes)
          ? window->second.eager
          : length;
  auto region = std::make_unique<RdmaMemoryRegion>();
  region->mr = pin(addr, registered, registered < length ? "a window's headers" : "memory");
  region->registered = registered;
  region->addr = addr;
  region->length = length;
  region->lkey = region->mr->lkey;
  region->rkey = region->mr->rkey;
  MemoryRegion* handle = region.get();
  regions_.emplace(handle, std::move(region));
  return handle;
}

int RdmaTransport::dereg(MemoryRegion* mr) {
  auto it = regions_.find(mr);
  if (it == regions_.end()) {
    errno = EINVAL;
    return -1;
  }
  if (rdma_dereg_mr(it->second->mr.get()) != 0) return -1;  // errno set; stays registered
  (void)it->second->mr.release();
  regions_.erase(it);  // its slot areas' MRs go with it (MrPtr: rdma_dereg_mr)
  return 0;
}

// The HCA checks every incoming write against the MR of its rkey: after
// dereg (rdma_dereg_mr) a write with the old rkey is a remote access error
// at its sender and never lands, so the memory may go at once.
void RdmaTransport::free_window(void* addr, size_t bytes) {
  if (!windows_.owns(addr, bytes)) {
    fail(COLL_ERR_INVALID_ARG,
         "RDMA transport: free_window(%p, %zu): not a window that alloc_window handed out (or "
         "freed already)",
         addr, bytes);
  }
  const auto a = reinterpret_cast<uintptr_t>(addr);
  const size_t length = AnonymousWindows::page_round(bytes);
  for (const auto& [handle, region] : regions_) {
    const auto begin = reinterpret_cast<uintptr_t>(region->addr);
    if (begin < a + length && a < begin + region->length) {
      fail(COLL_ERR_INVALID_ARG,
           "RDMA transport: free_window(%p, %zu): the window is still registered (rkey 0x%x: "
           "%zu bytes at %p); dereg it first",
           addr, bytes, region->rkey, region->length, region->addr);
    }
  }
  windows_.release(addr);
  window_freed(addr);
}

int RdmaTransport::post_write(int peer, uint64_t context, const void* local_addr, size_t length,
                              MemoryRegion* mr, int flags, uint64_t remote_addr, uint32_t rkey) {
  if (peer < 0 || peer >= size_) {
    errno = EINVAL;
    return -1;
  }
  if (failed_) {
    errno = (failure_status_ == COLL_ERR_PEER_LOST) ? ENOTCONN : EIO;
    return -1;
  }
  int send_flags = 0;
  if (mr == nullptr) {
    // No local registration: only inline data may go, copied at post time.
    if (length > max_inline_) {
      errno = EINVAL;
      return -1;
    }
    send_flags |= IBV_SEND_INLINE;
  }
  if (peer == rank_) {
    return write_to_self(context, local_addr, length, flags, remote_addr, rkey);
  }
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!reaches(peer)) {
    errno = EINVAL;  // the other half's peer (shm+rdma): no queue pair here
    return -1;
  }
  if (p.lost) {
    errno = ENOTCONN;
    return -1;
  }
  if ((flags & kWriteLeaving) && p.state != State::kEstablished) {
    // A `left` notice where this rank has no QP: dropped (see the header),
    // complete at once.
    if (flags & kWriteSignaled) ready_.push_back({context, peer, 0});
    return 0;
  }
  if (!ensure_connected(peer)) return -1;
  if (mr == nullptr && length > max_inline_) {
    errno = EINVAL;  // what this QP's provider grants inline is known now
    return -1;
  }
  // COLL_RDMA_SAFE_ORDERING: a flag waits until the data before it has landed
  // (every write is signaled in that mode, so `completed` is exact).
  if (safe_ordering_ && length == 8 && p.completed < p.posted &&
      !wait_until_completed(p, p.posted, "a flag waiting for earlier writes")) {
    return -1;
  }
  // A full send queue: wait (bounded) for a signaled WR to free slots.
  if (p.posted - p.completed >= sq_depth_ &&
      !wait_until_completed(p, p.posted - sq_depth_ + 1, "a full send queue")) {
    return -1;
  }
  bool for_user = (flags & kWriteSignaled) != 0;
  // Unsignaled WRs free their slots only when a later signaled one completes:
  // signal every signal_interval_-th write ourselves, and swallow its
  // completion in poll() unless the caller asked for it.
  bool signal = for_user || safe_ordering_ || p.posted + 1 - p.last_signaled >= signal_interval_;
  if (signal) send_flags |= IBV_SEND_SIGNALED;
  auto* verbs_mr = (mr != nullptr) ? static_cast<RdmaMemoryRegion*>(mr)->mr.get() : nullptr;
  if (rdma_post_write(p.id.get(), reinterpret_cast<void*>(static_cast<uintptr_t>(context)),
                      const_cast<void*>(local_addr), length, verbs_mr, send_flags, remote_addr,
                      area_rkey(p, remote_addr, length, rkey)) != 0) {
    return -1;  // errno from ibv_post_send
  }
  ++p.posted;
  network_bytes_ += length;
  if (signal) {
    p.signaled.push_back({p.posted, for_user});
    p.last_signaled = p.posted;
  }
  return 0;
}

// A rank writing into its own window (a schedule may address every rank,
// itself included): a copy, checked against this rank's registrations as the
// HCA would check an rkey.
int RdmaTransport::write_to_self(uint64_t context, const void* local_addr, size_t length, int flags,
                                 uint64_t remote_addr, uint32_t rkey) {
  const RdmaMemoryRegion* target = nullptr;
  for (const auto& [handle, region] : regions_) {
    auto begin = reinterpret_cast<uint64_t>(region->addr);
    if (region->rkey == rkey && remote_addr >= begin &&
        remote_addr + length <= begin + region->length) {
      target = region.get();
      break;
    }
  }
  if (target == nullptr) {
    mark_failed(COLL_ERR_TRANSPORT, rank_,
                strfmt("RDMA write from rank %d to itself failed: no registered region with rkey "
                       "0x%x covers %zu bytes at 0x%llx (remote access error)",
                       rank_, rkey, length, static_cast<unsigned long long>(remote_addr)));
    ready_.push_back({context, rank_, COLL_ERR_TRANSPORT});
    return 0;  // posted; the completion reports the error, as on the wire
  }
  std::memmove(reinterpret_cast<void*>(static_cast<uintptr_t>(remote_addr)), local_addr, length);
  if (flags & kWriteSignaled) ready_.push_back({context, rank_, 0});
  return 0;
}

void RdmaTransport::drain_completions() {
  ibv_wc completions[32];
  for (;;) {
    // rdma_get_send_comp would not check wc.status: poll the CQ directly.
    int n = ibv_poll_cq(cq_.get(), 32, completions);
    if (n < 0) {
      mark_failed(COLL_ERR_TRANSPORT, -1,
                  strfmt("RDMA transport: ibv_poll_cq failed on rank %d (%d)", rank_, n));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = completions[i];
      auto it = peer_of_qp_.find(wc.qp_num);
      int peer = (it == peer_of_qp_.end()) ? -1 : it->second;
      if (wc.status != IBV_WC_SUCCESS) {
        // Flushed WRs (unsignaled ones too) of a QP in error also come here.
        // The first error names the cause; the transport is failed for good.
        mark_failed(COLL_ERR_TRANSPORT, peer,
                    strfmt("RDMA write from rank %d to rank %d failed: %s (wc status %d, "
                           "vendor error 0x%x)",
                           rank_, peer, ibv_wc_status_str(wc.status), static_cast<int>(wc.status),
                           wc.vendor_err));
        ready_.push_back({wc.wr_id, peer, COLL_ERR_TRANSPORT});
        continue;
      }
      if (peer < 0) continue;
      Peer& p = peers_[static_cast<size_t>(peer)];
      if (p.signaled.empty()) continue;  // cannot happen: completions are only for signaled WRs
      SignaledWrite done = p.signaled.front();
      p.signaled.pop_front();
      p.completed = done.sequence;  // RC: everything posted before it is done too
      if (done.for_user) ready_.push_back({wc.wr_id, peer, 0});
    }
    if (n < 32) return;
  }
}

bool RdmaTransport::wait_until_completed(Peer& peer, uint64_t sequence, const char* why) {
  const Clock::time_point deadline = deadline_after(timeout_s_);
  // Only signaled WRs report completion: make sure one covers `sequence`.
  // (Cannot happen to be missing for a full queue, whose oldest half always
  // holds a signaled WR, nor in safe-ordering mode, where all are signaled.)
  if (peer.last_signaled < sequence) {
    errno = EAGAIN;
    return false;
  }
  while (peer.completed < sequence) {
    drain_completions();
    if (failed_) {
      errno = (failure_status_ == COLL_ERR_PEER_LOST) ? ENOTCONN : EIO;
      return false;
    }
    if (Clock::now() > deadline) {
      mark_failed(COLL_ERR_TIMEOUT, -1,
                  strfmt("RDMA transport: rank %d waited %.0f s for %s (COLL_TIMEOUT)", rank_,
                         timeout_s_, why));
      errno = ETIMEDOUT;
      return false;
    }
  }
  return true;
}

int RdmaTransport::poll(Completion* out, int max) {
  // A peer dialing this rank waits for it to accept: a wait loop that
  // spins on poll is where this rank is (check_peer, every 10 ms, does it
  // too). One read of the listener in 256 polls costs ~1 ns a poll.
  if ((++polls_ & 255) == 0) progress_connections();
  serve_area_requests();  // one load unless a writer rang
  if (ready_.empty()) drain_completions();
  int n = 0;
  while (n < max && !ready_.empty()) {
    out[n++] = ready_.front();
    ready_.pop_front();
  }
  // Sticky: once failed, every poll reports it.
  if (n == 0 && max > 0 && failed_) {
    out[0] = Completion{0, failure_peer_, failure_status_};
    n = 1;
  }
  return n;
}

void RdmaTransport::check_peer(int peer) {
  progress_connections();
  serve_area_requests();
  if (peer >= 0 && peer < size_ && peer != rank_ && reaches(peer)) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    // A peer this rank has no QP with, either way: dial it in the
    // background (the header's "Lost and leaving peers"), so that a refusal
    // tells a rank that waits for it that it is gone.
    try {
      if (!failed_ && !p.lost && p.state == State::kNone && p.in_state == State::kNone)
        start_connect(peer);
      if (!p.lost && p.state == State::kEstablished) read_events(peer, false);
      if (!p.lost && p.in_state == State::kEstablished) read_events(peer, true);
    } catch (const Error& e) {
      mark_failed(e.status(), peer, e.what());
    }
    if (p.lost && !failed_) {
      mark_failed(COLL_ERR_PEER_LOST, peer,
                  strfmt("rank %d lost its RDMA connection to rank %d (%s): the peer exited or "
                         "closed its communicator",
                         rank_, peer, p.lost_reason.c_str()));
    }
  }
  if (failed_) throw Error(failure_status_, failure_message_);
}

// ---------------------------------------------------------------- windows registered in part

void RdmaTransport::create_control_block() {
  control_.assign(static_cast<size_t>(size_), ControlEntry{});
  entry(rank_).out_answer = 1;  // what this rank's doorbell writes carry
  auto region = std::make_unique<RdmaMemoryRegion>();
  region->mr = pin(control_.data(), control_.size() * sizeof(ControlEntry), "the control block");
  region->addr = control_.data();
  region->length = region->registered = control_.size() * sizeof(ControlEntry);
  region->lkey = region->mr->lkey;
  region->rkey = region->mr->rkey;
  control_mr_ = std::move(region);
}

const RdmaTransport::AreaKey* RdmaTransport::find_area(const Peer& p, uint64_t remote_addr,
                                                       size_t length, uint32_t rkey) {
  for (const AreaKey& a : p.areas)
    if (a.window_rkey == rkey && remote_addr >= a.begin && remote_addr + length <= a.end) return &a;
  return nullptr;
}

uint32_t RdmaTransport::area_rkey(const Peer& p, uint64_t remote_addr, size_t length,
                                  uint32_t rkey) const {
  const AreaKey* area = find_area(p, remote_addr, length, rkey);
  return area != nullptr ? area->rkey : rkey;
}

int RdmaTransport::prepare_write(int peer, uint64_t remote_addr, size_t length, uint32_t rkey,
                                 uint64_t area_addr, size_t area_length) {
  if (peer < 0 || peer >= size_ || !reaches(peer) || remote_addr < area_addr ||
      remote_addr + length > area_addr + area_length) {
    errno = EINVAL;
    return -1;
  }
  // A write to itself is a copy (write_to_self): nothing to register.
  if (length == 0 || peer == rank_) return 0;
  if (find_area(peers_[static_cast<size_t>(peer)], remote_addr, length, rkey) != nullptr) return 0;
  return request_area(peer, area_addr, area_length, rkey);
}

void RdmaTransport::forget_window(int peer, uint32_t rkey) {
  if (peer < 0 || peer >= size_) return;
  std::vector<AreaKey>& areas = peers_[static_cast<size_t>(peer)].areas;
  areas.erase(std::remove_if(areas.begin(), areas.end(),
                             [rkey](const AreaKey& a) { return a.window_rkey == rkey; }),
              areas.end());
}

// The writer's side: ask, wait for the answer, keep the rkey.
int RdmaTransport::request_area(int peer, uint64_t area_addr, size_t area_length,
                                uint32_t window_rkey) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  const uint64_t sequence = ++p.requests_sent;
  entry(peer).out_request = {area_addr, area_length, window_rkey, sequence};
  uint64_t answer = 0;
  if (post_area_request(peer) != 0 || wait_for_answer(peer, sequence, &answer) != 0) return -1;
  switch (answer_status(answer)) {
    case kAreaRegistered:
      p.areas.push_back({window_rkey, area_addr, area_addr + area_length, answer_rkey(answer)});
      return 0;
    case kAreaNoMemory:
      errno = ENOMEM;  // the owner's transport has failed, saying why
      return -1;
    default:
      errno = EACCES;  // not a window of the owner's, as a bad rkey would be
      return -1;
  }
}

// Fields, sequence, doorbell: three writes on the QP to the owner, placed
// in that order (the contract's ordering promise), from the control block
// (registered, and unchanged until the answer, which comes after them).
int RdmaTransport::post_area_request(int peer) {
  ControlEntry& mine = entry(peer);
  const uint64_t at = remote_entry(peer, rank_) + offsetof(ControlEntry, request);
  const uint32_t rkey = peers_[static_cast<size_t>(peer)].control.rkey;
  const uint64_t doorbell_at =
      remote_entry(peer, peer) + offsetof(ControlEntry, request) + offsetof(AreaRequest, sequence);
  if (post_write(peer, 0, &mine.out_request, offsetof(AreaRequest, sequence), control_mr_.get(), 0,
                 at, rkey) != 0 ||
      post_write(peer, 0, &mine.out_request.sequence, 8, control_mr_.get(), 0,
                 at + offsetof(AreaRequest, sequence), rkey) != 0)
    return -1;
  return post_write(peer, 0, &entry(rank_).out_answer, 8, control_mr_.get(), 0, doorbell_at, rkey);
}

// Bounded, as a first write's wait for its queue pair: the owner answers
// from its progress calls, so an owner outside the library answers when it
// is back. Meanwhile this rank answers requests to itself and accepts
// connections (the owner may have to dial it to answer).
int RdmaTransport::wait_for_answer(int peer, uint64_t sequence, uint64_t* answer) {
  const Clock::time_point deadline = deadline_after(timeout_s_);
  const uint64_t* word = &entry(peer).answer;
  for (;;) {
    *answer = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    if (answer_sequence(*answer) == (sequence & kAnswerSequenceMask)) return 0;
    try {
      check_peer(peer);  // progress, requests to this rank, a lost peer
    } catch (const Error&) {
      errno = (failure_status_ == COLL_ERR_PEER_LOST) ? ENOTCONN : EIO;
      return -1;
    }
    drain_completions();
    if (seconds_left(deadline) <= 0) {
      mark_failed(COLL_ERR_TIMEOUT, peer,
                  strfmt("RDMA transport: rank %d waited %.0f s for rank %d to register its "
                         "slots in a window (COLL_TIMEOUT): is that rank inside libcoll?",
                         rank_, timeout_s_, peer));
      errno = ETIMEDOUT;
      return -1;
    }
    pollfd listener{listen_id_->channel->fd, POLLIN, 0};
    (void)::poll(&listener, 1, 1);  // a millisecond, or a peer dialing
  }
}

// The owner's side, from every poll and check_peer.
void RdmaTransport::serve_area_requests() {
  if (failed_ || __atomic_load_n(&doorbell(), __ATOMIC_ACQUIRE) == 0) return;
  // Cleared before the scan: a doorbell that lands after this store rings
  // again for the next call, one that landed before it has its request
  // (written before it on the same QP) visible to the scan.
  __atomic_store_n(&doorbell(), 0, __ATOMIC_SEQ_CST);
  for (int writer = 0; writer < size_; ++writer) {
    if (writer == rank_ || !reaches(writer)) continue;
    const uint64_t sequence = __atomic_load_n(&entry(writer).request.sequence, __ATOMIC_ACQUIRE);
    Peer& p = peers_[static_cast<size_t>(writer)];
    if (sequence == p.requests_served) continue;
    p.requests_served = sequence;
    answer_area_request(writer);
  }
}

// The region (a window of this rank's) that the request's area lies in.
RdmaMemoryRegion* RdmaTransport::window_holding(const AreaRequest& request) {
  for (const auto& [handle, region] : regions_) {
    const auto begin = reinterpret_cast<uint64_t>(region->addr);
    if (region->rkey == request.window_rkey && request.addr >= begin &&
        request.addr + request.length <= begin + region->length)
      return region.get();
  }
  return nullptr;
}

// Registers the writer's area (once: a request asked again gets the same
// rkey) and answers. A registration that fails is answered, then fails
// this transport: the writer's prepare_write and this rank's next call both
// report it.
void RdmaTransport::answer_area_request(int writer) {
  ControlEntry& e = entry(writer);
  const AreaRequest request = e.request;
  AnswerStatus status = kAreaRegistered;
  uint32_t rkey = 0;
  int failure = 0;
  std::string why;
  RdmaMemoryRegion* window = window_holding(request);
  if (window == nullptr) {
    status = kAreaRefused;
  } else if (request.addr + request.length <=
             reinterpret_cast<uint64_t>(window->addr) + window->registered) {
    rkey = window->rkey;  // registered whole
  } else {
    auto known = std::find_if(window->areas.begin(), window->areas.end(), [&](const SlotArea& a) {
      return a.addr == request.addr && a.length == request.length;
    });
    try {
      if (known == window->areas.end()) {
        const std::string what = strfmt("the slots of rank %d in a window", writer);
        window->areas.push_back({request.addr, request.length,
                                 pin(reinterpret_cast<void*>(static_cast<uintptr_t>(request.addr)),
                                     request.length, what.c_str())});
        known = window->areas.end() - 1;
      }
      rkey = known->mr->rkey;
    } catch (const Error& error) {
      status = error.status() == COLL_ERR_NO_RESOURCES ? kAreaNoMemory : kAreaRefused;
      failure = error.status();
      why = error.what();
    }
  }
  e.out_answer = encode_answer(request.sequence, status, rkey);
  (void)post_write(writer, 0, &e.out_answer, 8, control_mr_.get(), 0,
                   remote_entry(writer, rank_) + offsetof(ControlEntry, answer),
                   peers_[static_cast<size_t>(writer)].control.rkey);
  if (failure != 0) mark_failed(failure, writer, why);
}

uint64_t RdmaTransport::internal_registrations() const {
  uint64_t n = control_mr_ ? 1 : 0;
  for (const auto& [handle, region] : regions_) n += region->areas.size();
  return n;
}

uint64_t RdmaTransport::pinned_bytes() const {
  uint64_t bytes = control_mr_ ? control_mr_->registered : 0;
  for (const auto& [handle, region] : regions_) {
    bytes += region->registered;
    for (const SlotArea& a : region->areas) bytes += a.length;
  }
  return bytes;
}

void RdmaTransport::mark_failed(int status, int peer, std::string message) {
  if (failed_) return;  // the first failure is the cause; keep it
  failed_ = true;
  failure_status_ = status;
  failure_peer_ = peer;
  failure_message_ = std::move(message);
}

}  // namespace

bool rdma_device_available() {
  return !env_list("COLL_RDMA_ADDR").empty() ||
         !rdma_capable_ipv4_addresses().empty();
}

std::unique_ptr<Transport> make_rdma_transport(Bootstrap& boot, const TransportOptions& opts) {
  return std::make_unique<RdmaTransport>(boot, opts, std::vector<bool>());
}

std::unique_ptr<RdmaPart> make_rdma_transport_part(Bootstrap& boot, const TransportOptions& opts,
                                                   const std::vector<bool>& reach) {
  if (reach.size() != static_cast<size_t>(boot.size()))
    fail(COLL_ERR_INTERNAL, "rdma part: %zu reach flags for %d ranks", reach.size(), boot.size());
  return std::make_unique<RdmaTransport>(boot, opts, reach);
}

}  // namespace coll
