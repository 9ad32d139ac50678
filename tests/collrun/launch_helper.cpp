// A rank program for the collrun launcher tests; argv[1] picks what it does.
// It needs no libcoll: it reads what collrun put in its environment.
//
//   exit C0 C1 ...   rank r ends as C[r] says (0 for ranks past the list):
//                    a number (exit code), "kill9" (SIGKILL itself), or
//                    "sleep" (wait to be killed)
//   env VAR...       print "rank R VAR=value" or "rank R VAR unset"
//   lines N          print N numbered lines to stdout and to stderr, each
//                    written in several pieces
//   partial          print one line in two writes with a pause between
//   shm-then-die     create /dev/shm/coll-<COLL_JOBID>-helper-<rank>, then
//                    rank 0 kills itself (SIGKILL) and the others sleep
//   ignore-term      rank 1 ignores SIGTERM and sleeps; rank 0 exits 7 once
//                    rank 1 ignores it
//   affinity         print "rank R cpus <list>"
//   stdin            rank 0 copies stdin to stdout
//   signal-launcher  rank 0 sends SIGTERM to collrun; every rank sleeps
//   sleep            every rank sleeps until killed
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int env_int(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : -1;
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Waits to be killed; gives up after ten minutes so that a broken launcher
// cannot leave it behind forever.
[[noreturn]] void sleep_until_killed() {
  for (int i = 0; i < 600; ++i) ::sleep(1);
  std::_Exit(99);
}

int run_exit(int rank, int argc, char** argv) {
  std::string what = rank + 2 < argc ? argv[rank + 2] : "0";
  if (what == "kill9") ::raise(SIGKILL);
  if (what == "sleep") sleep_until_killed();
  return std::atoi(what.c_str());
}

int run_lines(int rank, int count) {
  for (int i = 0; i < count; ++i) {
    for (int fd : {1, 2}) {
      std::string line = "rank " + std::to_string(rank) + " fd " + std::to_string(fd) + " line " +
                         std::to_string(i) + " " +
                         std::string(static_cast<size_t>(40 + i % 50), 'x') + " end\n";
      // Pieces of uneven size, each its own write(2).
      size_t cut1 = line.size() / 3, cut2 = line.size() - 5;
      write_all(fd, line.substr(0, cut1));
      write_all(fd, line.substr(cut1, cut2 - cut1));
      write_all(fd, line.substr(cut2));
    }
  }
  return 0;
}

int run_shm_then_die(int rank) {
  const char* job = std::getenv("COLL_JOBID");
  if (!job) return 3;
  std::string name = "/coll-" + std::string(job) + "-helper-" + std::to_string(rank);
  int fd = ::shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ::ftruncate(fd, 4096) != 0) {
    std::perror("shm_open");
    return 3;
  }
  write_all(1, "created /dev/shm" + name + "\n");
  if (rank == 0) ::raise(SIGKILL);
  sleep_until_killed();
}

// Rank 1 ignores SIGTERM, then says so with a file in collrun's /dev/shm
// namespace for the job (collrun removes it); rank 0 waits for that file and
// fails, so collrun must end rank 1 with SIGKILL.
int run_ignore_term(int rank) {
  const char* job = std::getenv("COLL_JOBID");
  if (!job) return 3;
  std::string ready = "/dev/shm/coll-" + std::string(job) + "-ignoring";
  if (rank == 1) {
    ::signal(SIGTERM, SIG_IGN);
    int fd = ::open(ready.c_str(), O_CREAT | O_WRONLY, 0600);
    if (fd < 0) return 3;
    ::close(fd);
    write_all(1, "rank 1 ignores SIGTERM in job " + std::string(job) + "\n");
    sleep_until_killed();
  }
  if (rank != 0) return 0;
  for (int i = 0; i < 6000 && ::access(ready.c_str(), F_OK) != 0; ++i) ::usleep(10000);
  return 7;
}

int run_affinity(int rank) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return 3;
  // append(), not " " + std::to_string(): GCC 12 at -O3 warns
  // (-Wrestrict, a false positive) inside that operator+.
  std::string line = "rank ";
  line.append(std::to_string(rank)).append(" cpus");
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) line.append(" ").append(std::to_string(cpu));
  write_all(1, line + "\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  std::string mode = argv[1];
  int rank = env_int("COLL_RANK");
  if (rank < 0) {
    std::fprintf(stderr, "launch_helper: COLL_RANK is not set\n");
    return 2;
  }
  if (mode == "exit") return run_exit(rank, argc, argv);
  if (mode == "env") {
    for (int i = 2; i < argc; ++i) {
      const char* value = std::getenv(argv[i]);
      std::string line = "rank " + std::to_string(rank) + " " + argv[i] +
                         (value ? std::string("=") + value : " unset") + "\n";
      write_all(1, line);
    }
    return 0;
  }
  if (mode == "lines") return run_lines(rank, argc > 2 ? std::atoi(argv[2]) : 10);
  if (mode == "partial") {
    write_all(1, "first half ");
    ::usleep(100000);
    write_all(1, "second half of rank " + std::to_string(rank) + "\n");
    write_all(1, "no newline at the end");
    return 0;
  }
  if (mode == "shm-then-die") return run_shm_then_die(rank);
  if (mode == "ignore-term") return run_ignore_term(rank);
  if (mode == "affinity") return run_affinity(rank);
  if (mode == "stdin") {
    if (rank != 0) return 0;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(0, buffer, sizeof buffer)) > 0)
      write_all(1, std::string(buffer, static_cast<size_t>(n)));
    return 0;
  }
  if (mode == "signal-launcher") {
    // collrun is the parent of every rank.
    if (rank == 0) ::kill(::getppid(), SIGTERM);
    sleep_until_killed();
  }
  if (mode == "sleep") sleep_until_killed();
  std::fprintf(stderr, "launch_helper: unknown mode %s\n", mode.c_str());
  return 2;
}
