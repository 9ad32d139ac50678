// Ranks as forked processes joined by a FileBootstrap, for transport tests
// (tests/rdma, tests/tcp): a real process per rank, so that a rank can die,
// be killed or leave while the others carry on. And what those tests share
// inside a rank.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "error.hpp"
#include "job_secret.hpp"
#include "tests/rdma/file_bootstrap.hpp"
#include "transport/transport.hpp"

namespace coll::test {

inline std::chrono::steady_clock::time_point deadline_after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

// This process's rank in a forked child; -1 in the gtest parent.
inline int g_child_rank = -1;

// In a rank's body: on failure print where and why, and return 1.
#define CHILD_CHECK(cond, ...)                                                               \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", ::coll::test::g_child_rank, \
                   __FILE__, __LINE__, #cond);                                               \
      std::fprintf(stderr, __VA_ARGS__);                                                     \
      std::fputc('\n', stderr);                                                              \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

// A rank's body: its bootstrap and the job's directory (for side-band
// files); returns its exit status.
using ForkedBody = std::function<int(FileBootstrap& boot, const std::string& dir)>;

// Forks `size` ranks running body; returns their exit statuses (-1: killed
// by a signal, or after bound_s). tag names the job's temporary directory.
inline std::vector<int> run_forked_ranks(const char* tag, int size, const ForkedBody& body,
                                         double bound_s) {
  std::string pattern = std::string("/tmp/coll-") + tag + "-test.XXXXXX";
  const char* made = mkdtemp(pattern.data());
  if (made == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return std::vector<int>(size_t(size), -1);
  }
  const std::string dir = made;
  // Made before the fork: every rank holds the same one, as a launcher's.
  const std::string secret = job_secret::random_bytes(job_secret::kSecretBytes);
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      g_child_rank = r;
      int status = 1;
      try {
        FileBootstrap boot(dir, r, size, secret);
        status = body(boot, dir);
      } catch (const Error& e) {
        std::fprintf(stderr, "rank %d: coll::Error %d: %s\n", r, e.status(), e.what());
        status = 2;
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: exception: %s\n", r, e.what());
        status = 3;
      }
      std::fflush(nullptr);
      _exit(status);
    }
    pids.push_back(pid);
  }
  std::vector<int> statuses(size_t(size), -1);
  std::vector<bool> done(size_t(size), false);
  const auto deadline = deadline_after(bound_s);
  int remaining = size;
  while (remaining > 0) {
    for (int r = 0; r < size; ++r) {
      int status = 0;
      if (!done[size_t(r)] && waitpid(pids[size_t(r)], &status, WNOHANG) == pids[size_t(r)]) {
        done[size_t(r)] = true;
        --remaining;
        statuses[size_t(r)] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
    }
    if (remaining > 0 && std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "ranks still running after " << bound_s << " s: killed";
      for (int r = 0; r < size; ++r)
        if (!done[size_t(r)]) kill(pids[size_t(r)], SIGKILL);
      for (int r = 0; r < size; ++r)
        if (!done[size_t(r)]) waitpid(pids[size_t(r)], nullptr, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::filesystem::remove_all(dir);
  return statuses;
}

inline void expect_all_succeeded(const std::vector<int>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r)
    EXPECT_EQ(statuses[r], 0) << "rank " << r << " failed (see its stderr above)";
}

// In a rank: every rank publishes one region (none: null); returns all, by
// rank.
inline std::vector<RemoteRegion> exchange_regions(Bootstrap& boot, const MemoryRegion* mine,
                                                  double timeout_s = 60) {
  RemoteRegion region{};
  if (mine) region = {reinterpret_cast<uint64_t>(mine->addr), mine->length, mine->rkey};
  const auto blobs =
      boot.allgather(std::string(reinterpret_cast<const char*>(&region), sizeof region), timeout_s);
  std::vector<RemoteRegion> all(blobs.size());
  for (size_t r = 0; r < blobs.size(); ++r)
    if (blobs[r].size() == sizeof(RemoteRegion))
      std::memcpy(&all[r], blobs[r].data(), sizeof(RemoteRegion));
  return all;
}

// Byte i of the data `source` writes in its block (or iteration) `block`.
inline uint8_t pattern(int source, int block, size_t i) {
  return uint8_t(source * 131 + block * 7 + int(i % 251));
}

}  // namespace coll::test
