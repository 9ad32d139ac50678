// A rank program for the survivors' round tests (Bootstrap::survivor_round
// served by collrun's rendezvous), linked with libcoll's bootstrap code and
// run under collrun (survivor_round_test.cpp). argv[1] picks the scenario;
// each member prints its answer as one line, "rank R key K: r0,r1,-,r3"
// ('-' where the answer has no blob), or "rank R key K: status S: message"
// when the round threw, so that the test compares the ranks' lines.
//
//   all          every rank joins round 7 among all ranks, blob "r<rank>"
//   killed       after a barrier rank 2 kills itself (SIGKILL); the others
//                join round 7 among all ranks
//   stopped      after a barrier the last rank stops itself (SIGSTOP); the
//                others join round 7 among all ranks with a 1 s timeout
//   interleaved  two rounds (keys 11 and 12) from two threads a rank, the
//                even ranks starting with 11, the odd ones with 12
//   mismatch     ranks 0 .. n-2 name every rank, the last rank names all
//                but rank 0
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "error.hpp"

namespace {

constexpr double kTimeout = 60;
std::mutex print_mutex;

std::vector<int> first_ranks(int n) {
  std::vector<int> ranks;
  for (int r = 0; r < n; ++r) ranks.push_back(r);
  return ranks;
}

// One round; prints its line.
void round_line(coll::Bootstrap& boot, uint64_t key, const std::vector<int>& members,
                const std::string& mine, double timeout_s) {
  std::string line = "rank " + std::to_string(boot.rank()) + " key " + std::to_string(key) + ": ";
  try {
    std::vector<std::optional<std::string>> answer =
        boot.survivor_round(key, members, mine, timeout_s);
    for (size_t i = 0; i < answer.size(); ++i) line += (i ? "," : "") + answer[i].value_or("-");
  } catch (const coll::Error& error) {
    line += "status " + std::to_string(error.status()) + ": " + error.what();
  }
  std::lock_guard<std::mutex> lock(print_mutex);
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

int run(const std::string& mode) {
  auto boot = coll::make_bootstrap_from_environment(kTimeout);
  const int rank = boot->rank();
  const int size = boot->size();
  const std::string mine = "r" + std::to_string(rank);
  const std::vector<int> everyone = first_ranks(size);
  if (mode == "all") {
    round_line(*boot, 7, everyone, mine, kTimeout);
    return 0;
  }
  if (mode == "killed" || mode == "stopped") {
    // Every rank is up before the victim goes, so that its end is a death
    // and not a rank that never came.
    boot->barrier(kTimeout);
    const bool killed = mode == "killed";
    const int victim = killed ? 2 : size - 1;
    if (rank == victim) {
      std::fflush(stdout);
      ::raise(killed ? SIGKILL : SIGSTOP);
      std::printf("FAIL rank %d went on after its signal\n", rank);
      return 1;
    }
    round_line(*boot, 7, everyone, mine, killed ? kTimeout : 1.0);
    return 0;
  }
  if (mode == "interleaved") {
    const uint64_t first = rank % 2 == 0 ? 11 : 12;
    const uint64_t second = first == 11 ? 12 : 11;
    auto blob = [rank](uint64_t key) { return (key == 11 ? "a" : "b") + std::to_string(rank); };
    std::thread early([&] { round_line(*boot, first, everyone, blob(first), kTimeout); });
    // Not a timing assumption: the rounds complete in either order; the
    // pause only makes the orders differ between ranks most of the time.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    round_line(*boot, second, everyone, blob(second), kTimeout);
    early.join();
    return 0;
  }
  if (mode == "mismatch") {
    std::vector<int> members = everyone;
    if (rank == size - 1) members.erase(members.begin());
    round_line(*boot, 7, members, mine, kTimeout);
    return 0;
  }
  std::printf("FAIL unknown mode %s\n", mode.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: survivor_helper all|killed|stopped|interleaved|mismatch\n");
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (const coll::Error& error) {
    std::printf("FAIL status %d: %s\n", error.status(), error.what());
    return 1;
  }
}
