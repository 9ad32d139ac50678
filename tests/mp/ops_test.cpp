// The operators the PMPI shim maps MPI's onto (issue 30, "Ops"): MAXLOC
// and MINLOC on every value-index pair type through allreduce, reduce (at
// every root), reduce_scatter_block, scan and exscan, with ties in value
// (the lower index must win, whichever rank holds it) and indices that are
// not the ranks; checked against the fold of every rank's input by MPI's
// rule, computed here (each rank knows every rank's input). Then user
// operators (coll_op_create): a non-commutative one in rank order through
// every reduction, a commutative one, any datatype, and stale handles.
#include <algorithm>
#include <cstdint>
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

// ---------------------------------------------------------------------------
// User-defined operators (coll_op_create). The non-commutative one composes
// affine maps x -> a x + b on 32-bit integers (mod 2^32), one per uint64_t
// element (a in the high half, b in the low): associative, and
// f op g (f first, then g) differs from g op f, so any rank order other
// than MPI's x0 op x1 op ... op x(n-1) gives another result.

struct OpLog {
  coll_datatype_t expected = COLL_UINT64;
  int wrong_type = 0;  // calls with another datatype than the call's
  long calls = 0;
};

uint64_t affine(uint32_t a, uint32_t b) { return (uint64_t(a) << 32) | b; }
// lower op higher: apply the lower ranks' map first.
uint64_t compose(uint64_t lower, uint64_t higher) {
  const uint32_t a1 = uint32_t(lower >> 32), b1 = uint32_t(lower);
  const uint32_t a2 = uint32_t(higher >> 32), b2 = uint32_t(higher);
  return affine(a1 * a2, a2 * b1 + b2);
}

void compose_fn(const void* in, void* inout, size_t count, coll_datatype_t type, void* ctx) {
  auto* log = static_cast<OpLog*>(ctx);
  log->wrong_type += type != log->expected;
  ++log->calls;
  for (size_t i = 0; i < count; ++i) {
    uint64_t x, y;
    std::memcpy(&x, static_cast<const char*>(in) + i * 8, 8);
    std::memcpy(&y, static_cast<char*>(inout) + i * 8, 8);
    y = compose(x, y);
    std::memcpy(static_cast<char*>(inout) + i * 8, &y, 8);
  }
}

uint64_t map_of(int rank, size_t i) {
  return affine(uint32_t(mp::mix(uint64_t(rank) + 1, i)) | 1u, uint32_t(mp::mix(rank, i, 7)));
}
// x_first op ... op x_(end - 1), end > first.
uint64_t composed(int first, int end, size_t i) {
  uint64_t acc = map_of(first, i);
  for (int r = first + 1; r < end; ++r) acc = compose(acc, map_of(r, i));
  return acc;
}

template <class Want>
void expect_u64(const uint64_t* got, size_t count, Want want, const std::string& where) {
  size_t wrong = 0, first = 0;
  for (size_t i = 0; i < count; ++i)
    if (got[i] != want(i) && wrong++ == 0) first = i;
  EXPECT_EQ(wrong, 0u) << where << ": element " << first << " is "
                       << (wrong ? std::to_string(got[first]) : "") << ", expected "
                       << (wrong ? std::to_string(want(first)) : "");
}

std::string last_algorithm(const char* collective) {
  const char* name = coll_comm_last_algorithm(mp::world(), collective);
  return name ? name : "(null)";
}

// Every scan and exscan algorithm combines its operands in rank order (a
// left fold for linear and direct, lower groups first for recursive
// doubling: registry.cpp), so the composition declared commutative, which
// the table's or the knob's algorithm then runs, still gives the rank-order
// result: the one test of that order for the algorithms that a
// non-commutative operator never reaches (in_order_algorithm overrides the
// knob). At counts of one element, odd, and past one slot (chunked), in
// place and not.
TEST(UserOps, ScanAlgorithmsKeepRankOrder) {
  const int me = mp::world_rank();
  coll_comm_t w = mp::world();
  OpLog log;
  coll_op_t op = COLL_OP_NULL;
  ASSERT_EQ(coll_op_create(compose_fn, 1, &log, &op), COLL_SUCCESS);
  const size_t slot_elems = mp::slot_bytes() / 8;
  for (size_t count : {size_t(1), size_t(7), size_t(100), 2 * slot_elems + 3}) {
    const std::string what = mp::rank_tag() + " count " + std::to_string(count);
    std::vector<uint64_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = map_of(me, i);
    auto upto = [&](int end) { return [&, end](size_t i) { return composed(0, end, i); }; };
    EXPECT_EQ(coll_scan(in.data(), out.data(), count, COLL_UINT64, op, w), COLL_SUCCESS)
        << coll_comm_last_error(w);
    expect_u64(out.data(), count, upto(me + 1), what + " scan (" + last_algorithm("scan") + ")");
    std::vector<uint64_t> inplace = in;
    EXPECT_EQ(coll_scan(COLL_IN_PLACE, inplace.data(), count, COLL_UINT64, op, w), COLL_SUCCESS);
    expect_u64(inplace.data(), count, upto(me + 1), what + " scan in place");
    EXPECT_EQ(coll_exscan(in.data(), out.data(), count, COLL_UINT64, op, w), COLL_SUCCESS);
    if (me > 0)
      expect_u64(out.data(), count, upto(me), what + " exscan (" + last_algorithm("exscan") + ")");
    inplace = in;
    EXPECT_EQ(coll_exscan(COLL_IN_PLACE, inplace.data(), count, COLL_UINT64, op, w), COLL_SUCCESS);
    if (me > 0) expect_u64(inplace.data(), count, upto(me), what + " exscan in place");
  }
  EXPECT_EQ(log.wrong_type, 0);
  EXPECT_EQ(coll_op_free(&op), COLL_SUCCESS);
}

TEST(UserOps, NonCommutativeInRankOrderEverywhere) {
  const int n = mp::world_size(), me = mp::world_rank();
  coll_comm_t w = mp::world();
  OpLog log;
  coll_op_t op = COLL_OP_NULL;
  ASSERT_EQ(coll_op_create(compose_fn, 0, &log, &op), COLL_SUCCESS);
  const size_t slot_elems = mp::slot_bytes() / 8;
  for (size_t count : {size_t(1), size_t(7), size_t(1000), 2 * slot_elems + 3}) {
    const std::string what = mp::rank_tag() + " count " + std::to_string(count);
    std::vector<uint64_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = map_of(me, i);
    auto all = [&](size_t i) { return composed(0, n, i); };

    EXPECT_EQ(coll_allreduce(in.data(), out.data(), count, COLL_UINT64, op, w), COLL_SUCCESS)
        << coll_comm_last_error(w);
    expect_u64(out.data(), count, all, what + " allreduce");
    if (n > 1) {
      EXPECT_EQ(last_algorithm("allreduce"), "recursive_doubling");
    }
    std::vector<uint64_t> inplace = in;
    EXPECT_EQ(coll_allreduce(COLL_IN_PLACE, inplace.data(), count, COLL_UINT64, op, w),
              COLL_SUCCESS);
    expect_u64(inplace.data(), count, all, what + " allreduce in place");

    for (int root = 0; root < n; ++root) {
      std::vector<uint64_t> got = in;
      const bool in_place = root % 2 == 1 && me == root;
      EXPECT_EQ(coll_reduce(in_place ? COLL_IN_PLACE : in.data(), me == root ? got.data() : nullptr,
                            count, COLL_UINT64, op, root, w),
                COLL_SUCCESS)
          << coll_comm_last_error(w);
      if (me == root)
        expect_u64(got.data(), count, all, what + " reduce root " + std::to_string(root));
    }
    if (n > 1) {
      EXPECT_EQ(last_algorithm("reduce"), "in_order");
    }

    EXPECT_EQ(coll_scan(in.data(), out.data(), count, COLL_UINT64, op, w), COLL_SUCCESS);
    expect_u64(out.data(), count, [&](size_t i) { return composed(0, me + 1, i); }, what + " scan");
    if (n > 1) {
      EXPECT_EQ(last_algorithm("scan"), "recursive_doubling");
    }
    inplace = in;
    EXPECT_EQ(coll_scan(COLL_IN_PLACE, inplace.data(), count, COLL_UINT64, op, w), COLL_SUCCESS);
    expect_u64(inplace.data(), count, [&](size_t i) { return composed(0, me + 1, i); },
               what + " scan in place");

    EXPECT_EQ(coll_exscan(in.data(), out.data(), count, COLL_UINT64, op, w), COLL_SUCCESS);
    if (me > 0)
      expect_u64(out.data(), count, [&](size_t i) { return composed(0, me, i); },
                 what + " exscan");

    // reduce_scatter_block: block b of rank r's input is map_of(r, b * count + i).
    std::vector<uint64_t> whole(count * size_t(n));
    for (size_t i = 0; i < whole.size(); ++i) whole[i] = map_of(me, i);
    auto block = [&](size_t i) { return composed(0, n, size_t(me) * count + i); };
    EXPECT_EQ(coll_reduce_scatter_block(whole.data(), out.data(), count, COLL_UINT64, op, w),
              COLL_SUCCESS)
        << coll_comm_last_error(w);
    expect_u64(out.data(), count, block, what + " reduce_scatter_block");
    if (n > 1) {
      EXPECT_EQ(last_algorithm("reduce_scatter_block"), "in_order");
    }
    inplace = whole;
    EXPECT_EQ(coll_reduce_scatter_block(COLL_IN_PLACE, inplace.data(), count, COLL_UINT64, op, w),
              COLL_SUCCESS);
    expect_u64(inplace.data(), count, block, what + " reduce_scatter_block in place");

    // reduce_scatter: uneven blocks (rank r gets count + r elements, rank 1
    // none).
    std::vector<size_t> counts(static_cast<size_t>(n));
    size_t total = 0, before = 0;
    for (int r = 0; r < n; ++r) {
      counts[size_t(r)] = r == 1 ? 0 : count + size_t(r);
      if (r < me) before += counts[size_t(r)];
      total += counts[size_t(r)];
    }
    std::vector<uint64_t> v(total), mine(counts[size_t(me)] + 1);
    for (size_t i = 0; i < total; ++i) v[i] = map_of(me, i);
    EXPECT_EQ(coll_reduce_scatter(v.data(), mine.data(), counts.data(), COLL_UINT64, op, w),
              COLL_SUCCESS)
        << coll_comm_last_error(w);
    expect_u64(mine.data(), counts[size_t(me)], [&](size_t i) { return composed(0, n, before + i); },
               what + " reduce_scatter");
  }
  EXPECT_EQ(log.wrong_type, 0);
  if (n > 1) {
    EXPECT_GT(log.calls, 0);
  }
  EXPECT_EQ(coll_op_free(&op), COLL_SUCCESS);
  EXPECT_EQ(op, COLL_OP_NULL);
}

// A request started with an op keeps it when the op is freed (MPI allows
// freeing an op in use); a persistent one keeps it for every start.
TEST(UserOps, FreedWhileInUse) {
  const int n = mp::world_size(), me = mp::world_rank();
  coll_comm_t w = mp::world();
  OpLog log;
  coll_op_t op = COLL_OP_NULL;
  ASSERT_EQ(coll_op_create(compose_fn, 0, &log, &op), COLL_SUCCESS);
  const size_t count = 100;
  std::vector<uint64_t> in(count), a(count), b(count);
  for (size_t i = 0; i < count; ++i) in[i] = map_of(me, i);
  coll_request_t nb = COLL_REQUEST_NULL, persistent = COLL_REQUEST_NULL;
  ASSERT_EQ(coll_iallreduce(in.data(), a.data(), count, COLL_UINT64, op, w, &nb), COLL_SUCCESS);
  ASSERT_EQ(coll_scan_init(in.data(), b.data(), count, COLL_UINT64, op, w, &persistent),
            COLL_SUCCESS);
  EXPECT_EQ(coll_op_free(&op), COLL_SUCCESS);
  EXPECT_EQ(coll_wait(&nb), COLL_SUCCESS) << coll_comm_last_error(w);
  expect_u64(a.data(), count, [&](size_t i) { return composed(0, n, i); }, "iallreduce");
  for (int start = 0; start < 2; ++start) {
    std::fill(b.begin(), b.end(), 0);
    EXPECT_EQ(coll_start(persistent), COLL_SUCCESS);
    EXPECT_EQ(coll_wait(&persistent), COLL_SUCCESS) << coll_comm_last_error(w);
    expect_u64(b.data(), count, [&](size_t i) { return composed(0, me + 1, i); },
               "persistent scan, start " + std::to_string(start));
  }
  EXPECT_EQ(coll_request_free(&persistent), COLL_SUCCESS);
  EXPECT_EQ(log.wrong_type, 0);
}

// Commutative: sum mod a prime, on two integer widths; the table's
// algorithms (any order) must agree with the closed form.
constexpr int64_t kPrime = 1000003;
template <class T>
void sum_mod_fn(const void* in, void* inout, size_t count, coll_datatype_t type, void* ctx) {
  auto* log = static_cast<OpLog*>(ctx);
  log->wrong_type += type != log->expected;
  ++log->calls;
  for (size_t i = 0; i < count; ++i) {
    T x, y;
    std::memcpy(&x, static_cast<const char*>(in) + i * sizeof(T), sizeof(T));
    std::memcpy(&y, static_cast<char*>(inout) + i * sizeof(T), sizeof(T));
    y = T((int64_t(x) + int64_t(y)) % kPrime);
    std::memcpy(static_cast<char*>(inout) + i * sizeof(T), &y, sizeof(T));
  }
}

template <class T>
void check_sum_mod(coll_datatype_t type) {
  const int n = mp::world_size(), me = mp::world_rank();
  coll_comm_t w = mp::world();
  OpLog log;
  log.expected = type;
  coll::UserOp op(sum_mod_fn<T>, true, &log);  // coll.hpp: freed at scope exit
  auto value = [](int rank, size_t i) { return T(mp::mix(uint64_t(rank) + 1, i) % kPrime); };
  auto total = [&](int end, size_t i) {
    int64_t s = 0;
    for (int r = 0; r < end; ++r) s = (s + value(r, i)) % kPrime;
    return T(s);
  };
  for (size_t count : {size_t(1), size_t(1000), 2 * mp::slot_bytes() / sizeof(T) + 3}) {
    const std::string what = mp::rank_tag() + " " + mp::datatype_name(type) + " sum mod p count " +
                             std::to_string(count);
    std::vector<T> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = value(me, i);
    EXPECT_EQ(coll_allreduce(in.data(), out.data(), count, type, op, w), COLL_SUCCESS);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != total(n, i);
    EXPECT_EQ(wrong, 0u) << what << " allreduce";
    EXPECT_EQ(coll_reduce(in.data(), me == n - 1 ? out.data() : nullptr, count, type, op, n - 1, w),
              COLL_SUCCESS);
    if (me == n - 1) {
      wrong = 0;
      for (size_t i = 0; i < count; ++i) wrong += out[i] != total(n, i);
      EXPECT_EQ(wrong, 0u) << what << " reduce";
    }
    EXPECT_EQ(coll_scan(in.data(), out.data(), count, type, op, w), COLL_SUCCESS);
    wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != total(me + 1, i);
    EXPECT_EQ(wrong, 0u) << what << " scan";
  }
  EXPECT_EQ(log.wrong_type, 0);
}

TEST(UserOps, CommutativeSumModPrime) {
  check_sum_mod<int64_t>(COLL_INT64);
  check_sum_mod<int32_t>(COLL_INT32);
}

// Any datatype: the call's is passed on (here a 16-bit float, whose bits
// the op xors).
void xor16_fn(const void* in, void* inout, size_t count, coll_datatype_t type, void* ctx) {
  static_cast<OpLog*>(ctx)->wrong_type += type != COLL_FLOAT16;
  for (size_t i = 0; i < count; ++i) {
    uint16_t x, y;
    std::memcpy(&x, static_cast<const char*>(in) + 2 * i, 2);
    std::memcpy(&y, static_cast<char*>(inout) + 2 * i, 2);
    y ^= x;
    std::memcpy(static_cast<char*>(inout) + 2 * i, &y, 2);
  }
}

TEST(UserOps, AnyDatatype) {
  const int n = mp::world_size(), me = mp::world_rank();
  OpLog log;
  coll_op_t op = COLL_OP_NULL;
  ASSERT_EQ(coll_op_create(xor16_fn, 1, &log, &op), COLL_SUCCESS);
  std::vector<uint16_t> in(33), out(33);
  for (size_t i = 0; i < in.size(); ++i) in[i] = uint16_t(mp::mix(me, i));
  EXPECT_EQ(coll_allreduce(in.data(), out.data(), in.size(), COLL_FLOAT16, op, mp::world()),
            COLL_SUCCESS);
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t want = 0;
    for (int r = 0; r < n; ++r) want ^= uint16_t(mp::mix(r, i));
    EXPECT_EQ(out[i], want) << "element " << i;
  }
  EXPECT_EQ(log.wrong_type, 0);
  EXPECT_EQ(coll_op_free(&op), COLL_SUCCESS);
}

// Handles are validated: a freed, null, built-in or made-up one is an
// error, never a crash; every rank rejects the call alike (before anything
// is sent), so the ranks stay in step.
TEST(UserOps, StaleAndBadHandlesAreErrors) {
  coll_comm_t w = mp::world();
  OpLog log;
  coll_op_t op = COLL_OP_NULL;
  EXPECT_EQ(coll_op_create(nullptr, 0, &log, &op), COLL_ERR_INVALID_ARG);
  EXPECT_EQ(coll_op_create(compose_fn, 0, &log, nullptr), COLL_ERR_INVALID_ARG);
  ASSERT_EQ(coll_op_create(compose_fn, 0, &log, &op), COLL_SUCCESS);
  const coll_op_t stale = op;
  EXPECT_EQ(coll_op_free(&op), COLL_SUCCESS);
  EXPECT_EQ(op, COLL_OP_NULL);
  coll_op_t again = stale;
  EXPECT_EQ(coll_op_free(&again), COLL_ERR_INVALID_ARG);
  EXPECT_EQ(coll_op_free(&op), COLL_ERR_INVALID_ARG);  // COLL_OP_NULL
  coll_op_t builtin = COLL_SUM;
  EXPECT_EQ(coll_op_free(&builtin), COLL_ERR_INVALID_ARG);
  EXPECT_EQ(builtin, COLL_SUM);
  EXPECT_EQ(coll_op_free(nullptr), COLL_ERR_INVALID_ARG);
  // The freed slot is reused (first in, first out), each time with a new
  // generation: the stale handle never names one of the new operators.
  for (int i = 0; i < 5000; ++i) {
    coll_op_t t = COLL_OP_NULL;
    ASSERT_EQ(coll_op_create(compose_fn, 1, &log, &t), COLL_SUCCESS);
    ASSERT_NE(t, stale);
    ASSERT_EQ(coll_op_free(&t), COLL_SUCCESS);
  }
  std::vector<uint64_t> x(8), y(8);
  for (coll_op_t bad : {stale, COLL_OP_NULL, static_cast<coll_op_t>((1 << 30) | 12345),
                        static_cast<coll_op_t>(INT32_MAX)}) {
    const std::string what = "op " + std::to_string(static_cast<int>(bad));
    EXPECT_EQ(coll_allreduce(x.data(), y.data(), 8, COLL_UINT64, bad, w), COLL_ERR_INVALID_ARG)
        << what;
    EXPECT_EQ(coll_reduce(x.data(), y.data(), 8, COLL_UINT64, bad, 0, w), COLL_ERR_INVALID_ARG)
        << what;
    EXPECT_EQ(coll_scan(x.data(), y.data(), 8, COLL_UINT64, bad, w), COLL_ERR_INVALID_ARG) << what;
  }
  EXPECT_EQ(log.calls, 0);
  // The communicator still works.
  EXPECT_EQ(coll_allreduce(x.data(), y.data(), 8, COLL_UINT64, COLL_SUM, w), COLL_SUCCESS);
}

}  // namespace
