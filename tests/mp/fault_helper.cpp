// Rank program for the fault tests (fault_test.cpp starts it under
// collrun). Each mode misbehaves in one way and reports what the library
// returned as lines "fault-helper rank R: <what> status=<code> ..." for the
// driver to check. Exit status 0 means "this rank saw what it should".
//
//   silent-rank   the last rank never calls the collective; the others must
//                 get COLL_ERR_TIMEOUT (set COLL_TIMEOUT small), twice
//                 (sticky). Needs COLL_TEST_SYNC_DIR (see wait_for_files).
//   kill-rank     ranks loop on a 1 MiB allreduce; rank 2 SIGKILLs itself
//                 after a few iterations; survivors must get
//                 COLL_ERR_PEER_LOST (or be killed by collrun).
//   mismatch      rank 0 passes count 10, the others 20: every rank must get
//                 an error, or success with correct data; never a crash.
//                 On shm both are line messages (flags in every line).
//   mismatch-slot the same with 10 against 1000 (40 B in lines against
//                 4000 B through a slot).
//   mismatch-gather    gather to rank 0: rank 1 sends 5 elements, the
//                 others 3. Rank 0 must get COLL_ERR_INVALID_ARG; the
//                 others success (their sends fit the slots) or an error;
//                 rank 0's blocks of the others intact.
//   mismatch-alltoallv rank 0 expects 4 elements from rank 1, which sends
//                 it 2 (and the rest agree): rank 0 must get
//                 COLL_ERR_INVALID_ARG, the others success or an error.
//   die-in-setup  rank 0 SIGKILLs collrun and then itself in coll_init,
//                 when it would unlink its shm segment after the setup
//                 barrier (shm_unlink is interposed): the segment is left
//                 in /dev/shm, with nobody to remove it.
//   finalize-early ranks loop on an allreduce; rank 2 calls coll_finalize
//                 after a few iterations and exits 0; the others must get
//                 COLL_ERR_PEER_LOST at once (set COLL_TIMEOUT large),
//                 naming rank 2 as the rank that finalized.
//   finalize-staggered  a bcast of 4 MiB from rank 0 and an allreduce of
//                 1 MiB that the other ranks complete late (after a
//                 sleep); rank 0 finalizes as soon as its part is done,
//                 while they are still in it. Every rank must succeed,
//                 with the right data, and finalize cleanly.
//   collrun-dies-in-setup  rank 0 SIGKILLs collrun in coll_init just after
//                 creating its shm segment (shm_open is interposed), before
//                 the setup barrier: every rank must end (collrun asked for
//                 SIGKILL at its death) and no segment may be left. Needs
//                 COLL_TEST_SYNC_DIR (files say what happened).
//   recover-kill  (collrun --enable-recovery, np 4) every rank splits the
//                 world into {0,1} and {2,3} and checks a world allreduce;
//                 then rank 2 SIGKILLs itself once the others are past it
//                 (needs COLL_TEST_SYNC_DIR). The survivors' next
//                 world allreduce must fail (COLL_ERR_PEER_LOST: never
//                 success, never a hang); ranks 0 and 1 must still get
//                 exact results on {0,1}; every survivor finalizes and
//                 exits 0. The driver checks collrun's status and lines.
//                 Over tcp, which fails every communicator when a peer's
//                 connection is lost, {0,1} fails too (PEER_LOST) and the
//                 rank says so.
//   recover-exit  the same with rank 2 calling exit(3) instead.
//   recover-kill-then-fail  recover-kill, and rank 1 exits 5 after its
//                 coll_finalize: a survivor that failed.
//   ok            coll_init, one allreduce, coll_finalize.
#include <coll/coll.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int g_rank = -1;
int g_size = 0;

void report(const char* what, int status) {
  std::printf("fault-helper rank %d: %s status=%d (%s) detail=\"%s\"\n", g_rank, what, status,
              coll_strerror(status), coll_comm_last_error(coll_comm_world()));
  std::fflush(stdout);
}

// Segments this job has in /dev/shm right now (for the driver's log: a
// transport may unlink its segments once mapped, so zero is no error).
int count_job_shm_entries() {
  const char* job = std::getenv("COLL_JOBID");
  if (job == nullptr) return -1;
  const std::string prefix = std::string("coll-") + job + "-";
  int count = 0;
  if (DIR* dir = opendir("/dev/shm")) {
    while (const dirent* entry = readdir(dir)) {
      if (std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0) ++count;
    }
    closedir(dir);
  }
  return count;
}

std::string sync_file(const char* dir, int rank) {
  return std::string(dir) + "/done-" + std::to_string(rank);
}

// Waits until ranks 0..ranks-1 have each created their "done" file, for at
// most `bound_s`. Synchronising outside the library (whose communicator is
// broken by then) keeps one rank's exit from turning another rank's TIMEOUT
// into PEER_LOST, and keeps the silent rank silent until all saw TIMEOUT.
bool wait_for_files(const char* dir, int ranks, int bound_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(bound_s);
  for (;;) {
    int present = 0;
    for (int r = 0; r < ranks; ++r) present += access(sync_file(dir, r).c_str(), F_OK) == 0;
    if (present == ranks) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int silent_rank() {
  const char* dir = std::getenv("COLL_TEST_SYNC_DIR");
  if (dir == nullptr) {
    std::fprintf(stderr, "fault-helper: COLL_TEST_SYNC_DIR is not set\n");
    return 1;
  }
  const int silent = g_size - 1;
  const int talkers = g_size - 1;  // ranks 0 .. silent-1
  if (g_rank == silent) {
    // Stays out of the collective until every talker has its answer.
    const bool all_answered = wait_for_files(dir, talkers, 120);
    std::printf("fault-helper rank %d: silent rank done, talkers answered: %s\n", g_rank,
                all_answered ? "yes" : "no");
    return all_answered ? 0 : 1;
  }
  std::vector<double> data(1000, 1.0);
  const int first = coll_allreduce(COLL_IN_PLACE, data.data(), data.size(), COLL_DOUBLE, COLL_SUM,
                                   coll_comm_world());
  report("allreduce", first);
  const bool has_detail = *coll_comm_last_error(coll_comm_world()) != '\0';
  const int second = coll_allreduce(COLL_IN_PLACE, data.data(), data.size(), COLL_DOUBLE, COLL_SUM,
                                    coll_comm_world());
  report("second allreduce", second);
  const int barrier = coll_barrier(coll_comm_world());
  report("barrier after", barrier);
  if (FILE* f = std::fopen(sync_file(dir, g_rank).c_str(), "w")) std::fclose(f);
  wait_for_files(dir, talkers, 60);
  const bool ok = first == COLL_ERR_TIMEOUT && second == COLL_ERR_TIMEOUT &&
                  barrier == COLL_ERR_TIMEOUT && has_detail;
  return ok ? 0 : 1;
}

int kill_rank() {
  constexpr int kVictim = 2;
  constexpr int kVictimIterations = 5;
  constexpr int kIterations = 500;
  const size_t count = (size_t{1} << 20) / sizeof(float);  // 1 MiB
  std::vector<float> send(count, static_cast<float>(g_rank + 1));
  std::vector<float> recv(count, 0.0f);
  const float expected = static_cast<float>(g_size * (g_size + 1) / 2);
  for (int i = 0; i < kIterations; ++i) {
    if (g_rank == kVictim && i == kVictimIterations) {
      std::printf("fault-helper rank %d: raising SIGKILL at iteration %d\n", g_rank, i);
      std::fflush(stdout);
      std::raise(SIGKILL);
    }
    const int status =
        coll_allreduce(send.data(), recv.data(), count, COLL_FLOAT, COLL_SUM, coll_comm_world());
    if (status != COLL_SUCCESS) {
      report(("allreduce iteration " + std::to_string(i)).c_str(), status);
      return 2;  // the job failed; collrun reports it either way
    }
    if (recv[0] != expected || recv[count - 1] != expected) {
      std::printf("fault-helper rank %d: WRONG data at iteration %d\n", g_rank, i);
      return 1;
    }
  }
  std::printf("fault-helper rank %d: finished all iterations without noticing the lost peer\n",
              g_rank);
  return 1;
}

long elapsed_ms(std::chrono::steady_clock::time_point since) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::steady_clock::now() - since)
                               .count());
}

int finalize_early() {
  constexpr int kLeaver = 2;
  constexpr int kLeaverIterations = 5;
  constexpr int kIterations = 500;
  std::vector<int32_t> send(4096, g_rank + 1), recv(4096, 0);
  for (int i = 0; i < kIterations; ++i) {
    if (g_rank == kLeaver && i == kLeaverIterations) {
      std::printf("fault-helper rank %d: calling coll_finalize at iteration %d\n", g_rank, i);
      std::fflush(stdout);
      const int status = coll_finalize();
      std::printf("fault-helper rank %d: finalize status=%d exit=0\n", g_rank, status);
      std::fflush(stdout);
      return status == COLL_SUCCESS ? 0 : 1;
    }
    const auto start = std::chrono::steady_clock::now();
    const int status = coll_allreduce(send.data(), recv.data(), send.size(), COLL_INT32, COLL_SUM,
                                      coll_comm_world());
    if (status != COLL_SUCCESS) {
      std::printf("fault-helper rank %d: allreduce iteration %d after_ms=%ld status=%d detail=\"%s\"\n",
                  g_rank, i, elapsed_ms(start), status, coll_comm_last_error(coll_comm_world()));
      std::fflush(stdout);
      return 2;  // the job failed; collrun reports it
    }
  }
  std::printf("fault-helper rank %d: finished all iterations without noticing the leaver\n",
              g_rank);
  return 1;
}

int finalize_staggered() {
  const auto late = [] {
    if (g_rank != 0) std::this_thread::sleep_for(std::chrono::milliseconds(150));
  };
  std::vector<int32_t> data(size_t{1} << 20, g_rank == 0 ? 7 : 0);  // 4 MiB
  late();
  int status = coll_bcast(data.data(), data.size(), COLL_INT32, 0, coll_comm_world());
  report("staggered bcast", status);
  if (status != COLL_SUCCESS || data.front() != 7 || data.back() != 7) return 1;
  std::vector<int32_t> in(size_t{1} << 18, g_rank + 1), out(in.size(), 0);  // 1 MiB
  coll_request_t request = nullptr;
  status = coll_iallreduce(in.data(), out.data(), in.size(), COLL_INT32, COLL_SUM,
                           coll_comm_world(), &request);
  if (status == COLL_SUCCESS) {
    late();
    status = coll_wait(&request);
  }
  report("staggered allreduce", status);
  const int32_t sum = g_size * (g_size + 1) / 2;
  return status == COLL_SUCCESS && out.front() == sum && out.back() == sum ? 0 : 1;
}

int mismatch(size_t others) {
  const size_t count = g_rank == 0 ? 10 : others;
  std::vector<int32_t> send(count, g_rank + 1);
  std::vector<int32_t> recv(count, -1);
  const int status =
      coll_allreduce(send.data(), recv.data(), count, COLL_INT32, COLL_SUM, coll_comm_world());
  report("mismatched allreduce", status);
  if (status == COLL_SUCCESS) {
    const int32_t expected = g_size * (g_size + 1) / 2;
    for (int32_t v : recv) {
      if (v != expected) {
        std::printf("fault-helper rank %d: success with WRONG data (%d, expected %d)\n", g_rank, v,
                    expected);
        return 1;
      }
    }
    return 0;
  }
  return status == COLL_ERR_INVALID_ARG || status == COLL_ERR_TIMEOUT ||
                 status == COLL_ERR_PEER_LOST
             ? 0
             : 1;
}

// Rank 0 must see the mismatch as COLL_ERR_INVALID_ARG; the others may
// finish (their messages fit the slots) or fail, but never with wrong data
// or a crash.
int expect_invalid_at_rank0(const char* what, int status) {
  report(what, status);
  if (g_rank == 0) return status == COLL_ERR_INVALID_ARG ? 0 : 1;
  return status == COLL_SUCCESS || status == COLL_ERR_INVALID_ARG || status == COLL_ERR_TIMEOUT ||
                 status == COLL_ERR_PEER_LOST
             ? 0
             : 1;
}

int mismatch_gather() {
  const size_t count = g_rank == 1 ? 5 : 3;
  std::vector<int32_t> send(count, g_rank + 1);
  std::vector<int32_t> recv(size_t(g_size) * 3, -1);
  const int status = coll_gather(send.data(), g_rank == 0 ? recv.data() : nullptr, count,
                                 COLL_INT32, 0, coll_comm_world());
  return expect_invalid_at_rank0("mismatched gather", status);
}

int mismatch_alltoallv() {
  std::vector<size_t> sendcounts(static_cast<size_t>(g_size), 2),
      recvcounts(static_cast<size_t>(g_size), 2), displs(static_cast<size_t>(g_size));
  if (g_rank == 0) recvcounts[1] = 4;
  for (int i = 0; i < g_size; ++i) displs[size_t(i)] = size_t(i) * 4;
  std::vector<int32_t> send(size_t(g_size) * 4, g_rank), recv(size_t(g_size) * 4, -1);
  const int status =
      coll_alltoallv(send.data(), sendcounts.data(), displs.data(), recv.data(), recvcounts.data(),
                     displs.data(), COLL_INT32, coll_comm_world());
  return expect_invalid_at_rank0("mismatched alltoallv", status);
}

// The setup-fault modes: rank 0 prints the job id (the driver looks for
// its segment by it) and arms the interposer named by `armed`. False
// outside a collrun job.
bool arm_rank0_for_setup_fault(bool* armed) {
  const char* job = std::getenv("COLL_JOBID");
  const char* rank = std::getenv("COLL_RANK");
  if (!job || !rank) return false;
  if (std::strcmp(rank, "0") == 0) {
    std::printf("fault-helper jobid=%s\n", job);
    std::fflush(stdout);
    *armed = true;
  }
  return true;
}

bool g_die_at_unlink = false;  // die-in-setup, rank 0

int die_in_setup(int* argc, char*** argv) {
  if (!arm_rank0_for_setup_fault(&g_die_at_unlink)) return 64;
  // Rank 0 dies in here (shm_unlink below); rank 1 gets an error once
  // collrun is gone.
  coll_init(argc, argv);
  return 0;
}

bool g_kill_collrun_at_create = false;  // collrun-dies-in-setup, rank 0

int collrun_dies_in_setup(int* argc, char*** argv) {
  if (!arm_rank0_for_setup_fault(&g_kill_collrun_at_create)) return 64;
  // Collrun dies in here (shm_open below); no rank should come back. What
  // happened goes to files in COLL_TEST_SYNC_DIR: collrun, which forwarded
  // our output, is gone.
  // A rank may get here a moment before the parent-death signal lands (the
  // bootstrap closes before the kernel reparents the ranks); one that the
  // signal never reaches stays, and the driver sees it still running.
  coll_init(argc, argv);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  return 1;
}

// recover-*: see the top of the file. Returns the rank's exit status; the
// victim does not return.
int recover(bool by_signal) {
  constexpr int kVictim = 2;
  const int color = g_rank < 2 ? 0 : 1;
  coll_comm_t half = COLL_COMM_NULL;
  int status = coll_comm_split(coll_comm_world(), color, g_rank, &half);
  report("split", status);
  if (status != COLL_SUCCESS) return 1;
  int in = g_rank + 1, out = 0;
  status = coll_allreduce(&in, &out, 1, COLL_INT32, COLL_SUM, coll_comm_world());
  report("world allreduce before the death", status);
  if (status != COLL_SUCCESS || out != g_size * (g_size + 1) / 2) return 1;
  // Every survivor has its split and its world result before the victim
  // dies: it waits for their files (COLL_TEST_SYNC_DIR). A barrier would
  // not do: over tcp a rank killed with a barrier's last message unread
  // by a peer resets the connection, and the peer's barrier fails.
  const char* dir = std::getenv("COLL_TEST_SYNC_DIR");
  if (dir == nullptr) {
    std::fprintf(stderr, "fault-helper: COLL_TEST_SYNC_DIR is not set\n");
    return 1;
  }
  if (g_rank != kVictim)
    if (FILE* f = std::fopen(sync_file(dir, g_rank).c_str(), "w")) std::fclose(f);
  if (g_rank == kVictim) {
    for (int r = 0; r < g_size; ++r)
      if (r != kVictim && r != g_rank)
        while (access(sync_file(dir, r).c_str(), F_OK) != 0)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::printf("fault-helper rank %d: %s\n", g_rank, by_signal ? "raising SIGKILL" : "exit(3)");
    std::fflush(stdout);
    if (by_signal) std::raise(SIGKILL);
    std::exit(3);
  }
  // A world allreduce needs the victim's data: it can only fail.
  std::vector<int32_t> send(4096, g_rank + 1), recv(4096, -1);
  status = coll_allreduce(send.data(), recv.data(), send.size(), COLL_INT32, COLL_SUM,
                          coll_comm_world());
  report("world allreduce after the death", status);
  if (status == COLL_SUCCESS) {
    std::printf("fault-helper rank %d: WRONG: success without rank %d\n", g_rank, kVictim);
    return 1;
  }
  if (status != COLL_ERR_PEER_LOST) return 1;
  if (color == 0) {
    // {0,1} never had the victim: exact, small and large (through slots).
    for (size_t count : {size_t{1}, size_t{1} << 18}) {
      std::vector<int64_t> mine(count), sum(count, -1);
      for (size_t i = 0; i < count; ++i) mine[i] = int64_t(g_rank + 1) * int64_t(i + 1);
      status = coll_allreduce(mine.data(), sum.data(), count, COLL_INT64, COLL_SUM, half);
      report(("half allreduce of " + std::to_string(count)).c_str(), status);
      // tcp too: a lost connection loses that peer only, not the streams
      // of {0,1}.
      if (status != COLL_SUCCESS) return 1;
      for (size_t i = 0; i < count; ++i)
        if (sum[i] != 3 * int64_t(i + 1)) {
          std::printf("fault-helper rank %d: WRONG half sum at %zu: %lld\n", g_rank, i,
                      static_cast<long long>(sum[i]));
          return 1;
        }
    }
    std::printf("fault-helper rank %d: half exact after the death\n", g_rank);
  }
  return 0;
}

int all_ok() {
  int in = g_rank + 1, out = 0;
  const int status =
      coll_allreduce(&in, &out, 1, COLL_INT32, COLL_SUM, coll_comm_world());
  const bool ok = status == COLL_SUCCESS && out == g_size * (g_size + 1) / 2;
  std::printf("fault-helper rank %d: ok status=%d sum=%d\n", g_rank, status, out);
  return ok ? 0 : 1;
}

}  // namespace

// die-in-setup: this program's shm_unlink wins over libc's for libcoll's
// calls (symbol interposition), so rank 0 dies at the very moment it would
// unlink its segment after the setup barrier, with its launcher: exactly a
// SIGKILL during start-up. Otherwise it is libc's.
extern "C" int shm_unlink(const char* name) {
  if (g_die_at_unlink) {
    kill(getppid(), SIGKILL);  // collrun
    raise(SIGKILL);
  }
  using Fn = int (*)(const char*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "shm_unlink"));
  return real ? real(name) : -1;
}

// collrun-dies-in-setup: rank 0 kills collrun right after it created its
// own segment (O_CREAT), the moment a launcher's death leaves the most in
// /dev/shm. Otherwise libc's.
extern "C" int shm_open(const char* name, int oflag, mode_t mode) {
  using Fn = int (*)(const char*, int, mode_t);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "shm_open"));
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  const int fd = real(name, oflag, mode);
  if (g_kill_collrun_at_create && (oflag & O_CREAT) && fd >= 0) {
    g_kill_collrun_at_create = false;
    if (const char* dir = std::getenv("COLL_TEST_SYNC_DIR"))
      if (FILE* f = std::fopen((std::string(dir) + "/killed-collrun").c_str(), "w")) {
        std::fprintf(f, "%s\n", name);
        std::fclose(f);
      }
    kill(getppid(), SIGKILL);
  }
  return fd;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(
        stderr,
        "usage: %s "
        "silent-rank|kill-rank|mismatch|mismatch-slot|mismatch-gather|mismatch-alltoallv|"
        "finalize-early|finalize-staggered|die-in-setup|collrun-dies-in-setup|recover-kill|"
        "recover-exit|recover-kill-then-fail|ok\n",
        argv[0]);
    return 64;
  }
  const std::string mode = argv[1];
  if (mode == "die-in-setup") return die_in_setup(&argc, &argv);
  if (mode == "collrun-dies-in-setup") return collrun_dies_in_setup(&argc, &argv);
  int status = coll_init(&argc, &argv);
  if (status != COLL_SUCCESS) {
    std::fprintf(stderr, "fault-helper: coll_init: %s: %s\n", coll_strerror(status),
                 coll_comm_last_error(nullptr));
    return 1;
  }
  coll_comm_rank(coll_comm_world(), &g_rank);
  coll_comm_size(coll_comm_world(), &g_size);
  if (g_rank == 0) {
    const char* job = std::getenv("COLL_JOBID");
    std::printf("fault-helper jobid=%s shm-entries=%d transport=%s\n", job ? job : "",
                count_job_shm_entries(), coll_comm_transport_name(coll_comm_world()));
    std::fflush(stdout);
  }

  int result = 64;
  if (mode == "silent-rank")
    result = silent_rank();
  else if (mode == "kill-rank")
    result = kill_rank();
  else if (mode == "mismatch")
    result = mismatch(20);
  else if (mode == "mismatch-slot")
    result = mismatch(1000);
  else if (mode == "mismatch-gather")
    result = mismatch_gather();
  else if (mode == "mismatch-alltoallv")
    result = mismatch_alltoallv();
  else if (mode == "finalize-early")
    result = finalize_early();
  else if (mode == "finalize-staggered")
    result = finalize_staggered();
  else if (mode == "recover-kill" || mode == "recover-kill-then-fail")
    result = recover(/*by_signal=*/true);
  else if (mode == "recover-exit")
    result = recover(/*by_signal=*/false);
  else if (mode == "ok")
    result = all_ok();
  else
    std::fprintf(stderr, "fault-helper: unknown mode %s\n", mode.c_str());

  // After a failed collective finalize must still return (bounded) and free
  // everything; its status is only logged. (finalize-early's leaver has
  // finalized already.)
  int initialized = 0;
  coll_initialized(&initialized);
  if (!initialized) return result;
  status = coll_finalize();
  // A survivor that failed after finalizing (collrun returns its status).
  if (mode == "recover-kill-then-fail" && g_rank == 1 && result == 0 && status == COLL_SUCCESS)
    result = 5;
  std::printf("fault-helper rank %d: finalize status=%d exit=%d\n", g_rank, status, result);
  std::fflush(stdout);
  return result;
}
