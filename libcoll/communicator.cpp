#include "communicator.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "datatype.hpp"
#include "error.hpp"
#include "transport/host_identity.hpp"

namespace coll {
namespace {

constexpr size_t kUnpinnedCacheBytes = size_t(1) << 40;

bool overlaps(const void* a, const void* b, size_t len) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + len && y < x + len;
}

size_t checked_bytes(size_t count, int datatype) {
  if (!valid_datatype(datatype))
    fail(COLL_ERR_INVALID_ARG, "unknown datatype %d", datatype);
  const size_t es = datatype_size(datatype);
  if (count > SIZE_MAX / es)
    fail(COLL_ERR_INVALID_ARG, "count %zu of %s overflows the address space", count,
         datatype_name(datatype));
  return count * es;
}

}  // namespace

Communicator::Communicator(std::unique_ptr<Bootstrap> boot, const Config& config)
    : config_(config), boot_(std::move(boot)) {
  if (!config_.allreduce_algo.empty()) forced_allreduce_ = &find_allreduce(config_.allreduce_algo);
  if (!config_.bcast_algo.empty()) forced_bcast_ = &find_bcast(config_.bcast_algo);
  load_selection();  // a bad COLL_TUNING_FILE fails coll_init, not the first collective
  select_reduce_kernels(config_.reduce_kernels);

  WindowLayout layout;
  layout.slot_bytes = config_.slot_bytes;
  layout.num_slots = config_.num_slots;
  layout.nranks = boot_->size();
  TransportOptions topts;
  topts.window_bytes = layout.window_bytes();
  topts.timeout_s = config_.timeout_s;
  const HostMap host = gather_host_map(*boot_, config_.timeout_s);
  transport_ = make_transport(config_.transport, *boot_, topts, host.hosts);

  // The window is registered once, here, and its {addr, rkey} traded.
  window_mr_ = transport_->reg_write(transport_->window_base(), layout.window_bytes());
  RemoteRegion mine;
  mine.addr = reinterpret_cast<uintptr_t>(window_mr_->addr);
  mine.length = window_mr_->length;
  mine.rkey = window_mr_->rkey;
  auto all = boot_->allgather(std::string(reinterpret_cast<char*>(&mine), sizeof mine),
                              config_.timeout_s);
  std::vector<RemoteRegion> peers(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].size() != sizeof(RemoteRegion))
      fail(COLL_ERR_INTERNAL, "window exchange: rank %zu sent %zu bytes", r, all[r].size());
    std::memcpy(&peers[r], all[r].data(), sizeof(RemoteRegion));
  }
  Transport& t = *transport_;
  // Only transports that pin pages (RDMA) are bounded by the locked-memory
  // limit (0: derived from RLIMIT_MEMLOCK); a shm or tcp registration is a
  // table entry, and runs out of entries (NO_RESOURCES: evict and retry).
  const size_t max_pinned = t.needs_local_registration() ? 0 : kUnpinnedCacheBytes;
  cache_ = std::make_unique<RegistrationCache>(
      [&t](void* addr, size_t len) { return t.reg_write(addr, len); },
      [&t](MemoryRegion* mr) { return t.dereg(mr); }, max_pinned, config_.regcache);
  // Ranks that outnumber the cores of their host must not spin: the peer a
  // rank waits for may need its core (wait_policy.hpp).
  const bool oversubscribed = host.local_ranks > host.local_cpus;
  WaitPolicyParams wait;
  wait.oversubscribed = oversubscribed;
  wait.spin_polls = config_.spin_polls.value_or(oversubscribed ? 0 : 64);
  channel_ = std::make_unique<Channel>(
      *transport_, layout, window_mr_, std::move(peers), config_.timeout_s, *cache_,
      config_.zcopy_threshold.value_or(transport_->default_zcopy_threshold()), wait);
  // No rank writes into a window before every window is registered.
  boot_->barrier(config_.timeout_s);
  if (config_.debug)
    std::fprintf(stderr,
                 "libcoll: rank %d of %d: bootstrap %s, transport %s, slots %d x %zu B, "
                 "reduce kernels %s, %d ranks on %d cpus of this host: %s\n",
                 rank(), size(), boot_->name(), transport_->describe().c_str(), layout.num_slots,
                 layout.slot_bytes, reduce_kernels_name(), host.local_ranks, host.local_cpus,
                 oversubscribed ? "oversubscribed" : "a cpu each");
}

Communicator::~Communicator() {
  // Peers may still write into our window (a credit after their last
  // message) until they are done: windows go away only after every rank
  // has seen all its writes complete. A failed communicator skips the
  // handshake, whose peers may be gone; its writes fail harmlessly.
  if (!failed_status_) {
    try {
      channel_->quiesce();
      boot_->barrier(config_.timeout_s);
    } catch (const Error&) {
      // Finalize goes on: nothing more can be done for a peer that is gone.
    }
  }
  channel_.reset();
  cache_.reset();  // rdma_dereg_mr(3): every region before the PD goes
  if (window_mr_) transport_->dereg(window_mr_);
}

const char* Communicator::last_algorithm(const std::string& collective) const {
  if (collective == "allreduce") return last_allreduce_;
  if (collective == "bcast") return last_bcast_;
  if (collective == "barrier") return config_.dissemination_barrier ? "dissemination" : "tree";
  return "";
}

// One collective call: the user buffers are pinned (registered through the
// cache) where the transport needs it, the algorithm runs, and the call
// ends when its writes have completed. Any failure inside is sticky.
template <class Body>
void Communicator::run(std::initializer_list<std::pair<const void*, size_t>> buffers,
                       Body body) {
  if (failed_status_)
    throw Error(failed_status_, "the communicator failed earlier: " + failed_message_);
  try {
    if (channel_->needs_local_registration())
      for (auto [buf, len] : buffers) channel_->pin(buf, len);
    body();
    channel_->finish();
  } catch (const Error& e) {
    channel_->drop_pins();
    failed_status_ = e.status();
    failed_message_ = e.what();
    throw;
  }
}

void Communicator::allreduce(const void* sendbuf, void* recvbuf, size_t count, int datatype,
                             int op) {
  const size_t bytes = checked_bytes(count, datatype);
  if (!valid_op(op)) fail(COLL_ERR_INVALID_ARG, "unknown reduction op %d", op);
  ReduceFn reduce = reduce_function(datatype, op);
  if (!reduce)
    fail(COLL_ERR_INVALID_ARG, "op %s is not defined on datatype %s (integer types only)",
         op_name(op), datatype_name(datatype));
  if (sendbuf == COLL_IN_PLACE) sendbuf = recvbuf;
  if (count > 0 && (!recvbuf || !sendbuf))
    fail(COLL_ERR_INVALID_ARG, "allreduce: NULL %s with count %zu", recvbuf ? "sendbuf" : "recvbuf",
         count);
  if (sendbuf != recvbuf && overlaps(sendbuf, recvbuf, bytes))
    fail(COLL_ERR_INVALID_ARG,
         "allreduce: sendbuf and recvbuf overlap (use COLL_IN_PLACE to reduce in place)");
  const AllreduceAlgorithm& algo =
      forced_allreduce_ ? *forced_allreduce_ : choose_allreduce(size(), bytes);
  last_allreduce_ = algo.name;
  if (count == 0) return;
  if (size() == 1) {
    if (sendbuf != recvbuf) run({}, [&] { std::memcpy(recvbuf, sendbuf, bytes); });
    return;
  }
  AllreduceArgs args{sendbuf, recvbuf, count, datatype_size(datatype), reduce};
  if (sendbuf == recvbuf)
    run({{recvbuf, bytes}}, [&] { algo.run(*channel_, args); });
  else
    run({{sendbuf, bytes}, {recvbuf, bytes}}, [&] { algo.run(*channel_, args); });
}

void Communicator::bcast(void* buf, size_t count, int datatype, int root) {
  const size_t bytes = checked_bytes(count, datatype);
  if (root < 0 || root >= size())
    fail(COLL_ERR_INVALID_ARG, "bcast: root %d out of range [0, %d)", root, size());
  if (count > 0 && !buf) fail(COLL_ERR_INVALID_ARG, "bcast: NULL buffer with count %zu", count);
  const BcastAlgorithm& algo = forced_bcast_ ? *forced_bcast_ : choose_bcast(size(), bytes);
  last_bcast_ = algo.name;
  if (count == 0 || size() == 1) return;
  BcastArgs args{buf, bytes, root};
  run({{buf, bytes}}, [&] { algo.run(*channel_, args); });
}

void Communicator::barrier() {
  if (config_.dissemination_barrier)
    run({}, [&] { dissemination_barrier(*channel_); });
  else
    run({}, [&] { tree_barrier(*channel_); });
}

}  // namespace coll
