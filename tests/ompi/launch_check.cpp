// Started by a launcher (Open MPI's mpirun, Slurm's srun --mpi=pmix,
// MPICH's mpirun.mpich, collrun), checks that libcoll found the job the
// launcher made:
//   launch_check BOOTSTRAP SIZE
// - coll_comm_bootstrap_name is BOOTSTRAP ("pmix" under mpirun and srun,
//   "pmi" under mpirun.mpich: a silent fallback to "singleton" would give
//   every rank a world of one);
// - the world has SIZE ranks, and this rank is the one the launcher
//   numbered (OMPI_COMM_WORLD_RANK, SLURM_PROCID, PMIX_RANK, PMI_RANK,
//   COLL_RANK);
// - the ranks are distinct and all present: allreduces whose results have
//   closed forms, a broadcast from every root, a barrier.
// Prints one "launch_check rank R of N: ..." line per rank and exits 0, or
// prints what was wrong and exits 1.
#include <coll/coll.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int failures = 0;

void check(bool ok, int rank, const std::string& what) {
  if (ok) return;
  ++failures;
  std::fprintf(stderr, "launch_check rank %d: FAIL: %s\n", rank, what.c_str());
}

bool call_ok(int status, int rank, coll_comm_t comm, const char* call) {
  if (status == COLL_SUCCESS) return true;
  check(false, rank,
        std::string(call) + ": " + coll_strerror(status) + ": " + coll_comm_last_error(comm));
  return false;
}

// The rank the launcher gave this process, from the first variable of
// those it sets; -1 when none is set.
long launcher_rank(const char** variable) {
  for (const char* name :
       {"OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMIX_RANK", "PMI_RANK", "COLL_RANK"}) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') continue;
    char* end = nullptr;
    long value = std::strtol(text, &end, 10);
    if (*end == '\0') {
      *variable = name;
      return value;
    }
  }
  return -1;
}

void check_collectives(coll_comm_t world, int rank, int size) {
  // Sum of rank + 1 over distinct ranks 0..size-1 is size(size+1)/2; a
  // duplicated or missing rank changes it.
  int64_t sum = rank + 1;
  if (call_ok(coll_allreduce(COLL_IN_PLACE, &sum, 1, COLL_INT64, COLL_SUM, world), rank, world,
              "coll_allreduce SUM"))
    check(sum == int64_t{size} * (size + 1) / 2, rank,
          "sum of rank+1 is " + std::to_string(sum) + ", expected " +
              std::to_string(int64_t{size} * (size + 1) / 2));

  // One bit per rank: every rank present exactly once sets all of them.
  uint64_t bits = uint64_t{1} << (rank % 64);
  uint64_t seen = 0;
  if (call_ok(coll_allreduce(&bits, &seen, 1, COLL_UINT64, COLL_BOR, world), rank, world,
              "coll_allreduce BOR")) {
    uint64_t all = size >= 64 ? ~uint64_t{0} : (uint64_t{1} << size) - 1;
    check(seen == all, rank, "ranks' bits are " + std::to_string(seen));
  }

  int32_t highest = rank;
  if (call_ok(coll_allreduce(COLL_IN_PLACE, &highest, 1, COLL_INT32, COLL_MAX, world), rank, world,
              "coll_allreduce MAX"))
    check(highest == size - 1, rank, "highest rank is " + std::to_string(highest));

  for (int root = 0; root < size; ++root) {
    int64_t value = rank == root ? 1000 * int64_t{root} + 7 : -1;
    if (!call_ok(coll_bcast(&value, 1, COLL_INT64, root, world), rank, world, "coll_bcast")) break;
    check(value == 1000 * int64_t{root} + 7, rank,
          "bcast from root " + std::to_string(root) + " gave " + std::to_string(value));
  }
  call_ok(coll_barrier(world), rank, world, "coll_barrier");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s BOOTSTRAP SIZE\n", argv[0]);
    return 2;
  }
  const std::string expected_bootstrap = argv[1];
  const int expected_size = std::atoi(argv[2]);

  int status = coll_init(&argc, &argv);
  if (status != COLL_SUCCESS) {
    std::fprintf(stderr, "launch_check: FAIL: coll_init: %s: %s\n", coll_strerror(status),
                 coll_comm_last_error(nullptr));
    return 1;
  }
  coll_comm_t world = coll_comm_world();
  int rank = -1;
  int size = 0;
  call_ok(coll_comm_rank(world, &rank), rank, world, "coll_comm_rank");
  call_ok(coll_comm_size(world, &size), rank, world, "coll_comm_size");
  // Copied: the names belong to the communicator, gone after coll_finalize.
  const char* bootstrap_name = coll_comm_bootstrap_name(world);
  const char* transport_name = coll_comm_transport_name(world);
  const std::string bootstrap = bootstrap_name ? bootstrap_name : "(null)";
  const std::string transport = transport_name ? transport_name : "";

  check(bootstrap == expected_bootstrap, rank,
        "bootstrap is '" + bootstrap + "', expected '" + expected_bootstrap + "'");
  check(size == expected_size, rank,
        "world size is " + std::to_string(size) + ", expected " + std::to_string(expected_size));
  const char* variable = nullptr;
  long numbered = launcher_rank(&variable);
  if (variable != nullptr)
    check(numbered == rank, rank,
          std::string("the launcher numbered this process ") + variable + "=" +
              std::to_string(numbered));
  check(!transport.empty(), rank, "no transport name");

  // Collectives only when the world is the expected one: otherwise ranks
  // that each think they are alone would wait for each other forever.
  if (size == expected_size) check_collectives(world, rank, size);

  status = coll_finalize();
  if (status != COLL_SUCCESS)
    check(false, rank, std::string("coll_finalize: ") + coll_strerror(status));

  std::printf("launch_check rank %d of %d: bootstrap %s, transport %s: %s\n", rank, size,
              bootstrap.c_str(), transport.c_str(), failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
