// Knobs read from the environment once, at coll_init. Every knob is
// documented in README.md ("Knobs"); a malformed value is an error at
// coll_init, never silently ignored.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace coll {

struct Config {
  std::string transport;       // COLL_TRANSPORT: "" (auto), shm, tcp, shm+tcp, rdma, shm+rdma
  // The COLL_<NAME>_ALGO knobs are read by the context from the collective
  // registry (algorithms/algorithms.hpp), one per collective.
  // COLL_REDUCE_KERNELS: "" (auto: the widest the CPU runs), baseline, avx2,
  // avx512 (libcoll/reduce_kernels.hpp); checked at coll_init.
  std::string reduce_kernels;
  double timeout_s = 300;      // COLL_TIMEOUT: bound on every wait
  size_t slot_bytes = 128 * 1024;  // COLL_SLOT_SIZE: eager slot per peer
  int num_slots = 4;               // COLL_NUM_SLOTS: slots per peer
  // COLL_ZCOPY_THRESHOLD: calls of at least this many bytes write straight
  // into the receivers' buffers; 0 turns zero-copy off. Unset: the
  // transport's default (Transport::default_zcopy_threshold).
  std::optional<size_t> zcopy_threshold;
  bool regcache = true;  // COLL_REGCACHE=0: register/deregister every call
  // COLL_REGCACHE_MONITOR: how freed memory is detected (memory_monitor.hpp):
  // "auto" (userfaultfd where the kernel allows it), "userfaultfd" (fail
  // coll_init without it), "none" (page frames where readable, else no reuse).
  std::string regcache_monitor = "auto";
  bool regcache_verify = false;  // COLL_REGCACHE_VERIFY=1: page frames checked on hits too
  bool debug = false;    // COLL_DEBUG=1: one line per rank at coll_init
  // COLL_ASYNC_PROGRESS=1: a progress thread advances non-blocking
  // operations while the application computes.
  bool async_progress = false;
  // COLL_SHM_ARENA: virtual bytes of each rank's window arena in its shared
  // segment (TransportOptions::window_arena_bytes). Unset:
  // default_window_arena_bytes(the world window).
  std::optional<size_t> shm_arena_bytes;
  // COLL_SPIN_POLLS: polls of a wait before it yields the CPU. Unset: 64,
  // or 0 when the ranks on a host outnumber its CPUs.
  std::optional<uint64_t> spin_polls;
  // COLL_CHECK_ARGS=1: every collective first agrees on its arguments
  // across the communicator (libcoll/arg_check.hpp).
  bool check_args = false;
  // COLL_FAST_PATH=0: small blocking calls always run as coroutines, never
  // in their algorithm's synchronous form (algorithms.hpp, NowFn). For
  // tests and measurements of the general path.
  bool fast_path = true;
  // COLL_REPRODUCIBLE (COLL_REPRODUCIBLE_*: 0 off, 1 order, 2 exact), the
  // level every communicator starts at. order: floating-point SUM and PROD
  // (and user operators) reduce every element in one order fixed by the
  // number of ranks alone, whatever algorithm, size, transport or tuning
  // would have been chosen (Communicator::choose): the same bits from
  // allreduce, reduce, reduce_scatter and their forms. exact: besides,
  // floating-point SUM in those is exact-sum's (libcoll/exact_sum.hpp): the
  // same bits at any number of ranks.
  int reproducible = 0;
  // COLL_HIERARCHY=0: no sub-communicators per host, so no hierarchical
  // algorithms (Communicator::build_hierarchy).
  bool hierarchy = true;
  // COLL_FAULT_INJECT: a fault this job injects (libcoll/fault_injection.hpp),
  // "" for none; parsed and checked at coll_init.
  std::string fault_inject;
  // COLL_DEBUG_DUMP=S: a wait that has made no progress for S seconds prints
  // this rank's pending operations and whom it waits on, once per wait
  // (Context::dump_waits); 0 (the default): only on SIGUSR1.
  double debug_dump_s = 0;
  // COLL_DUMP_SIGNAL=0: no SIGUSR1 handler (the application's own, or the
  // default action, stays). With 1 (the default) the handler is installed
  // at coll_init where SIGUSR1 has its default action.
  bool dump_signal = true;
};

// Throws coll::Error(COLL_ERR_INVALID_ARG) naming the knob and value.
Config load_config();

// Environment helpers (empty/absent -> fallback).
std::string env_string(const char* name, const char* fallback = "");
// A comma-separated list ("a, b,c"): items trimmed of blanks, empty ones
// dropped; absent -> empty. For per-rank choices (rank r takes item
// r % size): COLL_TCP_ADDR, COLL_RDMA_ADDR, COLL_RDMA_DEVICE.
std::vector<std::string> env_list(const char* name);

}  // namespace coll
