// A rank program for the multi-host test (hosts_test.sh): checks that
// libcoll chose the transport named in argv[1] (shm+tcp: shared memory
// within a host, TCP between hosts), that an allreduce and a broadcast
// across the hosts give their closed-form results, and prints one line
//   host-check rank R of N host H netns NS transport T ok
// from which the script checks the placement. Exit status 0: all passed.
#include <coll/coll.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::string network_namespace() {
  char link[256] = {};
  ssize_t n = ::readlink("/proc/self/ns/net", link, sizeof link - 1);
  return n > 0 ? std::string(link, static_cast<size_t>(n)) : std::string("unknown");
}

int failed(int rank, const char* what, int status) {
  std::fprintf(stderr, "host-check rank %d: %s failed: %s: %s\n", rank, what, coll_strerror(status),
               coll_comm_last_error(coll_comm_world()));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s EXPECTED_TRANSPORT\n", argv[0]);
    return 2;
  }
  int status = coll_init(&argc, &argv);
  if (status != COLL_SUCCESS) {
    std::fprintf(stderr, "host-check: coll_init failed: %s: %s\n", coll_strerror(status),
                 coll_comm_last_error(nullptr));
    return 1;
  }
  int rank = -1, size = 0;
  coll_comm_rank(coll_comm_world(), &rank);
  coll_comm_size(coll_comm_world(), &size);
  int errors = 0;

  const char* transport = coll_comm_transport_name(coll_comm_world());
  if (!transport || std::strcmp(transport, argv[1]) != 0) {
    std::fprintf(stderr, "host-check rank %d: transport is '%s', expected '%s'\n", rank,
                 transport ? transport : "(null)", argv[1]);
    ++errors;
  }

  // Counts on both sides of a slot, so that large messages cross hosts too.
  for (size_t count : {size_t{1}, size_t{1000}, size_t{1} << 20}) {
    std::vector<int64_t> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = int64_t(rank) * 1000003 + int64_t(i);
    status =
        coll_allreduce(COLL_IN_PLACE, data.data(), count, COLL_INT64, COLL_SUM, coll_comm_world());
    if (status != COLL_SUCCESS) return failed(rank, "allreduce", status);
    const int64_t n = size;
    for (size_t i = 0; i < count; ++i) {
      const int64_t want = n * int64_t(i) + 1000003 * n * (n - 1) / 2;
      if (data[i] != want) {
        std::fprintf(stderr, "host-check rank %d: allreduce count %zu [%zu]: got %lld, want %lld\n",
                     rank, count, i, static_cast<long long>(data[i]), static_cast<long long>(want));
        ++errors;
        break;
      }
    }

    const int root = size - 1;
    for (size_t i = 0; i < count; ++i) data[i] = rank == root ? int64_t(i) * 7 + 1 : -1;
    status = coll_bcast(data.data(), count, COLL_INT64, root, coll_comm_world());
    if (status != COLL_SUCCESS) return failed(rank, "bcast", status);
    for (size_t i = 0; i < count; ++i)
      if (data[i] != int64_t(i) * 7 + 1) {
        std::fprintf(stderr, "host-check rank %d: bcast count %zu [%zu]: got %lld\n", rank, count,
                     i, static_cast<long long>(data[i]));
        ++errors;
        break;
      }
  }

  const char* host = std::getenv("COLL_HOST_ID");
  if (errors == 0)
    std::printf("host-check rank %d of %d host %s netns %s transport %s ok\n", rank, size,
                host ? host : "(unset)", network_namespace().c_str(), transport);
  std::fflush(stdout);
  status = coll_finalize();
  if (status != COLL_SUCCESS) return failed(rank, "finalize", status);
  return errors == 0 ? 0 : 1;
}
