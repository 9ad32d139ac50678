// A rank program for collrun: allreduce and bcast over whatever transport
// the environment chooses, every result checked against its closed form.
// COLL_CHECK_TRANSPORT=name makes the transport's name part of the check
// (so that a test of tcp cannot pass on shm), and with it a bcast that goes
// zero-copy (the transport's default threshold, 512 KiB, nothing forced)
// must have run the ring, the zero-copy bcast (zero_copy_choice,
// algorithms.hpp), whatever the table says for its size. Exit status 0:
// every check on this rank passed.
#include <coll/coll.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int g_rank = -1;
int g_size = 0;
int g_failures = 0;
long g_checks = 0;

void check(bool ok, const char* what, size_t count, size_t index, double got, double want) {
  ++g_checks;
  if (ok) return;
  if (++g_failures <= 10)
    std::printf("tcp-check rank %d: WRONG %s count %zu [%zu]: got %.17g, want %.17g\n", g_rank,
                what, count, index, got, want);
}

bool call_ok(int status, const char* what) {
  if (status == COLL_SUCCESS) return true;
  std::printf("tcp-check rank %d: %s failed: %s: %s\n", g_rank, what, coll_strerror(status),
              coll_comm_last_error(coll_comm_world()));
  ++g_failures;
  return false;
}

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b * 0xBF58476D1CE4E5B9ull + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void allreduce_int64_sum(size_t count) {
  std::vector<int64_t> send(count), recv(count, -1);
  for (size_t i = 0; i < count; ++i) send[i] = int64_t(g_rank) * 1000003 + int64_t(i);
  if (!call_ok(
          coll_allreduce(send.data(), recv.data(), count, COLL_INT64, COLL_SUM, coll_comm_world()),
          "allreduce int64 sum"))
    return;
  const int64_t n = g_size;
  for (size_t i = 0; i < count; ++i) {
    const int64_t want = n * int64_t(i) + 1000003 * n * (n - 1) / 2;
    check(recv[i] == want, "allreduce int64 sum", count, i, double(recv[i]), double(want));
  }
}

void allreduce_double_sum_in_place(size_t count) {
  // Small integers: every order of summation gives the exact result.
  std::vector<double> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = double(g_rank + 1) * double(i % 1024);
  if (!call_ok(coll_allreduce(COLL_IN_PLACE, buf.data(), count, COLL_DOUBLE, COLL_SUM,
                              coll_comm_world()),
               "allreduce double sum in place"))
    return;
  const double ranks_sum = double(g_size) * double(g_size + 1) / 2;
  for (size_t i = 0; i < count; ++i) {
    const double want = ranks_sum * double(i % 1024);
    check(buf[i] == want, "allreduce double sum (in place)", count, i, buf[i], want);
  }
}

void allreduce_int32_max(size_t count) {
  std::vector<int32_t> send(count), recv(count, -1);
  for (size_t i = 0; i < count; ++i) send[i] = int32_t((size_t(g_rank) * 7 + i) % 13);
  if (!call_ok(
          coll_allreduce(send.data(), recv.data(), count, COLL_INT32, COLL_MAX, coll_comm_world()),
          "allreduce int32 max"))
    return;
  for (size_t i = 0; i < count; ++i) {
    int32_t want = 0;
    for (int r = 0; r < g_size; ++r) want = std::max(want, int32_t((size_t(r) * 7 + i) % 13));
    check(recv[i] == want, "allreduce int32 max", count, i, recv[i], want);
  }
}

bool g_expect_zero_copy_ring = false;

void bcast_uint64(size_t count, int root) {
  std::vector<uint64_t> buf(count, 0);
  if (g_rank == root)
    for (size_t i = 0; i < count; ++i) buf[i] = mix(uint64_t(root), i);
  if (!call_ok(coll_bcast(buf.data(), count, COLL_UINT64, root, coll_comm_world()), "bcast"))
    return;
  if (g_expect_zero_copy_ring && count * sizeof(uint64_t) >= (size_t(512) << 10)) {
    const char* used = coll_comm_last_algorithm(coll_comm_world(), "bcast");
    ++g_checks;
    if (std::strcmp(used, "ring") != 0 && ++g_failures <= 10)
      std::printf("tcp-check rank %d: WRONG algorithm of a zero-copy bcast of %zu bytes: %s, "
                  "want ring\n", g_rank, count * sizeof(uint64_t), used);
  }
  for (size_t i = 0; i < count; ++i) {
    const uint64_t want = mix(uint64_t(root), i);
    check(buf[i] == want, "bcast uint64", count, i, double(buf[i]), double(want));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (!call_ok(coll_init(&argc, &argv), "coll_init")) return 1;
  coll_comm_rank(coll_comm_world(), &g_rank);
  coll_comm_size(coll_comm_world(), &g_size);
  const char* transport = coll_comm_transport_name(coll_comm_world());
  if (const char* want = std::getenv("COLL_CHECK_TRANSPORT")) {
    if (std::strcmp(transport, want) != 0) {
      std::printf("tcp-check rank %d: WRONG transport %s, want %s\n", g_rank, transport, want);
      ++g_failures;
    }
    // tcp, and shm+tcp with every rank on a host of its own
    // (COLL_CHECK_DISTINCT_HOSTS=1): every pair is tcp, so a zero-copy
    // bcast runs the ring.
    const bool all_tcp =
        std::strcmp(want, "tcp") == 0 || std::getenv("COLL_CHECK_DISTINCT_HOSTS") != nullptr;
    g_expect_zero_copy_ring = all_tcp && !std::getenv("COLL_BCAST_ALGO") &&
                              !std::getenv("COLL_ZCOPY_THRESHOLD") && g_size > 1;
  }
  // Empty, one, odd, across the 128 KiB slot, and large enough to go
  // zero-copy (8 MiB of int64 >= the 512 KiB threshold).
  const size_t counts[] = {0, 1, 7, 1000, 16384 + 3, 100003, size_t(1) << 20};
  for (int round = 0; round < 2 && g_failures == 0; ++round) {
    for (size_t count : counts) {
      allreduce_int64_sum(count);
      allreduce_double_sum_in_place(count);
      allreduce_int32_max(count);
      for (int root = 0; root < g_size; ++root) bcast_uint64(count, root);
      if (g_failures) break;
    }
    call_ok(coll_barrier(coll_comm_world()), "barrier");
  }
  std::printf("tcp-check rank %d of %d on %s: %ld checks, %d wrong\n", g_rank, g_size, transport,
              g_checks, g_failures);
  if (!call_ok(coll_finalize(), "coll_finalize")) return 1;
  return g_failures == 0 ? 0 : 1;
}
