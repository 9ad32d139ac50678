// The collectives beyond allreduce, bcast and barrier (reduce, allgather(v),
// reduce_scatter(_block), gather(v), scatter(v), alltoall(v), scan, exscan),
// each checked against its closed form: every rank computes what every
// other rank passed (mp::mix), so it knows every byte its output must hold.
//
// What is checked, at every count of mp::interesting_counts (0, 1, 7,
// n - 1, one slot +-1 element) and one larger than three slots, for every
// root, in place and not:
//  - every output byte: the result where MPI defines one, and the old
//    contents everywhere else (the gaps between v-blocks, recvbuf of
//    non-roots, rank 0's recvbuf for exscan, sendbufs), including the
//    guard zones around each buffer;
//  - the v-collectives with uneven counts, empty blocks and displacements
//    in reverse rank order with gaps between the blocks;
//  - root-only arguments passed as NULL elsewhere;
//  - the algorithm the COLL_<NAME>_ALGO knob forces, where one is set
//    (meson.build runs the suite with every algorithm forced);
//  - once per collective: the non-blocking and the persistent form (started
//    twice) and the blocking one on a dup'ed and on a split communicator.
// Reductions use inputs that make the result exact in any order (as
// allreduce_test.cpp): small integers in floats, wrapping integer SUM/PROD
// computed in uint64_t.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "mp_support.hpp"

namespace {

using mp::GuardedBuffer;
using Bytes = std::vector<unsigned char>;

// --- the communicator a case runs on -----------------------------------

struct Comm {
  coll_comm_t handle;
  int rank;
  int size;
  std::string name;  // "world", "dup", "split"
};

Comm describe(coll_comm_t c, const std::string& name) {
  Comm out{c, -1, 0, name};
  coll_comm_rank(c, &out.rank);
  coll_comm_size(c, &out.size);
  return out;
}

// --- how a case is called --------------------------------------------------

enum class Form { kBlocking, kNonblocking, kPersistent };
const char* form_name(Form f) {
  return f == Form::kBlocking      ? "blocking"
         : f == Form::kNonblocking ? "non-blocking"
                                   : "persistent";
}

// fill() sets every buffer to its state before the call, call_*() issue it,
// verify() checks everything afterwards. A persistent request is started
// twice, with fill() before each start: the second activation must give the
// same result.
template <class Fill, class Blocking, class Start, class Init, class Verify>
void run_form(Form form, const Comm& comm, const std::string& where, Fill fill, Blocking blocking,
              Start start, Init init, Verify verify) {
  const std::string what = where + " (" + form_name(form) + " on " + comm.name + ")";
  auto expect_ok = [&](int status, const char* step) {
    EXPECT_EQ(status, COLL_SUCCESS) << what << ": " << step << ": " << coll_strerror(status) << ": "
                                    << coll_comm_last_error(comm.handle);
  };
  fill();
  if (form == Form::kBlocking) {
    expect_ok(blocking(), "call");
    verify(what);
    return;
  }
  coll_request_t request = COLL_REQUEST_NULL;
  if (form == Form::kNonblocking) {
    expect_ok(start(&request), "start");
    expect_ok(coll_wait(&request), "wait");
    EXPECT_EQ(request, COLL_REQUEST_NULL) << what;
    verify(what);
    return;
  }
  expect_ok(init(&request), "init");
  for (int activation = 0; activation < 2; ++activation) {
    if (activation > 0) fill();
    expect_ok(coll_start(request), "start");
    expect_ok(coll_wait(&request), "wait");
    verify(what + " activation " + std::to_string(activation));
  }
  expect_ok(coll_request_free(&request), "free");
}

// The three entry points of one collective with the same arguments
// (everything but the communicator and the request).
#define CALL_FORMS(NAME, ...)                                                       \
  [&] { return coll_##NAME(__VA_ARGS__, comm.handle); },                            \
      [&](coll_request_t* q) { return coll_i##NAME(__VA_ARGS__, comm.handle, q); }, \
      [&](coll_request_t* q) { return coll_##NAME##_init(__VA_ARGS__, comm.handle, q); }

// With one rank no algorithm runs; elsewhere the knob, when set, is obeyed.
void expect_knob_obeyed(const Comm& comm, const char* collective, const char* knob) {
  const char* used = coll_comm_last_algorithm(comm.handle, collective);
  ASSERT_NE(used, nullptr);
  EXPECT_STRNE(used, "") << collective;
  const char* wanted = std::getenv(knob);
  if (wanted && *wanted && comm.size > 1) {
    EXPECT_STREQ(used, wanted) << knob;
  }
}

// --- values ---------------------------------------------------------------

// One byte of what rank `from` sends to rank `to` (or contributes), at byte
// i of its block.
unsigned char byte_of(uint64_t seed, int from, int to, size_t i) {
  return static_cast<unsigned char>(mp::mix(seed, uint64_t(from) * 4099 + uint64_t(to), i) >> 56);
}
// What an output buffer holds before the call.
unsigned char canvas_byte(uint64_t seed, size_t i) {
  return static_cast<unsigned char>(mp::mix(seed ^ 0xCA4A5ull, 0x77, i) >> 56);
}

Bytes canvas(uint64_t seed, size_t bytes) {
  Bytes b(bytes);
  for (size_t i = 0; i < bytes; ++i) b[i] = canvas_byte(seed, i);
  return b;
}
// A buffer that is not passed (size 0: in place) is left alone.
void paint(GuardedBuffer& buf, const Bytes& image) {
  if (buf.bytes() > 0) std::memcpy(buf.data(), image.data(), std::min(buf.bytes(), image.size()));
}
void put_block(Bytes& image, size_t at, uint64_t seed, int from, int to, size_t len) {
  for (size_t i = 0; i < len; ++i) image[at + i] = byte_of(seed, from, to, i);
}

// The buffer holds exactly `image`, and its guards are intact.
void expect_image(const GuardedBuffer& buf, const Bytes& image, const std::string& what,
                  const char* which) {
  ASSERT_EQ(buf.bytes(), image.size()) << what;
  const auto* p = static_cast<const unsigned char*>(buf.data());
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < image.size(); ++i)
    if (p[i] != image[i] && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << mp::rank_tag() << " " << what << ": " << which << ": " << bad
                     << " wrong byte(s), the first at " << first << " of " << image.size();
  EXPECT_TRUE(buf.guards_intact()) << mp::rank_tag() << " " << what << ": write outside " << which;
}

// Reductions. Inputs as allreduce_test.cpp's: exact in any order.
template <typename T>
T input(coll_op_t op, uint64_t seed, int rank, size_t index) {
  const uint64_t bits = mp::mix(seed, static_cast<uint64_t>(rank) + 1, index);
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case COLL_SUM:
        return static_cast<T>(static_cast<int>(bits % 33) - 16);
      case COLL_PROD: {
        static constexpr T kFactors[4] = {-2, -1, 1, 2};
        return kFactors[bits % 4];
      }
      default:
        return static_cast<T>(static_cast<int>(bits % 2001) - 1000) / 4;
    }
  } else {
    switch (op) {
      case COLL_PROD:
        return static_cast<T>(bits | 1);
      case COLL_BAND:
        return static_cast<T>(bits | mp::mix(bits));
      case COLL_BOR:
        return static_cast<T>(bits & mp::mix(bits));
      default:
        return static_cast<T>(bits);
    }
  }
}

template <typename T>
T combine(coll_op_t op, T acc, T v) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case COLL_SUM:
        return acc + v;
      case COLL_PROD:
        return acc * v;
      case COLL_MIN:
        return v < acc ? v : acc;
      default:
        return v > acc ? v : acc;
    }
  } else {
    using U = std::make_unsigned_t<T>;
    const auto a = static_cast<uint64_t>(static_cast<U>(acc));
    const auto b = static_cast<uint64_t>(static_cast<U>(v));
    switch (op) {
      case COLL_SUM:
        return static_cast<T>(a + b);
      case COLL_PROD:
        return static_cast<T>(a * b);
      case COLL_MIN:
        return v < acc ? v : acc;
      case COLL_MAX:
        return v > acc ? v : acc;
      case COLL_BAND:
        return static_cast<T>(a & b);
      case COLL_BOR:
        return static_cast<T>(a | b);
      default:
        return static_cast<T>(a ^ b);
    }
  }
}

// The reduction of the inputs of ranks [lo, hi) at index (hi > lo).
template <typename T>
T reduced(coll_op_t op, uint64_t seed, int lo, int hi, size_t index) {
  T acc = input<T>(op, seed, lo, index);
  for (int r = lo + 1; r < hi; ++r) acc = combine(op, acc, input<T>(op, seed, r, index));
  return acc;
}

template <typename T>
void put_value(Bytes& image, size_t element, T value) {
  std::memcpy(image.data() + element * sizeof(T), &value, sizeof(T));
}
template <typename T>
Bytes inputs_of(coll_op_t op, uint64_t seed, int rank, size_t count) {
  Bytes b(count * sizeof(T));
  for (size_t i = 0; i < count; ++i) put_value<T>(b, i, input<T>(op, seed, rank, i));
  return b;
}

// --- v-layouts ---------------------------------------------------------------

// Blocks of a v-collective: counts in elements, uneven and some empty,
// placed in reverse rank order with gaps before and between them.
struct Layout {
  std::vector<size_t> counts, displs;
  size_t extent = 0;  // elements
  size_t total = 0;
};

Layout make_layout(const std::vector<size_t>& counts) {
  Layout l;
  l.counts = counts;
  l.displs.assign(counts.size(), 0);
  size_t at = 2;  // a gap before the first block
  for (size_t k = counts.size(); k-- > 0;) {
    l.displs[k] = counts[k] ? at : 12345678;  // an empty block's displacement is never used
    at += counts[k] + (counts[k] ? 3 : 0);
    l.total += counts[k];
  }
  l.extent = at;
  return l;
}

// Uneven counts for `ranks` blocks from `scale` to 2 scale (0: all empty);
// every third block is empty.
std::vector<size_t> uneven_counts(int ranks, size_t scale, uint64_t salt) {
  std::vector<size_t> c(static_cast<size_t>(ranks));
  for (int i = 0; i < ranks; ++i) {
    if (scale == 0 || (i + int(salt % 3)) % 3 == 1) continue;
    c[size_t(i)] = scale + size_t(i) * (scale / 4 + 1) % (scale + 1);
  }
  return c;
}

// Scales of the v-collectives' blocks: empty, tiny, around a slot, larger.
std::vector<size_t> v_scales(size_t element_size) {
  const size_t per_slot = mp::slot_bytes() / element_size;
  return {0, 1, 5, per_slot - 1, per_slot + 1, 3 * per_slot + 5};
}

std::vector<size_t> counts_with_large(size_t element_size) {
  std::vector<size_t> counts = mp::interesting_counts(element_size);
  counts.push_back(3 * mp::slot_bytes() / element_size + 5);
  return counts;
}

struct ReduceCase {
  coll_datatype_t datatype;
  coll_op_t op;
};
const ReduceCase kReduceCases[] = {{COLL_INT32, COLL_SUM},
                                   {COLL_DOUBLE, COLL_SUM},
                                   {COLL_FLOAT, COLL_MAX},
                                   {COLL_UINT8, COLL_BXOR},
                                   {COLL_INT64, COLL_PROD}};
const coll_datatype_t kMoveTypes[] = {COLL_UINT8, COLL_INT32, COLL_DOUBLE};

std::string case_tag(const char* coll, coll_datatype_t t, size_t count, bool in_place) {
  return std::string(coll) + " " + mp::datatype_name(t) + " count " + std::to_string(count) +
         (in_place ? " in place" : "");
}

// --- reduce, scan, exscan ----------------------------------------------------

template <typename T>
void check_reduce(const Comm& comm, Form form, coll_op_t op, size_t count, int root,
                  bool in_place) {
  const coll_datatype_t dt = mp::datatype_of<T>();
  const uint64_t seed = mp::mix(1, dt * 16 + op, count * 64 + size_t(root));
  const std::string where = case_tag("reduce", dt, count, in_place) + " " + mp::op_name(op) +
                            " root " + std::to_string(root);
  const bool is_root = comm.rank == root;
  const bool place = in_place && is_root;
  GuardedBuffer send(place ? 0 : count, sizeof(T));
  // Non-roots pass NULL half of the time, a buffer that must stay as it was
  // the other half.
  const bool pass_recv = is_root || (count + size_t(comm.rank)) % 2 == 0;
  GuardedBuffer recv(pass_recv ? count : 0, sizeof(T));
  const Bytes mine = inputs_of<T>(op, seed, comm.rank, count);
  const Bytes before = canvas(seed, recv.bytes());
  auto fill = [&] {
    paint(send, mine);
    paint(recv, place ? mine : before);
  };
  auto verify = [&](const std::string& what) {
    if (!place) expect_image(send, mine, what, "sendbuf");
    Bytes want = before;
    if (is_root)
      for (size_t i = 0; i < count; ++i)
        put_value<T>(want, i, reduced<T>(op, seed, 0, comm.size, i));
    expect_image(recv, want, what, "recvbuf");
  };
  run_form(form, comm, where, fill,
           CALL_FORMS(reduce, place ? COLL_IN_PLACE : send.data(),
                      pass_recv ? recv.data() : nullptr, count, dt, op, root),
           verify);
}

template <typename T>
void check_scan(const Comm& comm, Form form, coll_op_t op, size_t count, bool in_place,
                bool exclusive) {
  const coll_datatype_t dt = mp::datatype_of<T>();
  const uint64_t seed = mp::mix(2 + exclusive, dt * 16 + op, count);
  const std::string where =
      case_tag(exclusive ? "exscan" : "scan", dt, count, in_place) + " " + mp::op_name(op);
  GuardedBuffer send(in_place ? 0 : count, sizeof(T));
  GuardedBuffer recv(count, sizeof(T));
  const Bytes mine = inputs_of<T>(op, seed, comm.rank, count);
  const Bytes before = in_place ? mine : canvas(seed, recv.bytes());
  auto fill = [&] {
    paint(send, mine);
    paint(recv, before);
  };
  auto verify = [&](const std::string& what) {
    if (!in_place) expect_image(send, mine, what, "sendbuf");
    Bytes want = before;  // exscan leaves rank 0's recvbuf as it was
    const int hi = exclusive ? comm.rank : comm.rank + 1;
    if (hi > 0)
      for (size_t i = 0; i < count; ++i) put_value<T>(want, i, reduced<T>(op, seed, 0, hi, i));
    expect_image(recv, want, what, "recvbuf");
  };
  const void* sendbuf = in_place ? COLL_IN_PLACE : send.data();
  if (exclusive)
    run_form(form, comm, where, fill, CALL_FORMS(exscan, sendbuf, recv.data(), count, dt, op),
             verify);
  else
    run_form(form, comm, where, fill, CALL_FORMS(scan, sendbuf, recv.data(), count, dt, op),
             verify);
}

// --- reduce_scatter(_block) ------------------------------------------------------

// block_counts == nullptr: reduce_scatter_block of `count` per rank.
template <typename T>
void check_reduce_scatter(const Comm& comm, Form form, coll_op_t op,
                          const std::vector<size_t>* block_counts, size_t count, bool in_place) {
  const coll_datatype_t dt = mp::datatype_of<T>();
  const int n = comm.size;
  std::vector<size_t> counts = block_counts ? *block_counts : std::vector<size_t>(size_t(n), count);
  std::vector<size_t> off(size_t(n) + 1, 0);
  for (int i = 0; i < n; ++i) off[size_t(i) + 1] = off[size_t(i)] + counts[size_t(i)];
  const size_t total = off[size_t(n)], own = counts[size_t(comm.rank)];
  const uint64_t seed = mp::mix(4, dt * 16 + op, total * 7 + (block_counts ? 1 : 0));
  const std::string where = case_tag(block_counts ? "reduce_scatter" : "reduce_scatter_block", dt,
                                     block_counts ? total : count, in_place) +
                            " " + mp::op_name(op);
  const Bytes mine = inputs_of<T>(op, seed, comm.rank, total);
  GuardedBuffer send(in_place ? 0 : total, sizeof(T));
  GuardedBuffer recv(in_place ? total : own, sizeof(T));
  const Bytes before = in_place ? mine : canvas(seed, recv.bytes());
  auto fill = [&] {
    paint(send, mine);
    paint(recv, before);
  };
  auto verify = [&](const std::string& what) {
    if (!in_place) expect_image(send, mine, what, "sendbuf");
    Bytes got(static_cast<const unsigned char*>(recv.data()),
              static_cast<const unsigned char*>(recv.data()) + own * sizeof(T));
    Bytes want(own * sizeof(T));
    for (size_t i = 0; i < own; ++i)
      put_value<T>(want, i, reduced<T>(op, seed, 0, n, off[size_t(comm.rank)] + i));
    // In place, only the block at recvbuf's start is defined afterwards.
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += got[i] != want[i];
    EXPECT_EQ(bad, 0u) << mp::rank_tag() << " " << what << ": " << bad << " wrong byte(s)";
    EXPECT_TRUE(recv.guards_intact()) << mp::rank_tag() << " " << what;
  };
  const void* sendbuf = in_place ? COLL_IN_PLACE : send.data();
  if (block_counts)
    run_form(form, comm, where, fill,
             CALL_FORMS(reduce_scatter, sendbuf, recv.data(), counts.data(), dt, op), verify);
  else
    run_form(form, comm, where, fill,
             CALL_FORMS(reduce_scatter_block, sendbuf, recv.data(), count, dt, op), verify);
}

// --- allgather(v), gather(v) ----------------------------------------------------

// layout == nullptr: the uniform collective (count per rank, contiguous).
// root < 0: allgather(v).
void check_gathers(const Comm& comm, Form form, coll_datatype_t dt, const Layout* layout,
                   size_t count, int root, bool in_place) {
  const int n = comm.size, r = comm.rank;
  const size_t es = coll_datatype_size(dt);
  Layout uniform;
  if (!layout) {
    uniform.counts.assign(size_t(n), count);
    for (int i = 0; i < n; ++i) uniform.displs.push_back(size_t(i) * count);
    uniform.extent = uniform.total = size_t(n) * count;
  }
  const Layout& l = layout ? *layout : uniform;
  const bool all = root < 0;
  const bool receives = all || r == root;
  const bool place = in_place && receives;
  const size_t own = l.counts[size_t(r)];
  const uint64_t seed = mp::mix(5, dt, l.total * 3 + size_t(root + 1) + (layout ? 7 : 0));
  std::string where =
      case_tag(all ? (layout ? "allgatherv" : "allgather") : (layout ? "gatherv" : "gather"), dt,
               layout ? l.total : count, in_place);
  if (!all) where += " root " + std::to_string(root);
  GuardedBuffer send(place ? 0 : own, es);
  GuardedBuffer recv(receives ? l.extent : 0, es);
  Bytes mine(own * es);
  put_block(mine, 0, seed, r, -1, mine.size());
  Bytes before = canvas(seed, recv.bytes());
  if (place) put_block(before, l.displs[size_t(r)] * es, seed, r, -1, own * es);
  Bytes want = before;
  if (receives)
    for (int i = 0; i < n; ++i)
      put_block(want, l.displs[size_t(i)] * es, seed, i, -1, l.counts[size_t(i)] * es);
  auto fill = [&] {
    paint(send, mine);
    paint(recv, before);
  };
  auto verify = [&](const std::string& what) {
    if (!place) expect_image(send, mine, what, "sendbuf");
    expect_image(recv, want, what, "recvbuf");
  };
  const void* sendbuf = place ? COLL_IN_PLACE : send.data();
  void* recvbuf = receives ? recv.data() : nullptr;  // NULL where not significant
  const size_t* counts = receives ? l.counts.data() : nullptr;
  const size_t* displs = receives ? l.displs.data() : nullptr;
  if (all && layout)
    run_form(form, comm, where, fill,
             CALL_FORMS(allgatherv, sendbuf, own, recvbuf, l.counts.data(), l.displs.data(), dt),
             verify);
  else if (all)
    run_form(form, comm, where, fill, CALL_FORMS(allgather, sendbuf, recvbuf, count, dt), verify);
  else if (layout)
    run_form(form, comm, where, fill,
             CALL_FORMS(gatherv, sendbuf, own, recvbuf, counts, displs, dt, root), verify);
  else
    run_form(form, comm, where, fill, CALL_FORMS(gather, sendbuf, recvbuf, count, dt, root),
             verify);
}

// --- scatter(v) ------------------------------------------------------------------

void check_scatters(const Comm& comm, Form form, coll_datatype_t dt, const Layout* layout,
                    size_t count, int root, bool in_place) {
  const int n = comm.size, r = comm.rank;
  const size_t es = coll_datatype_size(dt);
  Layout uniform;
  if (!layout) {
    uniform.counts.assign(size_t(n), count);
    for (int i = 0; i < n; ++i) uniform.displs.push_back(size_t(i) * count);
    uniform.extent = uniform.total = size_t(n) * count;
  }
  const Layout& l = layout ? *layout : uniform;
  const bool is_root = r == root;
  const bool place = in_place && is_root;
  const size_t own = l.counts[size_t(r)];
  const uint64_t seed = mp::mix(6, dt, l.total * 3 + size_t(root) + (layout ? 7 : 0));
  const std::string where =
      case_tag(layout ? "scatterv" : "scatter", dt, layout ? l.total : count, in_place) + " root " +
      std::to_string(root);
  GuardedBuffer send(is_root ? l.extent : 0, es);
  GuardedBuffer recv(place ? 0 : own, es);
  Bytes source = canvas(seed ^ 1, send.bytes());
  if (is_root)
    for (int i = 0; i < n; ++i)
      put_block(source, l.displs[size_t(i)] * es, seed, root, i, l.counts[size_t(i)] * es);
  const Bytes before = canvas(seed, recv.bytes());
  Bytes want(recv.bytes());
  put_block(want, 0, seed, root, r, want.size());
  auto fill = [&] {
    paint(send, source);
    paint(recv, before);
  };
  auto verify = [&](const std::string& what) {
    expect_image(send, source, what, "sendbuf");
    expect_image(recv, want, what, "recvbuf");
  };
  const void* sendbuf = is_root ? send.data() : nullptr;  // NULL where not significant
  void* recvbuf = place ? COLL_IN_PLACE : recv.data();
  const size_t* counts = is_root ? l.counts.data() : nullptr;
  const size_t* displs = is_root ? l.displs.data() : nullptr;
  if (layout)
    run_form(form, comm, where, fill,
             CALL_FORMS(scatterv, sendbuf, counts, displs, recvbuf, own, dt, root), verify);
  else
    run_form(form, comm, where, fill, CALL_FORMS(scatter, sendbuf, recvbuf, count, dt, root),
             verify);
}

// --- alltoall(v) -----------------------------------------------------------------

// What rank `from` sends rank `to` in the alltoallv cases: uneven, some
// empty; symmetric for the in-place cases (there a rank sends each peer as
// much as it receives from it).
size_t pair_count(int from, int to, size_t scale, bool symmetric) {
  if (scale == 0) return 0;
  if (symmetric) return (from + to) % 3 == 1 ? 0 : scale + size_t(from + to) % (scale + 1);
  return (from + 2 * to) % 4 == 1 ? 0 : scale + size_t(3 * from + to) % (scale + 1);
}

// v: alltoallv with pair_count(.., count, ..) per pair; else alltoall of
// count per pair.
void check_alltoalls(const Comm& comm, Form form, coll_datatype_t dt, bool v, size_t count,
                     bool in_place) {
  const int n = comm.size, r = comm.rank;
  const size_t es = coll_datatype_size(dt);
  std::vector<size_t> sc(static_cast<size_t>(n)), rc(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    sc[size_t(i)] = v ? pair_count(r, i, count, in_place) : count;
    rc[size_t(i)] = v ? pair_count(i, r, count, in_place) : count;
  }
  Layout sl = make_layout(sc), rl = make_layout(rc);
  if (!v) {
    for (int i = 0; i < n; ++i) sl.displs[size_t(i)] = rl.displs[size_t(i)] = size_t(i) * count;
    sl.extent = rl.extent = size_t(n) * count;
  }
  const uint64_t seed = mp::mix(7, dt, count * 5 + (v ? 1 : 0) + (in_place ? 2 : 0));
  const std::string where = case_tag(v ? "alltoallv" : "alltoall", dt, count, in_place);
  GuardedBuffer send(in_place ? 0 : sl.extent, es);
  GuardedBuffer recv(rl.extent, es);
  Bytes source = canvas(seed ^ 1, send.bytes());
  for (int i = 0; i < n && !in_place; ++i)
    put_block(source, sl.displs[size_t(i)] * es, seed, r, i, sc[size_t(i)] * es);
  Bytes before = canvas(seed, recv.bytes());
  if (in_place)
    for (int i = 0; i < n; ++i)
      put_block(before, rl.displs[size_t(i)] * es, seed, r, i, rc[size_t(i)] * es);
  Bytes want = before;
  for (int i = 0; i < n; ++i)
    put_block(want, rl.displs[size_t(i)] * es, seed, i, r, rc[size_t(i)] * es);
  auto fill = [&] {
    paint(send, source);
    paint(recv, before);
  };
  auto verify = [&](const std::string& what) {
    expect_image(send, source, what, "sendbuf");
    expect_image(recv, want, what, "recvbuf");
  };
  const void* sendbuf = in_place ? COLL_IN_PLACE : send.data();
  if (v)
    run_form(form, comm, where, fill,
             CALL_FORMS(alltoallv, sendbuf, in_place ? nullptr : sc.data(),
                        in_place ? nullptr : sl.displs.data(), recv.data(), rc.data(),
                        rl.displs.data(), dt),
             verify);
  else
    run_form(form, comm, where, fill, CALL_FORMS(alltoall, sendbuf, recv.data(), count, dt),
             verify);
}

Comm world() { return describe(mp::world(), "world"); }

// --- the tests -----------------------------------------------------------------

class Reduce : public testing::TestWithParam<ReduceCase> {};

std::string reduce_case_name(const testing::TestParamInfo<ReduceCase>& info) {
  return std::string(mp::datatype_name(info.param.datatype)) + "_" + mp::op_name(info.param.op);
}

TEST_P(Reduce, EveryRootEveryCountInPlaceAndNot) {
  const ReduceCase c = GetParam();
  const Comm w = world();
  mp::visit_datatype(c.datatype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t count : counts_with_large(sizeof(T)))
      for (int root = 0; root < w.size; ++root)
        for (bool in_place : {false, true})
          check_reduce<T>(w, Form::kBlocking, c.op, count, root, in_place);
  });
  expect_knob_obeyed(w, "reduce", "COLL_REDUCE_ALGO");
}

TEST_P(Reduce, ScanAndExscanEveryCountInPlaceAndNot) {
  const ReduceCase c = GetParam();
  const Comm w = world();
  mp::visit_datatype(c.datatype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t count : counts_with_large(sizeof(T)))
      for (bool in_place : {false, true})
        for (bool exclusive : {false, true})
          check_scan<T>(w, Form::kBlocking, c.op, count, in_place, exclusive);
  });
  expect_knob_obeyed(w, "scan", "COLL_SCAN_ALGO");
  expect_knob_obeyed(w, "exscan", "COLL_EXSCAN_ALGO");
}

TEST_P(Reduce, ReduceScatterBlockAndUnevenReduceScatter) {
  const ReduceCase c = GetParam();
  const Comm w = world();
  mp::visit_datatype(c.datatype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (size_t count : counts_with_large(sizeof(T)))
      for (bool in_place : {false, true})
        check_reduce_scatter<T>(w, Form::kBlocking, c.op, nullptr, count, in_place);
    for (size_t scale : v_scales(sizeof(T))) {
      const std::vector<size_t> counts = uneven_counts(w.size, scale, scale);
      for (bool in_place : {false, true})
        check_reduce_scatter<T>(w, Form::kBlocking, c.op, &counts, 0, in_place);
    }
  });
  expect_knob_obeyed(w, "reduce_scatter_block", "COLL_REDUCE_SCATTER_BLOCK_ALGO");
  expect_knob_obeyed(w, "reduce_scatter", "COLL_REDUCE_SCATTER_ALGO");
}

INSTANTIATE_TEST_SUITE_P(SomeDatatypesAndOps, Reduce, testing::ValuesIn(kReduceCases),
                         reduce_case_name);

class Moves : public testing::TestWithParam<coll_datatype_t> {};

std::string move_case_name(const testing::TestParamInfo<coll_datatype_t>& info) {
  return mp::datatype_name(info.param);
}

TEST_P(Moves, AllgatherAndAllgatherv) {
  const coll_datatype_t dt = GetParam();
  const Comm w = world();
  const size_t es = coll_datatype_size(dt);
  for (size_t count : counts_with_large(es))
    for (bool in_place : {false, true})
      check_gathers(w, Form::kBlocking, dt, nullptr, count, -1, in_place);
  expect_knob_obeyed(w, "allgather", "COLL_ALLGATHER_ALGO");
  for (size_t scale : v_scales(es)) {
    const Layout l = make_layout(uneven_counts(w.size, scale, scale + 1));
    for (bool in_place : {false, true}) check_gathers(w, Form::kBlocking, dt, &l, 0, -1, in_place);
  }
  expect_knob_obeyed(w, "allgatherv", "COLL_ALLGATHERV_ALGO");
}

TEST_P(Moves, GatherAndGathervFromEveryRoot) {
  const coll_datatype_t dt = GetParam();
  const Comm w = world();
  const size_t es = coll_datatype_size(dt);
  for (int root = 0; root < w.size; ++root) {
    for (size_t count : counts_with_large(es))
      for (bool in_place : {false, true})
        check_gathers(w, Form::kBlocking, dt, nullptr, count, root, in_place);
    for (size_t scale : v_scales(es)) {
      const Layout l = make_layout(uneven_counts(w.size, scale, scale + size_t(root)));
      for (bool in_place : {false, true})
        check_gathers(w, Form::kBlocking, dt, &l, 0, root, in_place);
    }
  }
  expect_knob_obeyed(w, "gather", "COLL_GATHER_ALGO");
  expect_knob_obeyed(w, "gatherv", "COLL_GATHERV_ALGO");
}

TEST_P(Moves, ScatterAndScattervFromEveryRoot) {
  const coll_datatype_t dt = GetParam();
  const Comm w = world();
  const size_t es = coll_datatype_size(dt);
  for (int root = 0; root < w.size; ++root) {
    for (size_t count : counts_with_large(es))
      for (bool in_place : {false, true})
        check_scatters(w, Form::kBlocking, dt, nullptr, count, root, in_place);
    for (size_t scale : v_scales(es)) {
      const Layout l = make_layout(uneven_counts(w.size, scale, scale + size_t(root) + 2));
      for (bool in_place : {false, true})
        check_scatters(w, Form::kBlocking, dt, &l, 0, root, in_place);
    }
  }
  expect_knob_obeyed(w, "scatter", "COLL_SCATTER_ALGO");
  expect_knob_obeyed(w, "scatterv", "COLL_SCATTERV_ALGO");
}

TEST_P(Moves, AlltoallAndAlltoallv) {
  const coll_datatype_t dt = GetParam();
  const Comm w = world();
  const size_t es = coll_datatype_size(dt);
  for (size_t count : counts_with_large(es))
    for (bool in_place : {false, true})
      check_alltoalls(w, Form::kBlocking, dt, false, count, in_place);
  expect_knob_obeyed(w, "alltoall", "COLL_ALLTOALL_ALGO");
  for (size_t scale : v_scales(es))
    for (bool in_place : {false, true})
      check_alltoalls(w, Form::kBlocking, dt, true, scale, in_place);
  expect_knob_obeyed(w, "alltoallv", "COLL_ALLTOALLV_ALGO");
}

INSTANTIATE_TEST_SUITE_P(SomeDatatypes, Moves, testing::ValuesIn(kMoveTypes), move_case_name);

// Every collective once in each form, on the world, a dup'ed and a split
// communicator (two halves by parity, in reverse rank order), at a count
// that takes several chunks.
void every_collective(const Comm& c, Form form) {
  const size_t count = mp::slot_bytes() / sizeof(int32_t) + 3;
  const int root = c.size - 1;
  check_reduce<int32_t>(c, form, COLL_SUM, count, root, false);
  check_reduce<double>(c, form, COLL_SUM, 7, 0, true);
  check_scan<int64_t>(c, form, COLL_SUM, count, false, false);
  check_scan<int64_t>(c, form, COLL_SUM, 7, true, true);
  check_reduce_scatter<float>(c, form, COLL_MAX, nullptr, count, false);
  const std::vector<size_t> counts = uneven_counts(c.size, count, 5);
  check_reduce_scatter<int32_t>(c, form, COLL_SUM, &counts, 0, true);
  const Layout l = make_layout(uneven_counts(c.size, count, 3));
  check_gathers(c, form, COLL_INT32, nullptr, count, -1, false);
  check_gathers(c, form, COLL_INT32, &l, 0, -1, true);
  check_gathers(c, form, COLL_UINT8, nullptr, 7, root, false);
  check_gathers(c, form, COLL_INT32, &l, 0, 0, true);
  check_scatters(c, form, COLL_INT32, nullptr, count, root, false);
  check_scatters(c, form, COLL_DOUBLE, &l, 0, 0, true);
  check_alltoalls(c, form, COLL_INT32, false, count, false);
  check_alltoalls(c, form, COLL_INT32, true, 9, true);
}

TEST(EveryCollective, NonBlockingAndPersistentOnWorld) {
  every_collective(world(), Form::kNonblocking);
  every_collective(world(), Form::kPersistent);
}

TEST(EveryCollective, EveryFormOnDupAndSplitCommunicators) {
  coll_comm_t dup = COLL_COMM_NULL, half = COLL_COMM_NULL;
  ASSERT_EQ(coll_comm_dup(mp::world(), &dup), COLL_SUCCESS);
  ASSERT_EQ(coll_comm_split(mp::world(), mp::world_rank() % 2, -mp::world_rank(), &half),
            COLL_SUCCESS);
  for (Form form : {Form::kBlocking, Form::kNonblocking, Form::kPersistent}) {
    every_collective(describe(dup, "dup"), form);
    every_collective(describe(half, "split"), form);
  }
  EXPECT_EQ(coll_comm_free(&half), COLL_SUCCESS);
  EXPECT_EQ(coll_comm_free(&dup), COLL_SUCCESS);
}

// Several operations of different collectives outstanding at once on one
// communicator, completed in reverse order.
TEST(EveryCollective, SeveralOutstandingCompletedInReverse) {
  const Comm w = world();
  const size_t count = 1000;
  std::vector<int32_t> in(count * size_t(w.size)), gathered(count * size_t(w.size)), scanned(count),
      swapped(count * size_t(w.size));
  for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t(i) + w.rank * 7;
  coll_request_t q[3];
  ASSERT_EQ(coll_iallgather(in.data(), gathered.data(), count, COLL_INT32, w.handle, &q[0]),
            COLL_SUCCESS);
  ASSERT_EQ(coll_iscan(in.data(), scanned.data(), count, COLL_INT32, COLL_SUM, w.handle, &q[1]),
            COLL_SUCCESS);
  ASSERT_EQ(coll_ialltoall(in.data(), swapped.data(), count, COLL_INT32, w.handle, &q[2]),
            COLL_SUCCESS);
  for (int k = 2; k >= 0; --k) EXPECT_EQ(coll_wait(&q[k]), COLL_SUCCESS);
  size_t bad = 0;
  for (int j = 0; j < w.size; ++j)
    for (size_t i = 0; i < count; ++i) {
      bad += gathered[size_t(j) * count + i] != int32_t(i) + j * 7;
      bad += swapped[size_t(j) * count + i] != int32_t(size_t(w.rank) * count + i) + j * 7;
    }
  for (size_t i = 0; i < count; ++i)
    bad += scanned[i] != int32_t(i) * (w.rank + 1) + 7 * w.rank * (w.rank + 1) / 2;
  EXPECT_EQ(bad, 0u) << mp::rank_tag();
}

}  // namespace
