#include "allgather_rounds.hpp"

#include <cstdio>
#include <vector>

namespace collrun_test {

int failures = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  std::printf("FAIL %s\n", what.c_str());
  std::fflush(stdout);
}

namespace {

// The byte at `index` of `rank`'s blob in round `round`.
char pattern(int rank, int round, size_t index) {
  return static_cast<char>((static_cast<size_t>(rank) * 131 + static_cast<size_t>(round) * 17 +
                            index * 7 + index / 251) &
                           0xff);
}

std::string make_blob(int rank, int round, size_t size) {
  std::string blob(size, '\0');
  for (size_t i = 0; i < size; ++i) blob[i] = pattern(rank, round, i);
  return blob;
}

// Size of `rank`'s blob in a round of the given kind.
size_t blob_size(const std::string& kind, int rank) {
  if (kind == "empty") return 0;
  if (kind == "one") return 1;
  if (kind == "mib") return size_t{1} << 20;
  if (kind == "by-rank") return static_cast<size_t>(rank) * 1000 + 3;
  // "mixed": even ranks send nothing, rank 1 a large blob.
  if (rank % 2 == 0) return 0;
  return rank == 1 ? 300000 : 17;
}

}  // namespace

void run_rounds(coll::Bootstrap& bootstrap, int first_round, double timeout_s) {
  int rank = bootstrap.rank(), size = bootstrap.size();
  const char* kinds[] = {"empty", "one", "mib", "by-rank", "mixed", "one"};
  int round = first_round;
  for (const char* kind : kinds) {
    std::string mine = make_blob(rank, round, blob_size(kind, rank));
    std::vector<std::string> all = bootstrap.allgather(mine, timeout_s);
    check(all.size() == static_cast<size_t>(size),
          std::string(kind) + ": " + std::to_string(all.size()) + " blobs");
    for (int peer = 0; peer < size && peer < static_cast<int>(all.size()); ++peer) {
      const std::string& got = all[static_cast<size_t>(peer)];
      check(got == make_blob(peer, round, blob_size(kind, peer)),
            std::string(kind) + ": blob of rank " + std::to_string(peer) + " differs (" +
                std::to_string(got.size()) + " bytes)");
    }
    ++round;
  }
  std::vector<std::string> ids = bootstrap.allgather(bootstrap.job_id(), timeout_s);
  for (const std::string& id : ids)
    check(id == bootstrap.job_id(), "job ids differ: " + id + " vs " + bootstrap.job_id());
  bootstrap.barrier(timeout_s);
}

}  // namespace collrun_test
