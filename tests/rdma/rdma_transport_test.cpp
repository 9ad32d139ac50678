// The RDMA transport on real verbs: ranks are forked processes (2-4) that
// trade setup data through FileBootstrap. Needs an RDMA device (Soft-RoCE in
// the VM of run-rdma-suite.sh); without one every test is skipped, unless
// COLL_RDMA_TEST_REQUIRE=1, which makes that a failure.
//
// Children report through their exit status and stderr: gtest assertions
// live in the parent only.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "error.hpp"
#include "file_bootstrap.hpp"
#include "forked_ranks.hpp"
#include "transport/hybrid_transport.hpp"
#include "transport/transport.hpp"

namespace coll {
namespace {

using test::deadline_after;
using test::exchange_regions;
using test::expect_all_succeeded;
using test::FileBootstrap;
using test::pattern;
using Clock = std::chrono::steady_clock;

constexpr double kSetupTimeout = 60;  // seconds; TCG emulation is slow
constexpr double kWaitTimeout = 60;

std::unique_ptr<Transport> make_transport(FileBootstrap& boot) {
  TransportOptions options;
  options.timeout_s = kSetupTimeout;
  return make_rdma_transport(boot, options);
}

bool rdma_device_present() {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list != nullptr) ibv_free_device_list(list);
  return count > 0;
}

class RdmaTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (rdma_device_present()) return;
    const char* require = std::getenv("COLL_RDMA_TEST_REQUIRE");
    if (require != nullptr && std::strcmp(require, "1") == 0) {
      FAIL() << "no RDMA device, and COLL_RDMA_TEST_REQUIRE=1";
    }
    GTEST_SKIP() << "no RDMA device (ibv_devices): run tests/rdma/run-rdma-suite.sh";
  }
};

using RankBody = std::function<int(FileBootstrap& boot)>;

std::vector<int> run_ranks(int size, const RankBody& body, double timeout_s = 180) {
  return test::run_forked_ranks(
      "rdma", size, [&](FileBootstrap& boot, const std::string&) { return body(boot); }, timeout_s);
}

// Drives one rank's transport: keeps the completions it polls, stops at the
// first error completion.
class Driver {
 public:
  explicit Driver(Transport& transport) : transport_(transport) {}

  bool progress() {
    Completion completions[16];
    int n = transport_.poll(completions, 16);
    for (int i = 0; i < n; ++i) {
      if (completions[i].status != 0) {
        error = completions[i];
        return false;
      }
      done_.push_back(completions[i].context);
    }
    return true;
  }

  // Waits (bounded) until a word of local memory that peers write holds
  // `expected`.
  bool wait_word(const uint64_t* word, uint64_t expected, int peer) {
    auto deadline = deadline_after(kWaitTimeout);
    uint64_t spins = 0;
    while (__atomic_load_n(word, __ATOMIC_ACQUIRE) != expected) {
      if (!progress()) return report("error completion while waiting for a flag");
      if (++spins % 4096 == 0) {
        transport_.check_peer(peer);
        if (Clock::now() > deadline) {
          std::fprintf(stderr, "rank %d: word from rank %d is %llu, expected %llu\n",
                       test::g_child_rank, peer, static_cast<unsigned long long>(*word),
                       static_cast<unsigned long long>(expected));
          return false;
        }
      }
    }
    return true;
  }

  bool wait_completion(uint64_t context) {
    auto deadline = deadline_after(kWaitTimeout);
    for (;;) {
      for (size_t i = 0; i < done_.size(); ++i) {
        if (done_[i] == context) {
          done_.erase(done_.begin() + static_cast<ptrdiff_t>(i));
          return true;
        }
      }
      if (!progress()) return report("error completion while waiting for a completion");
      if (Clock::now() > deadline) {
        std::fprintf(stderr, "rank %d: no completion for context %llu\n", test::g_child_rank,
                     static_cast<unsigned long long>(context));
        return false;
      }
    }
  }

  Completion error;

 private:
  bool report(const char* what) {
    std::fprintf(stderr, "rank %d: %s: context %llu peer %d status %d\n", test::g_child_rank, what,
                 static_cast<unsigned long long>(error.context), error.peer, error.status);
    return false;
  }

  Transport& transport_;
  std::vector<uint64_t> done_;
};

// Queue pairs are made on first use, and a rank accepts one only from its
// progress calls: tests that want a pair connected before a rank leaves the
// transport's calls (a barrier, an exit) make it here first. Every rank
// writes a word to every other and waits for theirs.
// 0, or 1 after CHILD_CHECK reported why.
int connect_all_pairs(Transport& transport, FileBootstrap& boot) {
  const int n = boot.size();
  std::vector<uint64_t> words(static_cast<size_t>(n), 0);
  MemoryRegion* mr = transport.reg_write(words.data(), words.size() * 8);
  std::vector<RemoteRegion> remote = exchange_regions(boot, mr, kSetupTimeout);
  const uint64_t one = 1;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == boot.rank()) continue;
    const RemoteRegion& r = remote[static_cast<size_t>(peer)];
    CHILD_CHECK(transport.post_write(peer, 0, &one, 8, nullptr, 0,
                                     r.addr + 8 * static_cast<uint64_t>(boot.rank()), r.rkey) == 0,
                "connecting write to rank %d: %s", peer, std::strerror(errno));
  }
  Driver driver(transport);
  for (int peer = 0; peer < n; ++peer)
    if (peer != boot.rank())
      CHILD_CHECK(driver.wait_word(&words[static_cast<size_t>(peer)], 1, peer),
                  "connecting write from rank %d", peer);
  boot.barrier(kSetupTimeout);  // every word is in: nobody writes into them now
  CHILD_CHECK(transport.dereg(mr) == 0, "dereg the connecting words");
  return 0;
}

// Checks peer (bounded) until the check throws: 0 when it said
// COLL_ERR_PEER_LOST, 1 after CHILD_CHECK reported otherwise.
int wait_until_lost(Transport& transport, int peer) {
  auto deadline = Clock::now() + std::chrono::seconds(static_cast<int>(kWaitTimeout));
  for (;;) {
    try {
      transport.check_peer(peer);
    } catch (const Error& e) {
      CHILD_CHECK(e.status() == COLL_ERR_PEER_LOST, "status %d: %s", e.status(), e.what());
      return 0;
    }
    CHILD_CHECK(Clock::now() < deadline, "rank %d is gone but a check on it does not say so",
                peer);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// ---------------------------------------------------------------- data + flag

struct ExchangeCase {
  int ranks;
  const char* knob;  // environment setting for this case, "" for none
  const char* label;
};

class DataThenFlag : public RdmaTransportTest,
                     public ::testing::WithParamInterface<ExchangeCase> {};

// Each rank writes a 16 KiB chunk into every peer's window and, right behind
// it on the same QP, an 8-byte inline flag. A receiver that sees the flag
// checks the whole chunk: the ordering promise. Credits written back keep
// a sender from overwriting a chunk not yet checked.
int data_then_flag_rank(FileBootstrap& boot, const char* knob) {
  if (const char* equals = std::strchr(knob, '=')) {
    setenv(std::string(knob, equals).c_str(), equals + 1, 1);
  }
  constexpr size_t kChunk = 16 * 1024;
  constexpr int kIterations = 40;
  const int me = boot.rank();
  const int n = boot.size();
  const size_t flags_offset = static_cast<size_t>(n) * kChunk;
  const size_t credits_offset = flags_offset + static_cast<size_t>(n) * 8;
  const size_t window_bytes = credits_offset + static_cast<size_t>(n) * 8;

  std::unique_ptr<Transport> transport = make_transport(boot);
  CHILD_CHECK(std::strcmp(transport->name(), "rdma") == 0, "name %s", transport->name());
  CHILD_CHECK(transport->rank() == me && transport->size() == n, "rank/size");
  CHILD_CHECK(transport->needs_local_registration(), "RDMA needs registered sources");
  auto* window = static_cast<uint8_t*>(transport->alloc_window(window_bytes));
  CHILD_CHECK(window != nullptr, "no window");
  CHILD_CHECK(reinterpret_cast<uintptr_t>(window) % static_cast<uintptr_t>(getpagesize()) == 0,
              "window %p not page aligned", static_cast<void*>(window));
  for (size_t i = 0; i < window_bytes; ++i) CHILD_CHECK(window[i] == 0, "window not zeroed");

  MemoryRegion* window_mr = transport->reg_write(window, window_bytes);
  CHILD_CHECK(window_mr->addr == window && window_mr->length == window_bytes, "window region");
  std::vector<uint8_t> source(kChunk);
  MemoryRegion* source_mr = transport->reg_write(source.data(), source.size());
  std::vector<RemoteRegion> remote = exchange_regions(boot, window_mr, kSetupTimeout);
  auto* flags = reinterpret_cast<uint64_t*>(window + flags_offset);
  auto* credits = reinterpret_cast<uint64_t*>(window + credits_offset);
  Driver driver(*transport);

  for (int iteration = 1; iteration <= kIterations; ++iteration) {
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      CHILD_CHECK(driver.wait_word(&credits[peer], static_cast<uint64_t>(iteration - 1), peer),
                  "credit from rank %d for iteration %d", peer, iteration - 1);
    }
    for (size_t i = 0; i < kChunk; ++i) source[i] = pattern(me, iteration, i);
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      const RemoteRegion& target = remote[static_cast<size_t>(peer)];
      uint64_t context = static_cast<uint64_t>(iteration) * 1000 + static_cast<uint64_t>(peer);
      CHILD_CHECK(
          transport->post_write(peer, context, source.data(), kChunk, source_mr, kWriteSignaled,
                                target.addr + static_cast<uint64_t>(me) * kChunk, target.rkey) == 0,
          "data write to %d: %s", peer, std::strerror(errno));
      uint64_t flag = static_cast<uint64_t>(iteration);  // inline: the stack copy is enough
      CHILD_CHECK(transport->post_write(peer, 0, &flag, sizeof flag, nullptr, 0,
                                        target.addr + flags_offset + static_cast<uint64_t>(me) * 8,
                                        target.rkey) == 0,
                  "flag write to %d: %s", peer, std::strerror(errno));
    }
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      CHILD_CHECK(driver.wait_word(&flags[peer], static_cast<uint64_t>(iteration), peer),
                  "flag from rank %d, iteration %d", peer, iteration);
      const uint8_t* chunk = window + static_cast<size_t>(peer) * kChunk;
      for (size_t i = 0; i < kChunk; ++i) {
        CHILD_CHECK(chunk[i] == pattern(peer, iteration, i),
                    "iteration %d: byte %zu from rank %d is %u, expected %u: data behind its flag",
                    iteration, i, peer, chunk[i], pattern(peer, iteration, i));
      }
      uint64_t credit = static_cast<uint64_t>(iteration);
      CHILD_CHECK(transport->post_write(peer, 0, &credit, sizeof credit, nullptr, 0,
                                        remote[static_cast<size_t>(peer)].addr + credits_offset +
                                            static_cast<uint64_t>(me) * 8,
                                        remote[static_cast<size_t>(peer)].rkey) == 0,
                  "credit write to %d: %s", peer, std::strerror(errno));
    }
    // The source changes next iteration: its writes must have completed.
    for (int peer = 0; peer < n; ++peer) {
      if (peer == me) continue;
      CHILD_CHECK(driver.wait_completion(static_cast<uint64_t>(iteration) * 1000 +
                                         static_cast<uint64_t>(peer)),
                  "completion of the data write to rank %d", peer);
    }
  }
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    CHILD_CHECK(driver.wait_word(&credits[peer], kIterations, peer), "last credit");
  }
  boot.barrier(kSetupTimeout);  // nobody disconnects while others still write
  CHILD_CHECK(transport->dereg(source_mr) == 0, "dereg source: %s", std::strerror(errno));
  CHILD_CHECK(transport->dereg(window_mr) == 0, "dereg window: %s", std::strerror(errno));
  CHILD_CHECK(transport->dereg(window_mr) == -1 && errno == EINVAL, "second dereg must fail");
  return 0;
}

TEST_P(DataThenFlag, FlagIsPlacedAfterItsData) {
  const ExchangeCase& c = GetParam();
  expect_all_succeeded(
      run_ranks(c.ranks, [&](FileBootstrap& boot) { return data_then_flag_rank(boot, c.knob); }));
}

INSTANTIATE_TEST_SUITE_P(
    Ranks, DataThenFlag,
    ::testing::Values(ExchangeCase{2, "", "np2"}, ExchangeCase{3, "", "np3"},
                      ExchangeCase{4, "", "np4"},
                      ExchangeCase{3, "COLL_RDMA_SAFE_ORDERING=1", "np3_safe_ordering"},
                      ExchangeCase{3, "COLL_RDMA_SQ_DEPTH=4", "np3_sq_depth_4"}),
    [](const ::testing::TestParamInfo<ExchangeCase>& info) {
      return std::string(info.param.label);
    });

// ---------------------------------------------------------------- a long burst

// Far more unsignaled writes than the send queue holds: the transport must
// signal some itself and wait for room. All go to one word; in-order
// placement leaves the last value there.
TEST_F(RdmaTransportTest, BurstLongerThanTheSendQueueLandsInOrder) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot) {
    constexpr uint64_t kWrites = 2000;
    constexpr size_t kWindow = 4096;
    std::unique_ptr<Transport> transport = make_transport(boot);
    auto* words = static_cast<uint64_t*>(transport->alloc_window(kWindow));
    MemoryRegion* window_mr = transport->reg_write(words, kWindow);
    std::vector<RemoteRegion> remote = exchange_regions(boot, window_mr, kSetupTimeout);
    Driver driver(*transport);
    const int me = boot.rank();
    const int peer = 1 - me;
    const RemoteRegion& target = remote[static_cast<size_t>(peer)];
    if (me == 0) {
      for (uint64_t value = 1; value <= kWrites; ++value) {
        CHILD_CHECK(transport->post_write(peer, 0, &value, sizeof value, nullptr, 0, target.addr,
                                          target.rkey) == 0,
                    "write %llu: %s", static_cast<unsigned long long>(value), std::strerror(errno));
        CHILD_CHECK(driver.progress(), "error completion during the burst");
      }
      uint64_t done = 1;
      CHILD_CHECK(transport->post_write(peer, 0, &done, sizeof done, nullptr, 0, target.addr + 8,
                                        target.rkey) == 0,
                  "flag: %s", std::strerror(errno));
      CHILD_CHECK(driver.wait_word(&words[2], 1, peer), "ack from rank 1");
    } else {
      CHILD_CHECK(driver.wait_word(&words[1], 1, peer), "flag from rank 0");
      CHILD_CHECK(words[0] == kWrites, "last value %llu, expected %llu",
                  static_cast<unsigned long long>(words[0]),
                  static_cast<unsigned long long>(kWrites));
      uint64_t ack = 1;
      CHILD_CHECK(transport->post_write(peer, 0, &ack, sizeof ack, nullptr, 0, target.addr + 16,
                                        target.rkey) == 0,
                  "ack: %s", std::strerror(errno));
    }
    boot.barrier(kSetupTimeout);
    return 0;
  }));
}

// ---------------------------------------------------------------- arguments

TEST_F(RdmaTransportTest, RejectsBadArgumentsAndWritesToItself) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot) {
    constexpr size_t kWindow = 8192;
    std::unique_ptr<Transport> transport = make_transport(boot);
    auto* window = static_cast<uint8_t*>(transport->alloc_window(kWindow));
    MemoryRegion* window_mr = transport->reg_write(window, kWindow);
    const int me = boot.rank();
    const int peer = 1 - me;
    std::vector<RemoteRegion> remote = exchange_regions(boot, window_mr, kSetupTimeout);
    std::vector<uint8_t> big(4096, 1);
    // Too large to go inline, and not registered.
    errno = 0;
    CHILD_CHECK(transport->post_write(peer, 0, big.data(), big.size(), nullptr, 0,
                                      remote[static_cast<size_t>(peer)].addr,
                                      remote[static_cast<size_t>(peer)].rkey) == -1 &&
                    errno == EINVAL,
                "unregistered 4 KiB write must fail with EINVAL");
    errno = 0;
    CHILD_CHECK(
        transport->post_write(7, 0, big.data(), 8, nullptr, 0, 0, 0) == -1 && errno == EINVAL,
        "write to rank 7 of 2 must fail with EINVAL");
    try {
      transport->reg_write(big.data(), 0);
      CHILD_CHECK(false, "registering 0 bytes must throw");
    } catch (const Error& e) {
      CHILD_CHECK(e.status() == COLL_ERR_INVALID_ARG, "status %d", e.status());
    }
    // A rank may address itself: a signaled write to its own window.
    uint64_t value = 0x1234567890abcdefULL;
    CHILD_CHECK(
        transport->post_write(me, 99, &value, sizeof value, nullptr, kWriteSignaled,
                              reinterpret_cast<uint64_t>(window) + 64, window_mr->rkey) == 0,
        "self write: %s", std::strerror(errno));
    Driver driver(*transport);
    CHILD_CHECK(driver.wait_completion(99), "completion of the self write");
    uint64_t landed = 0;
    std::memcpy(&landed, window + 64, sizeof landed);
    CHILD_CHECK(landed == value, "self write landed %llx", static_cast<unsigned long long>(landed));
    boot.barrier(kSetupTimeout);
    return 0;
  }));
}

// ---------------------------------------------------------------- dereg, then write

// After the target deregisters, a write with the old rkey fails with an error
// completion (remote access error) and never lands; the writer's transport is
// failed from then on.
TEST_F(RdmaTransportTest, WriteAfterDeregFailsAndNeverLands) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot) {
    std::unique_ptr<Transport> transport = make_transport(boot);
    const int me = boot.rank();
    std::vector<uint8_t> buffer(4096, me == 1 ? 0xab : 0xcd);
    MemoryRegion* mr = transport->reg_write(buffer.data(), buffer.size());
    std::vector<RemoteRegion> remote = exchange_regions(boot, mr, kSetupTimeout);
    // Rank 1 waits in the barrier below, outside the transport: the QP must
    // be there before, or rank 0's first write would wait for it to accept.
    if (connect_all_pairs(*transport, boot) != 0) return 1;
    if (me == 1) CHILD_CHECK(transport->dereg(mr) == 0, "dereg: %s", std::strerror(errno));
    boot.barrier(kSetupTimeout);  // rank 1's region is gone
    if (me == 0) {
      const RemoteRegion& stale = remote[1];
      CHILD_CHECK(transport->post_write(1, 77, buffer.data(), 256, mr, kWriteSignaled, stale.addr,
                                        stale.rkey) == 0,
                  "post: %s", std::strerror(errno));
      Completion completion{};
      auto deadline = Clock::now() + std::chrono::seconds(static_cast<int>(kWaitTimeout));
      int n = 0;
      while ((n = transport->poll(&completion, 1)) == 0 && Clock::now() < deadline) {
      }
      CHILD_CHECK(n == 1, "no completion for the write");
      CHILD_CHECK(completion.status == COLL_ERR_TRANSPORT && completion.context == 77 &&
                      completion.peer == 1,
                  "completion status %d context %llu peer %d", completion.status,
                  static_cast<unsigned long long>(completion.context), completion.peer);
      // Sticky: later calls report the failure too.
      CHILD_CHECK(
          transport->post_write(1, 78, buffer.data(), 8, mr, 0, stale.addr, stale.rkey) == -1,
          "a post after the failure must fail");
      CHILD_CHECK(transport->poll(&completion, 1) == 1 && completion.status == COLL_ERR_TRANSPORT,
                  "poll after the failure must report it");
      try {
        transport->check_peer(1);
        CHILD_CHECK(false, "check_peer after the failure must throw");
      } catch (const Error& e) {
        CHILD_CHECK(e.status() == COLL_ERR_TRANSPORT, "status %d", e.status());
        CHILD_CHECK(std::strstr(e.what(), "remote access error") != nullptr, "message: %s",
                    e.what());
      }
      CHILD_CHECK(transport->dereg(mr) == 0, "dereg: %s", std::strerror(errno));
    }
    boot.barrier(kSetupTimeout);  // rank 0's write has failed
    if (me == 1) {
      for (size_t i = 0; i < buffer.size(); ++i) {
        CHILD_CHECK(buffer[i] == 0xab, "byte %zu changed to %x after dereg", i, buffer[i]);
      }
    }
    return 0;
  }));
}

// ---------------------------------------------------------------- shm+rdma

// One rkey serves both paths: ranks 0 and 1 on one (pretended) host, rank 2
// on another. Rank 0 registers a window and a user buffer once; rank 1
// writes into both through shared memory (a copy, and process_vm_writev),
// rank 2 through the NIC, each with the rkeys rank 0 traded, and only rank
// 2's bytes count as network traffic. A closed region refuses rank 1
// (ESTALE) and a deregistered one refuses both: rank 1 at post (EACCES),
// rank 2 by an error completion; neither write lands.
TEST_F(RdmaTransportTest, ShmRdmaOneRkeyServesTheHostAndTheNetwork) {
  expect_all_succeeded(run_ranks(3, [](FileBootstrap& boot) {
    TransportOptions options;
    options.timeout_s = kSetupTimeout;
    const std::vector<std::string> hosts{"host-a", "host-a", "host-b"};
    std::unique_ptr<Transport> transport = make_shm_rdma_transport(boot, options, hosts);
    const int me = boot.rank();
    CHILD_CHECK(std::strcmp(transport->name(), "shm+rdma") == 0, "name %s", transport->name());
    CHILD_CHECK(transport->needs_local_registration(), "the rdma half needs registered sources");
    // Rank 0: a segment mapped (rank 1), and no queue pair before a write.
    if (me == 0)
      CHILD_CHECK(transport->connections() == 1, "%d connections", transport->connections());
    for (int peer = 0; peer < 3; ++peer)
      CHILD_CHECK(transport->line_writes(peer) == ((peer < 2) == (me < 2)),
                  "line messages to rank %d: on the host only", peer);
    constexpr size_t kWindow = 8192, kBuffer = 5000;
    auto* window = static_cast<uint8_t*>(transport->alloc_window(kWindow));
    std::vector<uint8_t> buffer(kBuffer, 0);
    MemoryRegion* window_mr = transport->reg_write(window, kWindow);
    MemoryRegion* buffer_mr = transport->reg_write(buffer.data(), buffer.size());
    std::vector<RemoteRegion> windows = exchange_regions(boot, window_mr, kSetupTimeout);
    std::vector<RemoteRegion> buffers = exchange_regions(boot, buffer_mr, kSetupTimeout);
    std::vector<uint8_t> source(kBuffer);
    for (size_t i = 0; i < source.size(); ++i) source[i] = pattern(me, 1, i);
    MemoryRegion* source_mr = transport->reg_write(source.data(), source.size());
    Driver driver(*transport);
    const RemoteRegion& w0 = windows[0];
    const RemoteRegion& b0 = buffers[0];
    // Each writer: 777 bytes at offset 1024 * me of the window, then a
    // flag; its whole source into its half of the buffer.
    auto write_both = [&](uint64_t context) {
      const uint64_t at = 1024 * static_cast<uint64_t>(me);
      const size_t half = kBuffer / 2;
      if (transport->post_write(0, context, source.data(), 777, source_mr, kWriteSignaled,
                                w0.addr + at, w0.rkey) != 0)
        return false;
      if (transport->post_write(0, context + 1, source.data(), half, source_mr, kWriteSignaled,
                                b0.addr + half * static_cast<uint64_t>(me - 1), b0.rkey) != 0)
        return false;
      const uint64_t flag = 1;
      return transport->post_write(0, 0, &flag, 8, nullptr, 0, w0.addr + 4096 + 8 * me,
                                   w0.rkey) == 0;
    };
    if (me > 0) {
      CHILD_CHECK(write_both(10), "writes from rank %d: %s", me, std::strerror(errno));
      CHILD_CHECK(driver.wait_completion(10) && driver.wait_completion(11), "completions");
      const uint64_t crossed = transport->network_bytes();
      if (me == 1) CHILD_CHECK(crossed == 0, "rank 1 sent %llu bytes over the network",
                               static_cast<unsigned long long>(crossed));
      if (me == 2) CHILD_CHECK(crossed == 777 + kBuffer / 2 + 8, "rank 2 sent %llu bytes",
                               static_cast<unsigned long long>(crossed));
    } else {
      auto* flags = reinterpret_cast<uint64_t*>(window + 4096);
      for (int peer = 1; peer <= 2; ++peer) {
        CHILD_CHECK(driver.wait_word(&flags[peer], 1, peer), "flag of rank %d", peer);
        for (size_t i = 0; i < 777; ++i)
          CHILD_CHECK(window[1024 * peer + i] == pattern(peer, 1, i), "window byte %zu of rank %d",
                      i, peer);
        for (size_t i = 0; i < kBuffer / 2; ++i)
          CHILD_CHECK(buffer[kBuffer / 2 * size_t(peer - 1) + i] == pattern(peer, 1, i),
                      "buffer byte %zu of rank %d", i, peer);
      }
      std::memset(window, 0, kWindow);
      std::fill(buffer.begin(), buffer.end(), 0);
      transport->set_writable(buffer_mr, false);
    }
    boot.barrier(kSetupTimeout);  // rank 0's buffer is closed
    if (me == 1) {
      CHILD_CHECK(transport->post_write(0, 20, source.data(), 100, source_mr, 0, b0.addr,
                                        b0.rkey) == -1 && errno == ESTALE,
                  "a write into a closed region must be refused with ESTALE: %s",
                  std::strerror(errno));
    }
    boot.barrier(kSetupTimeout);
    if (me == 0) {
      CHILD_CHECK(transport->dereg(buffer_mr) == 0, "dereg: %s", std::strerror(errno));
      CHILD_CHECK(transport->dereg(buffer_mr) == -1 && errno == EINVAL, "a second dereg must fail");
    }
    boot.barrier(kSetupTimeout);  // rank 0's buffer is deregistered
    if (me == 1) {
      CHILD_CHECK(transport->post_write(0, 30, source.data(), 100, source_mr, 0, b0.addr,
                                        b0.rkey) == -1 && errno == EACCES,
                  "a stale rkey must be refused on the host: %s", std::strerror(errno));
    }
    if (me == 2) {
      CHILD_CHECK(transport->post_write(0, 31, source.data(), 100, source_mr, kWriteSignaled,
                                        b0.addr, b0.rkey) == 0,
                  "post: %s", std::strerror(errno));
      Completion completion{};
      auto deadline = Clock::now() + std::chrono::seconds(static_cast<int>(kWaitTimeout));
      int n = 0;
      while ((n = transport->poll(&completion, 1)) == 0 && Clock::now() < deadline) {
      }
      CHILD_CHECK(n == 1 && completion.status == COLL_ERR_TRANSPORT,
                  "a stale rkey across hosts must fail its completion (n %d, status %d)", n,
                  completion.status);
    }
    boot.barrier(kSetupTimeout);  // the refused writes are over
    if (me == 0) {
      for (size_t i = 0; i < kBuffer; ++i)
        CHILD_CHECK(buffer[i] == 0, "byte %zu of a closed or deregistered buffer was written", i);
    }
    CHILD_CHECK(transport->dereg(source_mr) == 0, "dereg source");
    CHILD_CHECK(transport->dereg(window_mr) == 0, "dereg window");
    transport->free_window(window, kWindow);
    return 0;
  }));
}

// ---------------------------------------------------------------- windows

// Windows come and go (alloc_window / free_window): two windows take writes
// from the peer; one is dereg'ed, freed and allocated again - zeroed;
// misuse of free_window is refused; the new window takes writes, and a
// write with the old rkey fails with a remote access error and lands
// nowhere (mmap may well give the new window the old address); a hundred
// cycles with registration leave no descriptor behind and unmap each.
TEST_F(RdmaTransportTest, WindowsFreedAndAllocatedAgainAreZeroedAndOldRkeysFail) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot) {
    constexpr size_t kSmall = 3 * 4096 + 100, kLarge = 64 * 1024 + 8, kFlag = 32 * 1024;
    const size_t page = static_cast<size_t>(getpagesize());
    const int me = boot.rank(), peer = 1 - me;
    std::unique_ptr<Transport> transport = make_transport(boot);
    auto* small = static_cast<uint8_t*>(transport->alloc_window(kSmall));
    auto* large = static_cast<uint8_t*>(transport->alloc_window(kLarge));
    for (uint8_t* w : {small, large}) {
      CHILD_CHECK(reinterpret_cast<uintptr_t>(w) % page == 0, "window %p not page aligned",
                  static_cast<void*>(w));
    }
    for (size_t i = 0; i < kSmall; ++i) CHILD_CHECK(small[i] == 0, "small window not zeroed");
    for (size_t i = 0; i < kLarge; ++i) CHILD_CHECK(large[i] == 0, "large window not zeroed");
    MemoryRegion* small_mr = transport->reg_write(small, kSmall);
    MemoryRegion* large_mr = transport->reg_write(large, kLarge);
    std::vector<uint8_t> source(4096);
    MemoryRegion* source_mr = transport->reg_write(source.data(), source.size());
    std::vector<RemoteRegion> remote_small = exchange_regions(boot, small_mr, kSetupTimeout);
    std::vector<RemoteRegion> remote_large = exchange_regions(boot, large_mr, kSetupTimeout);
    Driver driver(*transport);

    // Round `round`: 4 KiB into both of the peer's windows, then a flag.
    auto write_round = [&](int round, const RemoteRegion& s, const RemoteRegion& l) {
      for (size_t i = 0; i < source.size(); ++i) source[i] = pattern(me, round, i);
      uint64_t context = static_cast<uint64_t>(round) * 10;
      if (transport->post_write(peer, context, source.data(), 4096, source_mr, kWriteSignaled,
                                s.addr + 4096, s.rkey) != 0 ||
          transport->post_write(peer, context + 1, source.data(), 4096, source_mr,
                                kWriteSignaled, l.addr + 8192, l.rkey) != 0) {
        return false;
      }
      uint64_t flag = static_cast<uint64_t>(round);
      return transport->post_write(peer, 0, &flag, 8, nullptr, 0, l.addr + kFlag, l.rkey) == 0 &&
             driver.wait_completion(context) && driver.wait_completion(context + 1);
    };
    auto check_round = [&](int round, const uint8_t* s, const uint8_t* l) {
      if (!driver.wait_word(reinterpret_cast<const uint64_t*>(l + kFlag),
                            static_cast<uint64_t>(round), peer)) {
        return false;
      }
      for (size_t i = 0; i < 4096; ++i) {
        if (s[4096 + i] != pattern(peer, round, i) || l[8192 + i] != pattern(peer, round, i)) {
          std::fprintf(stderr, "rank %d: round %d: byte %zu from rank %d is wrong\n", me, round,
                       i, peer);
          return false;
        }
      }
      return true;
    };
    CHILD_CHECK(write_round(1, remote_small[static_cast<size_t>(peer)],
                            remote_large[static_cast<size_t>(peer)]),
                "round 1 writes: %s", std::strerror(errno));
    CHILD_CHECK(check_round(1, small, large), "round 1 data");
    boot.barrier(kSetupTimeout);  // nobody writes into the small windows any more

    auto refused = [&](void* addr, size_t bytes) {
      try {
        transport->free_window(addr, bytes);
      } catch (const Error& e) {
        return e.status() == COLL_ERR_INVALID_ARG;
      }
      return false;
    };
    CHILD_CHECK(refused(small, kSmall), "freeing a window that is still registered");
    CHILD_CHECK(refused(large + page, 4096), "freeing the inside of a window");
    CHILD_CHECK(small[4096] == pattern(peer, 1, 0), "a refused free changed the window");
    const RemoteRegion stale = remote_small[static_cast<size_t>(peer)];  // the peer's old one
    CHILD_CHECK(transport->dereg(small_mr) == 0, "dereg: %s", std::strerror(errno));
    transport->free_window(small, kSmall);
    CHILD_CHECK(refused(small, kSmall), "a second free");
    small = static_cast<uint8_t*>(transport->alloc_window(kSmall));
    for (size_t i = 0; i < kSmall; ++i) {
      CHILD_CHECK(small[i] == 0, "the window allocated again is not zeroed (byte %zu)", i);
    }
    small_mr = transport->reg_write(small, kSmall);
    remote_small = exchange_regions(boot, small_mr, kSetupTimeout);
    CHILD_CHECK(write_round(2, remote_small[static_cast<size_t>(peer)],
                            remote_large[static_cast<size_t>(peer)]),
                "round 2 writes: %s", std::strerror(errno));
    CHILD_CHECK(check_round(2, small, large), "round 2 data");
    boot.barrier(kSetupTimeout);

    // A hundred more cycles, alone: registered, dereg'ed, freed, unmapped.
    const int fds_before = [] {
      int count = 0;
      for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        (void)entry;
        ++count;
      }
      return count;
    }();
    for (int i = 0; i < 100; ++i) {
      const size_t bytes = static_cast<size_t>(i % 5 + 1) * 4096 + 1;
      auto* w = static_cast<uint8_t*>(transport->alloc_window(bytes));
      CHILD_CHECK(w[0] == 0 && w[bytes - 1] == 0, "cycle %d: not zeroed", i);
      w[0] = w[bytes - 1] = 0xff;
      MemoryRegion* mr = transport->reg_write(w, bytes);
      CHILD_CHECK(transport->dereg(mr) == 0, "cycle %d: dereg: %s", i, std::strerror(errno));
      transport->free_window(w, bytes);
      unsigned char vec[8];
      CHILD_CHECK(mincore(w, bytes, vec) != 0 && errno == ENOMEM, "cycle %d: still mapped", i);
    }
    int fds_after = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
      (void)entry;
      ++fds_after;
    }
    CHILD_CHECK(fds_after == fds_before, "descriptors: %d before, %d after", fds_before, fds_after);

    // Last, as it fails rank 0's transport: rank 0 writes with the old
    // {addr, rkey} of rank 1's first small window.
    const std::vector<uint8_t> before(small, small + kSmall);
    boot.barrier(kSetupTimeout);
    if (me == 0) {
      std::memset(source.data(), 0xee, source.size());
      CHILD_CHECK(transport->post_write(1, 77, source.data(), 4096, source_mr, kWriteSignaled,
                                        stale.addr + 4096, stale.rkey) == 0,
                  "post: %s", std::strerror(errno));
      CHILD_CHECK(!driver.wait_completion(77), "a write with a freed window's rkey completed");
      CHILD_CHECK(driver.error.status == COLL_ERR_TRANSPORT && driver.error.peer == 1,
                  "error completion: status %d peer %d", driver.error.status, driver.error.peer);
    }
    boot.barrier(kSetupTimeout);  // rank 0's write has failed
    if (me == 1) {
      CHILD_CHECK(std::memcmp(before.data(), small, kSmall) == 0,
                  "the stale write landed in the new window (old %p, new %p)",
                  reinterpret_cast<void*>(stale.addr), static_cast<void*>(small));
    }
    return 0;
  }));
}

// ---------------------------------------------------------------- locked memory

// Drops CAP_IPC_LOCK (root registers past RLIMIT_MEMLOCK with it) from this
// process.
bool drop_ipc_lock_capability() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  const unsigned index = CAP_IPC_LOCK / 32;
  const uint32_t bit = 1u << (CAP_IPC_LOCK % 32);
  data[index].effective &= ~bit;
  data[index].permitted &= ~bit;
  data[index].inheritable &= ~bit;
  return syscall(SYS_capset, &header, data) == 0;
}

TEST_F(RdmaTransportTest, RegistrationOverTheLockedMemoryLimitNamesUlimit) {
  expect_all_succeeded(run_ranks(1, [](FileBootstrap& boot) {
    CHILD_CHECK(drop_ipc_lock_capability(), "capset: %s", std::strerror(errno));
    rlimit small{64 * 1024, 64 * 1024};
    CHILD_CHECK(setrlimit(RLIMIT_MEMLOCK, &small) == 0, "setrlimit: %s", std::strerror(errno));
    std::unique_ptr<Transport> transport = make_transport(boot);
    std::vector<uint8_t> fits(4096);
    MemoryRegion* small_mr = transport->reg_write(fits.data(), fits.size());
    std::vector<uint8_t> too_big(4 << 20);
    try {
      transport->reg_write(too_big.data(), too_big.size());
      CHILD_CHECK(false, "registering 4 MiB under a 64 KiB limit succeeded");
    } catch (const Error& e) {
      CHILD_CHECK(e.status() == COLL_ERR_NO_RESOURCES, "status %d: %s", e.status(), e.what());
      CHILD_CHECK(std::strstr(e.what(), "ulimit -l") != nullptr, "message: %s", e.what());
      CHILD_CHECK(std::strstr(e.what(), "RLIMIT_MEMLOCK") != nullptr, "message: %s", e.what());
      CHILD_CHECK(std::strstr(e.what(), "65536") != nullptr, "message: %s", e.what());
    }
    CHILD_CHECK(transport->dereg(small_mr) == 0, "dereg: %s", std::strerror(errno));
    return 0;
  }));
}

// ---------------------------------------------------------------- windows registered in part

// A window of 3 partners laid out as the Channel lays one out: a page of
// headers (eager), then each partner's slot area of 2 pages.
constexpr size_t kHeaderBytes = 4096, kAreaBytes = 8192;
constexpr size_t kLazyWindowBytes = kHeaderBytes + 3 * kAreaBytes;

uint64_t area_of(const RemoteRegion& window, int writer) {
  return window.addr + kHeaderBytes + static_cast<uint64_t>(writer) * kAreaBytes;
}

// writer's data into its area of owner's window (prepare_write first, as
// Channel::commit_slot does), then a flag in the headers under the window's
// own rkey. 0, or 1 after CHILD_CHECK reported why.
int write_into_area(Transport& t, int owner, const RemoteRegion& window, uint64_t flag) {
  const int me = t.rank();
  std::vector<uint8_t> data(5000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = pattern(me, owner, i);
  MemoryRegion* source = t.reg_write(data.data(), data.size());
  const uint64_t area = area_of(window, me), at = area + 100;
  CHILD_CHECK(t.prepare_write(owner, at, data.size(), window.rkey, area, kAreaBytes) == 0,
              "prepare_write to rank %d: %s", owner, std::strerror(errno));
  // Again, further into the area: answered from what this rank knows.
  CHILD_CHECK(t.prepare_write(owner, area, kAreaBytes, window.rkey, area, kAreaBytes) == 0,
              "a second prepare_write to rank %d: %s", owner, std::strerror(errno));
  CHILD_CHECK(t.post_write(owner, 9, data.data(), data.size(), source, kWriteSignaled, at,
                           window.rkey) == 0,
              "data to rank %d: %s", owner, std::strerror(errno));
  CHILD_CHECK(t.post_write(owner, 0, &flag, 8, nullptr, 0, window.addr + 8 * me, window.rkey) == 0,
              "flag to rank %d: %s", owner, std::strerror(errno));
  Driver driver(t);
  CHILD_CHECK(driver.wait_completion(9), "the data's completion at rank %d", owner);
  CHILD_CHECK(t.dereg(source) == 0, "dereg the source");
  return 0;
}

// At the owner: writer's flag (write_into_area), then its data, exact.
// 0, or 1 after CHILD_CHECK reported why.
int check_area(Driver& driver, uint8_t* window, int writer) {
  CHILD_CHECK(driver.wait_word(reinterpret_cast<uint64_t*>(window) + writer,
                               10 + static_cast<uint64_t>(writer), writer),
              "the flag of rank %d", writer);
  const uint8_t* data = window + kHeaderBytes + static_cast<size_t>(writer) * kAreaBytes + 100;
  for (size_t i = 0; i < 5000; ++i)
    CHILD_CHECK(data[i] == pattern(writer, 0, i), "byte %zu from rank %d", i, writer);
  return 0;
}

// dereg gives back every registration the window's writers asked for:
// what is pinned is as it was before the window (regs, pinned).
int release_window(Transport& t, MemoryRegion* mr, void* window, uint64_t regs, uint64_t pinned) {
  CHILD_CHECK(t.dereg(mr) == 0, "dereg: %s", std::strerror(errno));
  CHILD_CHECK(t.internal_registrations() == regs && t.pinned_bytes() == pinned,
              "after dereg: %llu registrations, %llu bytes",
              static_cast<unsigned long long>(t.internal_registrations()),
              static_cast<unsigned long long>(t.pinned_bytes()));
  t.free_window(window, kLazyWindowBytes);
  return 0;
}

// Only the headers are pinned when a window is registered; a writer's slot
// area when that writer first prepares a write there (one registration per
// window and writer, made by the owner on the writer's request); dereg
// gives them all back. Rank 1 writes into rank 0's window, then rank 2;
// nobody writes into the others' windows, which keep their headers only.
TEST_F(RdmaTransportTest, WindowsArePinnedForTheirHeadersAndTheSlotsWrittenTo) {
  expect_all_succeeded(run_ranks(3, [](FileBootstrap& boot) {
    std::unique_ptr<Transport> t = make_transport(boot);
    const int me = boot.rank();
    const uint64_t regs = t->internal_registrations(), pinned = t->pinned_bytes();
    CHILD_CHECK(regs == 1 && pinned > 0, "the control block: %llu registrations, %llu bytes",
                static_cast<unsigned long long>(regs), static_cast<unsigned long long>(pinned));
    auto* window = static_cast<uint8_t*>(t->alloc_window(kLazyWindowBytes, kHeaderBytes));
    MemoryRegion* mr = t->reg_write(window, kLazyWindowBytes);
    CHILD_CHECK(mr->length == kLazyWindowBytes, "the region spans %zu bytes", mr->length);
    CHILD_CHECK(t->pinned_bytes() == pinned + kHeaderBytes && t->internal_registrations() == regs,
                "a window pins %llu bytes in %llu registrations of its own, not its headers",
                static_cast<unsigned long long>(t->pinned_bytes() - pinned),
                static_cast<unsigned long long>(t->internal_registrations() - regs));
    const std::vector<RemoteRegion> remote = exchange_regions(boot, mr, kSetupTimeout);
    Driver driver(*t);
    auto expect_pinned = [&](uint64_t areas) {
      return t->internal_registrations() == regs + areas &&
             t->pinned_bytes() == pinned + kHeaderBytes + areas * kAreaBytes;
    };
    for (int writer : {1, 2}) {
      if (me == writer && write_into_area(*t, 0, remote[0], 10 + writer) != 0) return 1;
      if (me == 0) {
        if (check_area(driver, window, writer) != 0) return 1;
        CHILD_CHECK(expect_pinned(static_cast<uint64_t>(writer)),
                    "after rank %d wrote: %llu registrations, %llu bytes pinned beyond the control "
                    "block",
                    writer, static_cast<unsigned long long>(t->internal_registrations() - regs),
                    static_cast<unsigned long long>(t->pinned_bytes() - pinned));
      }
      boot.barrier(kSetupTimeout);
    }
    if (me != 0) CHILD_CHECK(expect_pinned(0), "rank %d's window was written to", me);
    return release_window(*t, mr, window, regs, pinned);
  }));
}

// shm+rdma: a writer on the host commits its slots through its mapping
// (the shm half), one across hosts has the owner register them (the rdma
// half): rank 0's window, written by rank 1 (same host) and rank 2 (the
// other host), pins its headers and rank 2's area only.
TEST_F(RdmaTransportTest, ShmRdmaWindowsPinOnlyTheSlotsOfWritersAcrossHosts) {
  expect_all_succeeded(run_ranks(3, [](FileBootstrap& boot) {
    TransportOptions options;
    options.timeout_s = kSetupTimeout;
    const std::vector<std::string> hosts{"host-a", "host-a", "host-b"};
    std::unique_ptr<Transport> t = make_shm_rdma_transport(boot, options, hosts);
    const int me = boot.rank();
    const uint64_t regs = t->internal_registrations(), pinned = t->pinned_bytes();
    auto* window = static_cast<uint8_t*>(t->alloc_window(kLazyWindowBytes, kHeaderBytes));
    MemoryRegion* mr = t->reg_write(window, kLazyWindowBytes);
    const std::vector<RemoteRegion> remote = exchange_regions(boot, mr, kSetupTimeout);
    if (me > 0 && write_into_area(*t, 0, remote[0], 10 + static_cast<uint64_t>(me)) != 0) return 1;
    if (me == 0) {
      Driver driver(*t);
      for (int writer : {1, 2})
        if (check_area(driver, window, writer) != 0) return 1;
      CHILD_CHECK(t->internal_registrations() == regs + 1 &&
                      t->pinned_bytes() == pinned + kHeaderBytes + kAreaBytes,
                  "%llu registrations and %llu bytes pinned beyond the control block: the "
                  "headers and rank 2's slots expected",
                  static_cast<unsigned long long>(t->internal_registrations() - regs),
                  static_cast<unsigned long long>(t->pinned_bytes() - pinned));
    }
    boot.barrier(kSetupTimeout);
    return release_window(*t, mr, window, regs, pinned);
  }));
}

// A slot area that the owner cannot pin (RLIMIT_MEMLOCK, unprivileged):
// the writer's prepare_write fails with ENOMEM, the owner's transport with
// COLL_ERR_NO_RESOURCES naming the limit. Neither hangs.
TEST_F(RdmaTransportTest, ASlotAreaOverTheOwnersLockedMemoryLimitFailsBothSides) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot) {
    constexpr size_t kBigArea = 4 << 20;
    const int me = boot.rank();
    if (me == 0) {
      CHILD_CHECK(drop_ipc_lock_capability(), "capset: %s", std::strerror(errno));
      rlimit small{256 * 1024, 256 * 1024};
      CHILD_CHECK(setrlimit(RLIMIT_MEMLOCK, &small) == 0, "setrlimit: %s", std::strerror(errno));
    }
    std::unique_ptr<Transport> t = make_transport(boot);
    void* window = t->alloc_window(kHeaderBytes + 2 * kBigArea, kHeaderBytes);
    MemoryRegion* mr = t->reg_write(window, kHeaderBytes + 2 * kBigArea);
    const std::vector<RemoteRegion> remote = exchange_regions(boot, mr, kSetupTimeout);
    if (me == 1) {
      const uint64_t area = remote[0].addr + kHeaderBytes + kBigArea;
      CHILD_CHECK(
          t->prepare_write(0, area, 4096, remote[0].rkey, area, kBigArea) == -1 && errno == ENOMEM,
          "prepare_write into an area rank 0 cannot pin: %s", std::strerror(errno));
    } else {
      auto deadline = Clock::now() + std::chrono::seconds(static_cast<int>(kWaitTimeout));
      for (;;) {
        try {
          t->check_peer(1);
        } catch (const Error& e) {
          CHILD_CHECK(e.status() == COLL_ERR_NO_RESOURCES, "status %d: %s", e.status(), e.what());
          CHILD_CHECK(std::strstr(e.what(), "ulimit -l") != nullptr, "message: %s", e.what());
          CHILD_CHECK(std::strstr(e.what(), "rank 1") != nullptr, "message: %s", e.what());
          break;
        }
        CHILD_CHECK(Clock::now() < deadline, "rank 0 was never asked, or did not fail");
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    boot.barrier(kSetupTimeout);
    CHILD_CHECK(t->dereg(mr) == 0, "dereg: %s", std::strerror(errno));
    return 0;
  }));
}

// ---------------------------------------------------------------- peer loss

// Queue pairs are made on first use, one way each: a ring of writes at np 4
// leaves every rank with two (the one it dialed to its right, the one its
// left dialed to it) and none to the rank opposite; the data lands.
TEST_F(RdmaTransportTest, QueuePairsAreMadeOnlyForThePeersWrittenTo) {
  expect_all_succeeded(run_ranks(4, [](FileBootstrap& boot) {
    std::unique_ptr<Transport> transport = make_transport(boot);
    const int me = boot.rank(), n = boot.size();
    CHILD_CHECK(transport->connections() == 0, "%d connections before any write",
                transport->connections());
    std::vector<uint64_t> window(8, 0);
    MemoryRegion* mr = transport->reg_write(window.data(), window.size() * 8);
    std::vector<RemoteRegion> remote = exchange_regions(boot, mr, kSetupTimeout);
    const int right = (me + 1) % n, left = (me + n - 1) % n;
    const uint64_t value = 100 + static_cast<uint64_t>(me);
    CHILD_CHECK(transport->post_write(right, 0, &value, 8, nullptr, 0,
                                      remote[static_cast<size_t>(right)].addr,
                                      remote[static_cast<size_t>(right)].rkey) == 0,
                "write to rank %d: %s", right, std::strerror(errno));
    Driver driver(*transport);
    CHILD_CHECK(driver.wait_word(&window[0], 100 + static_cast<uint64_t>(left), left),
                "the word from rank %d", left);
    // The left neighbour's QP is established once its write has landed;
    // its ESTABLISHED event may still be on its way to this side.
    auto deadline = Clock::now() + std::chrono::seconds(static_cast<int>(kWaitTimeout));
    while (transport->connections() < 2 && Clock::now() < deadline) transport->check_peer(left);
    CHILD_CHECK(transport->connections() == 2, "%d connections after a ring of writes at np %d",
                transport->connections(), n);
    // A `left` notice (kWriteLeaving) to the rank opposite, with which this
    // rank has no QP, is dropped, complete at once: finalize dials nobody.
    const int opposite = (me + 2) % n;
    CHILD_CHECK(transport->post_write(opposite, 55, &value, 8, nullptr,
                                      kWriteSignaled | kWriteLeaving,
                                      remote[static_cast<size_t>(opposite)].addr,
                                      remote[static_cast<size_t>(opposite)].rkey) == 0,
                "left notice to rank %d: %s", opposite, std::strerror(errno));
    CHILD_CHECK(driver.wait_completion(55), "the dropped notice's completion");
    CHILD_CHECK(transport->connections() == 2, "%d connections after a dropped notice",
                transport->connections());
    boot.barrier(kSetupTimeout);  // nobody disconnects while others still write
    CHILD_CHECK(transport->dereg(mr) == 0, "dereg");
    return 0;
  }));
}

// A rank that is gone before anyone wrote to it: a check on it says so
// (PEER_LOST), and a first write to it fails, naming the rank, and does
// not hang; so do later calls (the failure is sticky).
TEST_F(RdmaTransportTest, AFirstWriteToARankThatIsGoneFails) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot) {
    std::unique_ptr<Transport> transport = make_transport(boot);
    std::vector<uint64_t> window(1, 0);
    MemoryRegion* mr = transport->reg_write(window.data(), 8);
    std::vector<RemoteRegion> remote = exchange_regions(boot, mr, kSetupTimeout);
    boot.barrier(kSetupTimeout);
    if (boot.rank() == 1) {
      std::fflush(nullptr);
      _exit(0);  // no teardown: the kernel closes the listener
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 is gone
    // A wait on it learns it: check_peer dials a peer it has no QP with,
    // and the refusal is a lost peer.
    if (wait_until_lost(*transport, 1) != 0) return 1;
    const uint64_t value = 1;
    CHILD_CHECK(transport->post_write(1, 0, &value, 8, nullptr, 0, remote[1].addr,
                                      remote[1].rkey) == -1,
                "a first write to a rank that is gone must fail");
    try {
      transport->check_peer(1);
      CHILD_CHECK(false, "check_peer after the failed connection must throw");
    } catch (const Error& e) {
      CHILD_CHECK(std::strstr(e.what(), "rank 1") != nullptr, "message: %s", e.what());
    }
    return 0;
  }));
}

TEST_F(RdmaTransportTest, PeerThatExitsIsReportedLost) {
  expect_all_succeeded(run_ranks(2, [](FileBootstrap& boot) {
    std::unique_ptr<Transport> transport = make_transport(boot);
    if (connect_all_pairs(*transport, boot) != 0) return 1;  // QPs are made on first use
    if (boot.rank() == 1) {
      std::fflush(nullptr);
      _exit(0);  // no teardown: the kernel closes the connection
    }
    if (wait_until_lost(*transport, 1) != 0) return 1;
    uint64_t value = 1;
    CHILD_CHECK(transport->post_write(1, 0, &value, sizeof value, nullptr, 0, 0, 0) == -1,
                "a write to a lost peer must fail");
    return 0;
  }));
}

}  // namespace
}  // namespace coll
