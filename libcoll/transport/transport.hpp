// The transport contract, shaped on rdma/rdma_verbs.h (rdma_reg_write(3),
// rdma_dereg_mr(3), rdma_post_write(3)). Algorithms never see this header:
// they use the Channel layer (libcoll/channel.hpp), which uses this.
//
// Rules every backend keeps:
//  - reg_write(addr, len) registers memory that peers may write into
//    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, nothing else).
//  - after dereg(mr), writes with its rkey fail; they never land.
//  - post_write(): 0, or -1 with errno, exactly like rdma_post_write. A
//    signaled write's completion hands back `context` (the wr_id).
//  - writes posted to one peer become visible there in posting order, so a
//    flag written after its data means the data is there. Each backend says
//    in its source how it keeps that promise.
//  - a write of 8 bytes to an 8-byte aligned remote address lands as one
//    atomic store (flags and credits rely on it).
//  - a failed write (error completion, bad rkey, lost peer) is reported by
//    poll() and makes the transport "failed": every later call reports it.
//  - window memory (alloc_window) is where peers write; a communicator
//    allocates its own, registers it, and frees it when it goes. Any other
//    memory may be registered too (user buffers for zero-copy).
//
// Threads: transports are NOT thread-safe. Every call on one transport
// (alloc_window and free_window included) must be serialized by the caller;
// a backend may run its progress engine inside any call (tcp applies
// incoming writes in poll, post_write and check_peer).
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coll {

class Bootstrap;

// What ibv_mr gives the application: valid until dereg().
struct MemoryRegion {
  void* addr = nullptr;
  size_t length = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

// A peer's registered region, as traded through the bootstrap. Sent as its
// bytes: `reserved` names what would be padding, so that no uninitialised
// byte goes on the wire (valgrind saw the 4 bytes).
struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
  uint32_t reserved = 0;
};
static_assert(sizeof(RemoteRegion) == 24, "RemoteRegion travels as 24 bytes, no padding");

// post_write flags (the subset of ibv_send_flags libcoll uses, and one of
// its own).
enum : int {
  kWriteSignaled = 1,  // IBV_SEND_SIGNALED: report a Completion
  // The `left` notice of a rank that finalizes (Channel::quiesce): a
  // backend that connects on first use (tcp, rdma) sends it only where a
  // connection exists, and drops it (accepted, completed) elsewhere; once
  // every peer had it, tcp takes no new connections, so a peer that dials
  // it later learns the same (tcp_transport.cpp and rdma_transport.cpp,
  // "Lost and leaving peers"). shm ignores the flag.
  kWriteLeaving = 2,
  // A credit (Channel::do_release): an 8-byte absolute count whose later
  // value supersedes an earlier one at the same address. A backend whose
  // every write costs a system call (tcp) may hold it back until its next
  // write to that peer, which then carries it in the same system call, or
  // until its next poll(), whichever comes first - never across a wait in
  // the library, since every wait polls. Unsignaled only. Others ignore the
  // flag.
  kWriteDeferrable = 4,
  // A notice into the peer's window (Channel::post_notice: a failure or a
  // refusal) that may arrive after the peer freed that communicator (its
  // own failure freed it without the closing handshake): a backend that
  // can tell (tcp) drops it there instead of failing the stream, which
  // would fail every communicator of the pair. shm refuses it at post (the
  // writer checks the key); rdma cannot tell (a remote access error).
  kWriteNotice = 8,
};

struct Completion {
  uint64_t context = 0;  // the context given to post_write (wr_id)
  int peer = -1;
  int status = 0;  // 0, or a COLL_ERR_* code
};

// Line messages (Transport::post_lines): 64-byte lines of an 8-byte flag
// and 56 bytes of payload. A message of the channel takes at most
// kMaxMessageLines lines (WindowLayout::kLinesPerSlot, where channel.hpp
// says why 5); a transport may move one such message as one unit (tcp: one
// frame). One definition, so the window's lines and tcp's frames agree.
inline constexpr size_t kLineBytes = 64;
inline constexpr size_t kLinePayload = kLineBytes - 8;
inline constexpr size_t kMaxMessageLines = 5;

// The least arena a caller should give the shm transport (see
// default_window_arena_bytes).
inline constexpr size_t kMinWindowArenaBytes = size_t(256) << 20;

struct TransportOptions {
  // Virtual bytes of this rank's window arena: the most window memory that
  // alloc_window hands out at once (all windows alive together, plus page
  // rounding and fragmentation). Used by shm and the shm half of shm+tcp,
  // whose windows live in the rank's shared segment: the segment is created
  // this large but sparse, and every peer on the host maps all of it at
  // setup - address space only, no memory until alloc_window reserves it.
  // tcp and rdma ignore it (their windows are anonymous memory). Callers
  // take COLL_SHM_ARENA (Config::shm_arena_bytes) when the user set it,
  // else default_window_arena_bytes(the world window's bytes).
  size_t window_arena_bytes = kMinWindowArenaBytes;
  double timeout_s = 60;  // bound on every wait during setup
};

// The arena a job needs when the user does not say: max(256 MiB x
// floor_scale, 16 x the world window), rounded up to pages. A dup of the
// world needs as much as the world window, a split less, so 16 x leaves
// room for a dozen or more communicators alive at once; the floor serves
// small jobs that create many (40 alive at np 7: tests/mp/comm_test.c),
// and scales with the slots (floor_scale: slot size / the default 128 KiB,
// at least 1), since every window's slots do. Costs address space only
// (ranks per host x arena in every rank).
size_t default_window_arena_bytes(size_t world_window_bytes, size_t floor_scale = 1);

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;
  // For logs: the name and what it runs on ("rdma on rxe0 (192.0.2.1)").
  virtual std::string describe() const { return name(); }
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Memory for one window of a communicator: `bytes` rounded up to pages,
  // page aligned, zeroed, placed where peers can write into it once it is
  // registered with reg_write (the caller then trades its {addr, rkey}).
  // shm (and shm+tcp): a range of this rank's shared segment, so that
  // peers on the host copy into it through their mapping (a region
  // registered there is kRegionInSegment), its pages reserved in /dev/shm
  // now so a full /dev/shm fails here, never with a SIGBUS later. tcp,
  // rdma: anonymous memory (mmap). Throws coll::Error(COLL_ERR_NO_RESOURCES)
  // when it cannot, with the sizes in the message (shm: /dev/shm full, or
  // the arena exhausted - COLL_SHM_ARENA; tcp, rdma: mmap failed);
  // COLL_ERR_INVALID_ARG for 0 bytes.
  //
  // Only the first eager_bytes are committed now; the rest is committed by
  // the writers, a range before their first write into it
  // (prepare_write), so that a window's memory is what its writers use.
  // Its other pages read as zeros (shm: the sparse file's holes, which its
  // owner reads only after a writer's flag says there is data).
  virtual void* alloc_window(size_t bytes, size_t eager_bytes) = 0;
  void* alloc_window(size_t bytes) { return alloc_window(bytes, bytes); }
  // Gives back what alloc_window(bytes) returned at addr (same bytes).
  // The caller has dereg'ed every registration inside it first and
  // guarantees that no peer writes into it any more (they have quiesced:
  // a write still in flight would land in memory that is no longer the
  // window). Its pages go back to the system; memory handed out again
  // later is zeroed again. Throws coll::Error(COLL_ERR_INVALID_ARG) for a
  // range that alloc_window did not hand out (or that is freed already),
  // and for one that is still registered: both are bugs of the caller,
  // and the memory stays as it was. Never fails otherwise. The transport's
  // destructor frees windows still allocated.
  virtual void free_window(void* addr, size_t bytes) = 0;

  // Throws coll::Error (COLL_ERR_NO_RESOURCES for ENOMEM, with the
  // locked-memory limit named in the message).
  virtual MemoryRegion* reg_write(void* addr, size_t length) = 0;
  // 0, or -1 with errno. mr is invalid afterwards.
  virtual int dereg(MemoryRegion* mr) = 0;
  // Closes (false) or reopens (true) mr to peers' writes without
  // deregistering it: while closed, a write into it fails as one with a
  // bad rkey would (region_table.hpp). Registrations start open. The
  // registration cache closes a user buffer's region between the
  // operations that use it. A no-op where the hardware has no such switch
  // (RDMA, whose late writes land in the pinned old pages).
  virtual void set_writable(MemoryRegion* /*mr*/, bool /*writable*/) {}

  // rdma_post_write(3). mr may be null when !needs_local_registration().
  // Refused at post where the backend checks there (shm): -1 with EACCES
  // for an unknown rkey or a range outside its region, ESTALE for a region
  // closed by set_writable.
  virtual int post_write(int peer, uint64_t context, const void* local_addr,
                         size_t length, MemoryRegion* mr, int flags,
                         uint64_t remote_addr, uint32_t rkey) = 0;

  // A message into a peer's window: length bytes of src at remote_addr,
  // then the 8-byte flag at flag_addr, both under rkey, unsignaled, in
  // that order (the flag lands after the data, as two post_writes promise).
  // Called only where !needs_local_registration() (the source is copied
  // out before return). A backend where each write is a system call (tcp)
  // hands both to the kernel in one; the default is two post_writes.
  virtual int post_message(int peer, const void* src, size_t length, uint64_t remote_addr,
                           uint64_t flag, uint64_t flag_addr, uint32_t rkey) {
    if (post_write(peer, 0, src, length, nullptr, 0, remote_addr, rkey) != 0) return -1;
    return post_write(peer, 0, &flag, sizeof flag, nullptr, 0, flag_addr, rkey);
  }

  // Commits the memory of [remote_addr, remote_addr + length) in a
  // peer's window before the first write there (see alloc_window), so
  // that memory the host has not got is this call's error, never a SIGBUS
  // in a copy: 0, or -1 with errno (ENOMEM: /dev/shm or memory full;
  // EACCES: not a range of a region of the peer's window). shm populates
  // the pages through this rank's mapping of the peer's segment
  // (MADV_POPULATE_WRITE). [area_addr, area_addr + area_length) holds the
  // range: the part of the window that this writer alone writes (its
  // slots). rdma, whose windows are registered in part (alloc_window's
  // eager_bytes; a registration pins every page), has the owner register
  // the whole area for this writer the first time, and writes into it
  // under that registration's rkey from then on: it may wait (bounded) for
  // the owner to answer from its progress calls, as a first write waits for
  // its queue pair, and fails with ENOMEM where the owner could not pin it
  // (its locked-memory limit; the owner's transport fails too, with
  // COLL_ERR_NO_RESOURCES). tcp: a no-op, its windows are anonymous memory
  // that the kernel commits as it is written.
  virtual int prepare_write(int /*peer*/, uint64_t /*remote_addr*/, size_t /*length*/,
                            uint32_t /*rkey*/, uint64_t /*area_addr*/, size_t /*area_length*/) {
    return 0;
  }
  // The caller writes no more into the peer's window registered as rkey
  // (its communicator is gone): a backend forgets what prepare_write
  // learnt for it (rdma: the rkeys of the areas registered there), so that
  // a later window with the same rkey is asked afresh.
  virtual void forget_window(int /*peer*/, uint32_t /*rkey*/) {}

  // Registrations the backend made by itself, beyond those reg_write
  // handed out (rdma: its control block, and the slot areas it registered
  // for its writers), and the bytes that all of its registrations pin
  // (0 where nothing is pinned): for the resource stats and the tests.
  virtual uint64_t internal_registrations() const { return 0; }
  virtual uint64_t pinned_bytes() const { return 0; }

  // Line messages (the idea of NCCL's LL protocol): writes the len bytes of
  // src as ceil(len / 56) 64-byte lines at remote_addr (64-byte aligned);
  // line j is the 8-byte `flag`, then bytes [56j, 56j + 56) of src. Each
  // line's flag becomes visible after that line's payload (in any order
  // across lines), so a reader that polls every line's flag needs no
  // separate flag after the data, and fetches the message in one round of
  // cache misses instead of two. Unsignaled; the source may be reused at
  // return. Called only for peers with line_writes(peer).
  virtual bool line_writes(int /*peer*/) const { return false; }
  virtual int post_lines(int /*peer*/, const void* /*src*/, size_t /*len*/, uint64_t /*flag*/,
                         uint64_t /*remote_addr*/, uint32_t /*rkey*/) {
    errno = ENOTSUP;
    return -1;
  }
  // Fills up to max completions of signaled writes and error completions;
  // never blocks. Also drives the backend's progress (a TCP backend applies
  // incoming writes here), so waiters call it while they spin.
  virtual int poll(Completion* out, int max) = 0;

  // True when the local source of a write must be registered and must not
  // change until the write completes (RDMA). False when post_write has
  // copied the data out before it returns (shm, tcp).
  virtual bool needs_local_registration() const = 0;

  // The smallest call (bytes) that gains from writing straight into the
  // receivers' buffers on this transport; 0: never. COLL_ZCOPY_THRESHOLD
  // overrides it.
  virtual size_t default_zcopy_threshold() const { return size_t(512) << 10; }
  // True where zero-copy cannot work on this job at all (shm: a rank may
  // not write into its host peers' memory, CMA refused): then no call goes
  // zero-copy, whatever COLL_ZCOPY_THRESHOLD asks.
  virtual bool zero_copy_refused() const { return false; }
  // True where a zero-copy write travels the way a window write does (the
  // socket, the NIC), so it costs no more a byte and spares the receiver
  // its copy out of the window: tcp, RDMA. False where it takes another
  // path whose cost depends on the machine (shm: CMA), and on the hybrids,
  // whose pairs within a host are shm (but see the next one). Every rank of
  // a job answers alike (they all run one transport), so choices made on
  // it agree.
  virtual bool direct_writes_like_window() const { return false; }
  // The same for the writes among `ranks` (transport ranks) only: a
  // channel's. The hybrids answer true where no two of them share a host,
  // so that every pair takes the network half (a job of one rank a host;
  // the hierarchy's leaders). Every rank holds the same host list, so the
  // ranks of a channel answer alike.
  virtual bool direct_writes_like_window_among(const std::vector<int>& /*ranks*/) const {
    return direct_writes_like_window();
  }
  // Whether peer's writes into this rank's memory [addr, addr + length)
  // are a plain copy through peer's mapping of it: shm (and the host pairs
  // of the hybrids) when the range lies in this rank's segment - memory
  // from coll_mem_alloc, or a window. Such memory can take a peer's
  // message in place (Channel::offer) for the price of the one copy a
  // slot costs. False elsewhere (CMA, the network).
  virtual bool copies_into(int /*peer*/, const void* /*addr*/, size_t /*length*/) const {
    return false;
  }

  // Throws Error(COLL_ERR_PEER_LOST) when peer is known to be gone. Cheap
  // enough to call every few milliseconds from a wait loop.
  virtual void check_peer(int peer) = 0;

  // The peers this process holds a connection to now (shm: segments
  // mapped; tcp: sockets; rdma: queue pairs established), for the
  // resource stats (coll_comm_resource_stats).
  virtual int connections() const { return 0; }
  // Bytes this process has written to its peers over a network (tcp
  // frames' payload, RDMA writes posted; shm moves none): what crosses
  // hosts, for the resource stats.
  virtual uint64_t network_bytes() const { return 0; }

  // Where the ranks of this host run, for the wait policy
  // (libcoll/wait_policy.hpp): a waiting rank yields its CPU only to a rank
  // of ours queued on it. A rank publishes the CPU it runs on (a word in
  // memory its host's peers read); other_rank_on_cpu(cpu) says whether
  // another rank of this host published cpu last. Both are called on every
  // wait and every few polls: a load or two, a store only on a change.
  // Transports whose ranks share no memory know nothing (false).
  virtual bool shares_cpu_placement() const { return false; }
  virtual void publish_cpu(int /*cpu*/) {}
  virtual bool other_rank_on_cpu(int /*cpu*/) const { return false; }
};

// Backends. Each runs its setup exchanges through the bootstrap.
std::unique_ptr<Transport> make_shm_transport(Bootstrap& boot,
                                              const TransportOptions& opts);
std::unique_ptr<Transport> make_rdma_transport(Bootstrap& boot,
                                               const TransportOptions& opts);

// Whether this host has an RDMA device with an IPv4 address (or
// COLL_RDMA_ADDR names one); false in a build without RDMA.
bool rdma_device_available();

// By name ("shm", "tcp", "shm+tcp", "rdma", "shm+rdma"), or the best
// available for "" / "auto": shm on one host; across hosts shm within a host
// and, between hosts, rdma when every rank has a device (shm+rdma), else tcp
// (shm+tcp). hosts[r]: rank r's
// host_identity() (gather_host_map).
std::unique_ptr<Transport> make_transport(const std::string& name,
                                          Bootstrap& boot,
                                          const TransportOptions& opts,
                                          const std::vector<std::string>& hosts);

}  // namespace coll
