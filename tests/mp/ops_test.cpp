// The operators the PMPI shim maps MPI's onto (issue 30, "Ops"): MAXLOC
// and MINLOC on every value-index pair type through allreduce, reduce (at
// every root), reduce_scatter_block, scan and exscan, with ties in value
// (the lower index must win, whichever rank holds it) and indices that are
// not the ranks; checked against the fold of every rank's input by MPI's
// rule, computed here (each rank knows every rank's input).
#include <cstring>
#include <string>
#include <vector>

#include "mp_support.hpp"

namespace {

// MPI's rule: the better value wins; equal values give the lower index.
template <class P>
P loc(coll_op_t op, const P& x, const P& y) {
  const bool y_better = op == COLL_MAXLOC ? x.value < y.value : y.value < x.value;
  const bool x_better = op == COLL_MAXLOC ? y.value < x.value : x.value < y.value;
  return y_better || (!x_better && y.index < x.index) ? y : x;
}

// Rank r's element i: values from a small range, so that ranks tie often;
// indices that run against the rank order for odd i, so that "lower index"
// and "lower rank" differ.
template <class P>
P input(int rank, int ranks, size_t i) {
  using V = decltype(P::value);
  P p;
  std::memset(&p, 0, sizeof p);
  const uint64_t bits = mp::mix(uint64_t(rank) + 1, i);
  p.value = V(int(bits % 4) - 1);  // -1 .. 2
  p.index = i % 2 == 0 ? rank * 3 + int(i % 5) : (ranks - rank) * 3 - int(i % 3);
  return p;
}

// The fold of ranks [first, end) (end > first) at element i.
template <class P>
P fold(coll_op_t op, int first, int end, int ranks, size_t i) {
  P acc = input<P>(first, ranks, i);
  for (int r = first + 1; r < end; ++r) acc = loc(op, acc, input<P>(r, ranks, i));
  return acc;
}

template <class P>
bool same(const P& x, const P& y) {
  return x.value == y.value && x.index == y.index;
}

template <class P>
std::string show(const P& p) {
  return "(" + std::to_string(static_cast<double>(p.value)) + ", " + std::to_string(p.index) + ")";
}

// count elements of got against want(i); one message for the first wrong.
template <class P, class Want>
void expect_elements(const P* got, size_t count, Want want, const std::string& where) {
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i)
    if (!same(got[i], want(i)) && wrong++ == 0) first = i;
  EXPECT_EQ(wrong, 0u) << where << ": element " << first << " is "
                       << (wrong ? show(got[first]) : "") << ", expected "
                       << (wrong ? show(want(first)) : "");
}

template <class P>
void check_pair_type(coll_datatype_t type) {
  const int n = mp::world_size(), me = mp::world_rank();
  coll_comm_t w = mp::world();
  ASSERT_EQ(coll_datatype_size(type), sizeof(P));
  const size_t slot_elems = mp::slot_bytes() / sizeof(P);
  for (coll_op_t op : {COLL_MAXLOC, COLL_MINLOC}) {
    for (size_t count : {size_t(1), size_t(7), size_t(1000), 2 * slot_elems + 3}) {
      const std::string what = mp::rank_tag() + " " + mp::datatype_name(type) + " " +
                               mp::op_name(op) + " count " + std::to_string(count);
      std::vector<P> in(count), out(count);
      for (size_t i = 0; i < count; ++i) in[i] = input<P>(me, n, i);
      auto all = [&](size_t i) { return fold<P>(op, 0, n, n, i); };

      int rc = coll_allreduce(in.data(), out.data(), count, type, op, w);
      EXPECT_EQ(rc, COLL_SUCCESS) << what << " allreduce: " << coll_comm_last_error(w);
      expect_elements(out.data(), count, all, what + " allreduce");

      for (int root = 0; root < n; ++root) {
        std::vector<P> got(count);
        rc = coll_reduce(in.data(), me == root ? got.data() : nullptr, count, type, op, root, w);
        EXPECT_EQ(rc, COLL_SUCCESS) << what << " reduce: " << coll_comm_last_error(w);
        if (me == root) expect_elements(got.data(), count, all, what + " reduce root " +
                                                                     std::to_string(root));
      }

      rc = coll_scan(in.data(), out.data(), count, type, op, w);
      EXPECT_EQ(rc, COLL_SUCCESS) << what << " scan: " << coll_comm_last_error(w);
      expect_elements(out.data(), count, [&](size_t i) { return fold<P>(op, 0, me + 1, n, i); },
                      what + " scan");

      rc = coll_exscan(in.data(), out.data(), count, type, op, w);
      EXPECT_EQ(rc, COLL_SUCCESS) << what << " exscan: " << coll_comm_last_error(w);
      if (me > 0)
        expect_elements(out.data(), count, [&](size_t i) { return fold<P>(op, 0, me, n, i); },
                        what + " exscan");

      // reduce_scatter_block: count elements per rank.
      std::vector<P> whole(count * size_t(n));
      for (size_t i = 0; i < whole.size(); ++i) whole[i] = input<P>(me, n, i);
      rc = coll_reduce_scatter_block(whole.data(), out.data(), count, type, op, w);
      EXPECT_EQ(rc, COLL_SUCCESS) << what << " reduce_scatter_block: " << coll_comm_last_error(w);
      expect_elements(out.data(), count,
                      [&](size_t i) { return fold<P>(op, 0, n, n, size_t(me) * count + i); },
                      what + " reduce_scatter_block");
    }
  }
}

TEST(LocOps, MaxlocMinlocOnEveryPairType) {
  check_pair_type<coll_float_int_t>(COLL_FLOAT_INT);
  check_pair_type<coll_double_int_t>(COLL_DOUBLE_INT);
  check_pair_type<coll_long_int_t>(COLL_LONG_INT);
  check_pair_type<coll_2int_t>(COLL_2INT);
  check_pair_type<coll_short_int_t>(COLL_SHORT_INT);
  check_pair_type<coll_long_double_int_t>(COLL_LONG_DOUBLE_INT);
}

// Rejected before anything is sent, alike on every rank: the calls stay in
// step.
TEST(LocOps, OtherOpsOnPairsAndLocOpsOnScalarsAreRejected) {
  coll_comm_t w = mp::world();
  std::vector<coll_double_int_t> pairs(4), result(4);
  for (coll_op_t op : {COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_BAND, COLL_LAND}) {
    const int rc = coll_allreduce(pairs.data(), result.data(), 4, COLL_DOUBLE_INT, op, w);
    EXPECT_EQ(rc, COLL_ERR_INVALID_ARG) << mp::op_name(op) << " on double_int";
    EXPECT_NE(std::string(coll_comm_last_error(w)).find("pair"), std::string::npos)
        << coll_comm_last_error(w);
  }
  std::vector<double> x(4), y(4);
  for (coll_op_t op : {COLL_MAXLOC, COLL_MINLOC}) {
    const int rc = coll_allreduce(x.data(), y.data(), 4, COLL_DOUBLE, op, w);
    EXPECT_EQ(rc, COLL_ERR_INVALID_ARG) << mp::op_name(op) << " on double";
    EXPECT_NE(std::string(coll_comm_last_error(w)).find("value-index pair types only"),
              std::string::npos)
        << coll_comm_last_error(w);
  }
}

}  // namespace
