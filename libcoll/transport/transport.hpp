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

// A peer's registered region, as traded through the bootstrap.
struct RemoteRegion {
  uint64_t addr = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
};

// post_write flags (the subset of ibv_send_flags libcoll uses).
enum : int {
  kWriteSignaled = 1,  // IBV_SEND_SIGNALED: report a Completion
};

struct Completion {
  uint64_t context = 0;  // the context given to post_write (wr_id)
  int peer = -1;
  int status = 0;  // 0, or a COLL_ERR_* code
};

struct TransportOptions {
  size_t window_bytes = 0;  // this rank's window memory, allocated at setup
  double timeout_s = 60;    // bound on every wait during setup
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;
  // For logs: the name and what it runs on ("rdma on rxe0 (192.0.2.1)").
  virtual std::string describe() const { return name(); }
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Memory for this rank's windows (options.window_bytes, page aligned,
  // zeroed), allocated at setup where peers can reach it once registered.
  virtual void* window_base() const = 0;

  // Throws coll::Error (COLL_ERR_NO_RESOURCES for ENOMEM, with the
  // locked-memory limit named in the message).
  virtual MemoryRegion* reg_write(void* addr, size_t length) = 0;
  // 0, or -1 with errno. mr is invalid afterwards.
  virtual int dereg(MemoryRegion* mr) = 0;

  // rdma_post_write(3). mr may be null when !needs_local_registration().
  virtual int post_write(int peer, uint64_t context, const void* local_addr,
                         size_t length, MemoryRegion* mr, int flags,
                         uint64_t remote_addr, uint32_t rkey) = 0;

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

  // Throws Error(COLL_ERR_PEER_LOST) when peer is known to be gone. Cheap
  // enough to call every few milliseconds from a wait loop.
  virtual void check_peer(int peer) = 0;

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

// By name ("shm", "tcp", "shm+tcp", "rdma"), or the best available for
// "" / "auto": shm on one host; across hosts rdma when every rank has a
// device, else shm within a host and tcp between hosts. hosts[r]: rank r's
// host_identity() (gather_host_map).
std::unique_ptr<Transport> make_transport(const std::string& name,
                                          Bootstrap& boot,
                                          const TransportOptions& opts,
                                          const std::vector<std::string>& hosts);

}  // namespace coll
