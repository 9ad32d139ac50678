// COLL_CHECK_ARGS=1 (libcoll/arg_check.hpp): arguments that differ between
// ranks fail the call on every rank with COLL_ERR_INVALID_ARG and a
// message naming the first rank that differs and both values; nothing is
// written; the communicator stays usable, so a matching call right after
// succeeds with the right result. Blocking, non-blocking and persistent
// (every activation checked). Run with the knob at np 3 and 5 (and np 1,
// where nothing is exchanged) and without it at np 3, where the mismatch
// tests are skipped (a mismatched program is erroneous; unchecked, it may
// hang or get garbage) and the matching ones must pass unchanged.
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "mp_support.hpp"

namespace {

bool checking() {
  const char* v = std::getenv("COLL_CHECK_ARGS");
  return v && std::string(v) == "1";
}

enum class Form { kBlocking, kNonblocking, kPersistent };

const char* form_name(Form f) {
  switch (f) {
    case Form::kBlocking:
      return "blocking";
    case Form::kNonblocking:
      return "nonblocking";
    case Form::kPersistent:
      return "persistent";
  }
  return "";
}

// Runs one call in form f and returns its status. A persistent request is
// started twice and must end the same way both times (each activation is
// checked: a mismatch fails every one); then it is freed.
template <class Blocking, class Start, class Init>
int run(Form f, Blocking blocking, Start start, Init init) {
  switch (f) {
    case Form::kBlocking:
      return blocking();
    case Form::kNonblocking: {
      coll_request_t r = COLL_REQUEST_NULL;
      const int s = start(&r);
      return s ? s : coll_wait(&r);
    }
    case Form::kPersistent: {
      coll_request_t r = COLL_REQUEST_NULL;
      const int s = init(&r);
      if (s) return s;
      int first = COLL_SUCCESS;
      for (int i = 0; i < 2; ++i) {
        int status = coll_start(r);
        if (status == COLL_SUCCESS) status = coll_wait(&r);
        if (i == 0) first = status;
        EXPECT_EQ(status, first) << "activation " << i << " ended otherwise than the first";
      }
      EXPECT_EQ(coll_request_free(&r), COLL_SUCCESS);
      return first;
    }
  }
  return COLL_ERR_INTERNAL;
}

// The three entry points of collective NAME with the given leading
// arguments, on communicator w.
#define FORMS(NAME, ...)                                                                \
  [&] { return coll_##NAME(__VA_ARGS__ __VA_OPT__(, ) w); },                            \
      [&](coll_request_t* r) { return coll_i##NAME(__VA_ARGS__ __VA_OPT__(, ) w, r); }, \
      [&](coll_request_t* r) { return coll_##NAME##_init(__VA_ARGS__ __VA_OPT__(, ) w, r); }

class CheckArgs : public testing::TestWithParam<Form> {
 protected:
  coll_comm_t w = mp::world();
  int rank = mp::world_rank();
  int size = mp::world_size();
  int last = size - 1;

  void SetUp() override {
    if (!checking()) GTEST_SKIP() << "COLL_CHECK_ARGS is not 1: mismatches are erroneous";
    if (size < 3) GTEST_SKIP() << "needs three ranks";
  }

  // Failed with INVALID_ARG on this rank, saying "coll_<what>: argument
  // mismatch: <detail>" (detail names the same ranks and values on every
  // rank).
  void expect_mismatch(int status, const std::string& what, const std::string& detail) {
    const std::string tag = std::string(form_name(GetParam())) + " " + what;
    EXPECT_EQ(status, COLL_ERR_INVALID_ARG) << tag << ": " << coll_strerror(status);
    const std::string message = coll_comm_last_error(w);
    const std::string want = "coll_" + what + ": argument mismatch: " + detail;
    EXPECT_NE(message.find(want), std::string::npos)
        << tag << ": message \"" << message << "\", expected \"" << want << "\"";
  }

  // Every rank ended the same: the verdict was reached alike.
  void expect_same_everywhere(int status) { EXPECT_TRUE(mp::same_on_all_ranks(uint64_t(status))); }

  // allreduce of int32 (r + 1) * (i + 1): communicator still usable and
  // the result right.
  void expect_allreduce_works(size_t count = 5) {
    std::vector<int32_t> in(count), out(count, -1);
    for (size_t i = 0; i < count; ++i) in[i] = int32_t((rank + 1) * (i + 1));
    EXPECT_EQ(run(GetParam(), FORMS(allreduce, in.data(), out.data(), count, COLL_INT32, COLL_SUM)),
              COLL_SUCCESS)
        << coll_comm_last_error(w);
    const int32_t ranks = int32_t(size * (size + 1) / 2);
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(out[i], ranks * int32_t(i + 1)) << "element " << i;
  }
};

TEST_P(CheckArgs, BcastRootMismatch) {
  std::vector<int32_t> buf(4, rank == 1 ? 11 : -1);
  const int root = rank == last ? 1 : 0;
  const int s = run(GetParam(), FORMS(bcast, buf.data(), buf.size(), COLL_INT32, root));
  expect_mismatch(s, "bcast",
                  "rank " + std::to_string(last) + " passed root 1, rank 0 passed root 0");
  expect_same_everywhere(s);
  for (int32_t v : buf) EXPECT_EQ(v, rank == 1 ? 11 : -1) << "written by a mismatched bcast";
  // Matching now: root 1's values everywhere.
  EXPECT_EQ(run(GetParam(), FORMS(bcast, buf.data(), buf.size(), COLL_INT32, 1)), COLL_SUCCESS);
  for (int32_t v : buf) EXPECT_EQ(v, 11);
}

TEST_P(CheckArgs, ReduceRootMismatch) {
  std::vector<int64_t> in(3, rank + 1), out(3, -1);
  const int root = rank == 1 ? 2 : 0;
  const int s =
      run(GetParam(), FORMS(reduce, in.data(), out.data(), 3, COLL_INT64, COLL_SUM, root));
  expect_mismatch(s, "reduce", "rank 1 passed root 2, rank 0 passed root 0");
  expect_same_everywhere(s);
  for (int64_t v : out) EXPECT_EQ(v, -1);
  EXPECT_EQ(run(GetParam(), FORMS(reduce, in.data(), out.data(), 3, COLL_INT64, COLL_SUM, 2)),
            COLL_SUCCESS);
  for (int64_t v : out) EXPECT_EQ(v, rank == 2 ? int64_t(size) * (size + 1) / 2 : -1);
}

TEST_P(CheckArgs, SameSizeDatatypeMismatch) {
  // int32 and float: 4 bytes each, so no message size gives it away.
  std::vector<int32_t> in(4, 1), out(4, -1);
  const coll_datatype_t type = rank == last ? COLL_FLOAT : COLL_INT32;
  const int s = run(GetParam(), FORMS(allreduce, in.data(), out.data(), 4, type, COLL_SUM));
  expect_mismatch(
      s, "allreduce",
      "rank " + std::to_string(last) + " passed datatype float, rank 0 passed datatype int32");
  expect_same_everywhere(s);
  for (int32_t v : out) EXPECT_EQ(v, -1);
  expect_allreduce_works();
}

TEST_P(CheckArgs, OpMismatch) {
  std::vector<int32_t> in(4, rank), out(4, -1);
  const coll_op_t op = rank == 1 ? COLL_MAX : COLL_SUM;
  const int s = run(GetParam(), FORMS(allreduce, in.data(), out.data(), 4, COLL_INT32, op));
  expect_mismatch(s, "allreduce", "rank 1 passed op max, rank 0 passed op sum");
  expect_same_everywhere(s);
  for (int32_t v : out) EXPECT_EQ(v, -1);
  expect_allreduce_works();
}

TEST_P(CheckArgs, CountMismatchZeroAgainstNonzero) {
  // A call of count 0 moves nothing and would complete locally: checked,
  // it meets the others.
  std::vector<int32_t> in(5, 1), out(5, -1);
  const size_t count = rank == last ? 0 : 5;
  int s = run(GetParam(), FORMS(allreduce, in.data(), out.data(), count, COLL_INT32, COLL_SUM));
  expect_mismatch(s, "allreduce",
                  "rank " + std::to_string(last) + " passed count 0, rank 0 passed count 5");
  expect_same_everywhere(s);
  // And rank 0 with nothing against the others' 5.
  s = run(GetParam(),
          FORMS(allreduce, in.data(), out.data(), rank == 0 ? 0 : 5, COLL_INT32, COLL_SUM));
  expect_mismatch(s, "allreduce", "rank 1 passed count 5, rank 0 passed count 0");
  for (int32_t v : out) EXPECT_EQ(v, -1);
  expect_allreduce_works();
  expect_allreduce_works(0);  // count 0 everywhere: fine
}

TEST_P(CheckArgs, CollectiveMismatch) {
  std::vector<int32_t> in(1, 1), out(1, -1);
  const int s =
      rank == last
          ? run(GetParam(), FORMS(barrier))
          : run(GetParam(), FORMS(allreduce, in.data(), out.data(), 0, COLL_INT32, COLL_SUM));
  expect_mismatch(
      s, rank == last ? "barrier" : "allreduce",
      "rank " + std::to_string(last) + " called coll_barrier, rank 0 called coll_allreduce");
  expect_allreduce_works();
}

TEST_P(CheckArgs, GathervCountsMustPairWithTheRoot) {
  // Rank i sends i + 1 elements; the root (1) expects one more from the
  // last rank.
  const int root = 1;
  std::vector<size_t> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) counts[size_t(i)] = size_t(i + 1);
  std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  std::vector<size_t> root_counts = counts;
  root_counts[size_t(last)] += 1;
  std::vector<int32_t> send(static_cast<size_t>(size) + 1, rank),
      recv(static_cast<size_t>(size * (size + 2)), -1);
  const size_t sendcount = counts[size_t(rank)];
  int s = run(GetParam(), FORMS(gatherv, send.data(), sendcount, recv.data(), root_counts.data(),
                                displs.data(), COLL_INT32, root));
  expect_mismatch(s, "gatherv",
                  "rank " + std::to_string(last) + " passed sendcount " + std::to_string(size) +
                      ", rank 1 (the root) passed recvcounts[" + std::to_string(last) +
                      "] = " + std::to_string(size + 1));
  expect_same_everywhere(s);
  for (int32_t v : recv) EXPECT_EQ(v, -1);
  s = run(GetParam(), FORMS(gatherv, send.data(), sendcount, recv.data(), counts.data(),
                            displs.data(), COLL_INT32, root));
  EXPECT_EQ(s, COLL_SUCCESS) << coll_comm_last_error(w);
  if (rank == root) {
    for (int i = 0; i < size; ++i)
      for (size_t k = 0; k < counts[size_t(i)]; ++k)
        EXPECT_EQ(recv[displs[size_t(i)] + k], i) << "block " << i;
  }
}

TEST_P(CheckArgs, ScattervCountsMustPairWithTheRoot) {
  // The root (2) sends rank i i + 1 elements; rank 1 expects one fewer.
  const int root = 2;
  std::vector<size_t> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) counts[size_t(i)] = size_t(i + 1);
  std::partial_sum(counts.begin(), counts.end() - 1, displs.begin() + 1);
  std::vector<int32_t> send(static_cast<size_t>(size * (size + 1) / 2));
  for (int i = 0; i < size; ++i)
    for (size_t k = 0; k < counts[size_t(i)]; ++k) send[displs[size_t(i)] + k] = 100 + i;
  std::vector<int32_t> recv(static_cast<size_t>(size), -1);
  const size_t mine = counts[size_t(rank)];
  int s = run(GetParam(), FORMS(scatterv, send.data(), counts.data(), displs.data(), recv.data(),
                                rank == 1 ? mine - 1 : mine, COLL_INT32, root));
  expect_mismatch(s, "scatterv",
                  "rank 1 passed recvcount 1, rank 2 (the root) passed sendcounts[1] = 2");
  expect_same_everywhere(s);
  for (int32_t v : recv) EXPECT_EQ(v, -1);
  s = run(GetParam(), FORMS(scatterv, send.data(), counts.data(), displs.data(), recv.data(), mine,
                            COLL_INT32, root));
  EXPECT_EQ(s, COLL_SUCCESS) << coll_comm_last_error(w);
  for (size_t k = 0; k < mine; ++k) EXPECT_EQ(recv[k], 100 + rank);
}

TEST_P(CheckArgs, AlltoallvCountsMustPair) {
  // Every rank sends one element to every rank, but rank 1 sends 2 to rank
  // 2, which expects 1.
  const size_t n = size_t(size);
  std::vector<size_t> sendcounts(n, 1), recvcounts(n, 1), displs(n);
  std::iota(displs.begin(), displs.end(), size_t{0});
  std::vector<size_t> sdispls = displs;
  if (rank == 1) {
    sendcounts[2] = 2;
    for (size_t j = 3; j < n; ++j) sdispls[j] = j + 1;
  }
  std::vector<int32_t> send(n + 1, rank), recv(n, -1);
  int s = run(GetParam(), FORMS(alltoallv, send.data(), sendcounts.data(), sdispls.data(),
                                recv.data(), recvcounts.data(), displs.data(), COLL_INT32));
  expect_mismatch(s, "alltoallv",
                  "rank 1 passed sendcounts[2] = 2, rank 2 passed recvcounts[1] = 1");
  expect_same_everywhere(s);
  for (int32_t v : recv) EXPECT_EQ(v, -1);
  s = run(GetParam(), FORMS(alltoallv, send.data(), recvcounts.data(), displs.data(), recv.data(),
                            recvcounts.data(), displs.data(), COLL_INT32));
  EXPECT_EQ(s, COLL_SUCCESS) << coll_comm_last_error(w);
  for (size_t j = 0; j < n; ++j) EXPECT_EQ(recv[j], int32_t(j));
}

TEST_P(CheckArgs, AllgathervRecvcountsMustAgree) {
  const size_t n = size_t(size);
  std::vector<size_t> counts(n, 1), displs(n);
  std::iota(displs.begin(), displs.end(), size_t{0});
  std::vector<int32_t> send(2, rank), recv(n + 1, -1);
  // The last rank believes rank 0 sends two.
  std::vector<size_t> mine = counts;
  if (rank == last) {
    mine[0] = 2;
    for (size_t j = 1; j < n; ++j) displs[j] = j + 1;
  }
  int s = run(GetParam(), FORMS(allgatherv, send.data(), mine[size_t(rank)], recv.data(),
                                mine.data(), displs.data(), COLL_INT32));
  expect_mismatch(
      s, "allgatherv",
      "rank " + std::to_string(last) + " passed recvcounts summing to " + std::to_string(n + 1));
  expect_same_everywhere(s);
  std::iota(displs.begin(), displs.end(), size_t{0});
  s = run(GetParam(),
          FORMS(allgatherv, send.data(), 1, recv.data(), counts.data(), displs.data(), COLL_INT32));
  EXPECT_EQ(s, COLL_SUCCESS) << coll_comm_last_error(w);
  for (size_t j = 0; j < n; ++j) EXPECT_EQ(recv[j], int32_t(j));
}

INSTANTIATE_TEST_SUITE_P(Forms, CheckArgs,
                         testing::Values(Form::kBlocking, Form::kNonblocking, Form::kPersistent),
                         [](const testing::TestParamInfo<Form>& i) {
                           return std::string(form_name(i.param));
                         });

// A call that one rank rejects on its own arguments fails on every rank:
// that rank takes the call's place in the agreement exchange, carrying its
// refusal (Communicator::refuse), so the others learn it there and nothing
// moves anywhere. The ranks stay in step: the next calls are exact.
// Non-blocking (the refusing rank returns at once, the others at the wait)
// and blocking (every rank returns once all know).
TEST(CheckArgsSequence, ACallRejectedAtOneRankFailsOnEveryRank) {
  if (!checking()) GTEST_SKIP() << "COLL_CHECK_ARGS is not 1";
  const int size = mp::world_size(), rank = mp::world_rank(), last = size - 1;
  if (size < 2) GTEST_SKIP() << "needs two ranks";
  coll_comm_t c = mp::world();
  std::vector<int32_t> in(2, 1), out(2, -1);
  coll_request_t r = COLL_REQUEST_NULL;
  int s = coll_iallreduce(rank == last ? nullptr : in.data(), out.data(), 2, COLL_INT32, COLL_SUM,
                          c, &r);
  if (rank != last && s == COLL_SUCCESS) s = coll_wait(&r);
  EXPECT_EQ(s, COLL_ERR_INVALID_ARG);
  std::string message = coll_comm_last_error(c);
  std::string want = rank == last ? "allreduce: NULL sendbuf"
                                  : "coll_allreduce: rank " + std::to_string(last) +
                                        " refused the call: allreduce: NULL sendbuf";
  EXPECT_NE(message.find(want), std::string::npos) << message;
  for (int32_t v : out) EXPECT_EQ(v, -1);

  std::vector<int32_t> buf(3, rank == 0 ? 7 : -1);
  s = coll_bcast(buf.data(), 3, rank == last ? coll_datatype_t(999) : COLL_INT32, 0, c);
  EXPECT_EQ(s, COLL_ERR_INVALID_ARG);
  message = coll_comm_last_error(c);
  want = rank == last ? "datatype" : "rank " + std::to_string(last) + " refused the call";
  EXPECT_NE(message.find(want), std::string::npos) << message;
  if (rank != 0) {
    for (int32_t v : buf) EXPECT_EQ(v, -1);
  }

  EXPECT_EQ(coll_allreduce(in.data(), out.data(), 2, COLL_INT32, COLL_SUM, c), COLL_SUCCESS)
      << coll_comm_last_error(c);
  for (int32_t v : out) EXPECT_EQ(v, size);
  EXPECT_EQ(coll_bcast(buf.data(), 3, COLL_INT32, 0, c), COLL_SUCCESS) << coll_comm_last_error(c);
  for (int32_t v : buf) EXPECT_EQ(v, 7);
}

// With or without the knob, matching calls of every form get the right
// result (np 1 too, where nothing is exchanged).
TEST(CheckArgsMatching, EveryFormGetsTheRightResult) {
  const int size = mp::world_size(), rank = mp::world_rank();
  coll_comm_t w = mp::world();
  for (Form f : {Form::kBlocking, Form::kNonblocking, Form::kPersistent}) {
    std::vector<double> in(7), out(7, -1);
    for (size_t i = 0; i < in.size(); ++i) in[i] = rank + 0.5 * double(i);
    EXPECT_EQ(run(f, FORMS(allreduce, in.data(), out.data(), in.size(), COLL_DOUBLE, COLL_MAX)),
              COLL_SUCCESS)
        << form_name(f) << ": " << coll_comm_last_error(w);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], (size - 1) + 0.5 * double(i));
    std::vector<int64_t> b(3, rank == size - 1 ? 42 : 0);
    EXPECT_EQ(run(f, FORMS(bcast, b.data(), b.size(), COLL_INT64, size - 1)), COLL_SUCCESS);
    for (int64_t v : b) EXPECT_EQ(v, 42);
    EXPECT_EQ(run(f, FORMS(barrier)), COLL_SUCCESS);
    EXPECT_EQ(run(f, FORMS(bcast, b.data(), 0, COLL_INT64, 0)), COLL_SUCCESS);
    std::vector<int32_t> g(static_cast<size_t>(size), -1);
    const int32_t mine = rank * 3;
    EXPECT_EQ(run(f, FORMS(allgather, &mine, g.data(), 1, COLL_INT32)), COLL_SUCCESS);
    for (int i = 0; i < size; ++i) EXPECT_EQ(g[size_t(i)], i * 3);
  }
}

}  // namespace
