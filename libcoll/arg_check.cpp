#include "arg_check.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "algorithms.hpp"
#include "channel.hpp"
#include "communicator.hpp"
#include "datatype.hpp"
#include "error.hpp"
#include "operation.hpp"
#include "user_op.hpp"

namespace coll {
namespace {

// splitmix64's finalizer: chains and sums of mixed values collide only by
// chance (about 2^-64).
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// counts[i] is rank i's: the order matters.
template <class Count>
uint64_t hash_counts(int n, Count count) {
  uint64_t h = mix(uint64_t(n));
  for (int i = 0; i < n; ++i) h = mix(h ^ uint64_t(count(i)));
  return h;
}

// One (from, to, count) of an alltoallv. Summed over every rank's sends
// and over every rank's receives, the two totals are equal exactly when
// each sendcounts[j] at i is recvcounts[i] at j (but for a chance
// collision): an order-free sum, because each rank knows only its own row.
uint64_t edge(int from, int to, size_t count) {
  return mix(mix((uint64_t(uint32_t(from)) << 32) | uint32_t(to)) ^ count);
}

bool rooted(Coll c) {
  switch (c) {
    case Coll::kBcast:
    case Coll::kReduce:
    case Coll::kGather:
    case Coll::kGatherv:
    case Coll::kScatter:
    case Coll::kScatterv:
      return true;
    default:
      return false;
  }
}

// Counts that every rank passes whole and that must be equal everywhere.
bool agreed_counts(Coll c) { return c == Coll::kAllgatherv || c == Coll::kReduceScatter; }

CallSignature signature_of(const Operation& op, int n, int me) {
  const Args& a = op.args;
  const Coll c = op.info->id;
  CallSignature s{};
  s.seq = op.seq;
  s.collective = int32_t(c);
  if (op.refused) {
    // Nothing of the arguments is read: they are what this rank refused.
    s.datatype = CallSignature::kRefused;
    s.op = op.refused;
    return s;
  }
  s.datatype = c == Coll::kBarrier ? -1 : a.datatype;
  // The descriptor's check sets reduce for reductions only. A user
  // operator's handle is local to its process (ranks that made their ops in
  // another order hold other values): only "a user op" is compared.
  s.op = !a.reduce ? -1 : is_user_op_handle(a.op) ? -2 : a.op;
  s.root = rooted(c) ? a.root : -1;
  switch (c) {
    case Coll::kAllgatherv:
    case Coll::kReduceScatter:
      s.count = hash_counts(n, [&](int i) { return a.recvcounts[i]; });
      s.total = a.count;  // the check sets it to the sum of recvcounts
      break;
    case Coll::kGatherv:
      s.mine = a.sendcount;
      if (me == a.root) s.pair = hash_counts(n, [&](int i) { return a.recvcounts[i]; });
      break;
    case Coll::kScatterv:
      s.mine = a.recvcount;
      if (me == a.root) s.pair = hash_counts(n, [&](int i) { return a.sendcounts[i]; });
      break;
    case Coll::kAlltoallv:
      for (int j = 0; j < n; ++j) {
        s.mine += edge(me, j, a.sendcounts[j]);
        s.pair += edge(j, me, a.recvcounts[j]);
      }
      break;
    default:
      s.count = a.count;
  }
  return s;
}

// The fields every rank must pass alike, in the order they are reported:
// the call's number first (a rank that skipped a call differs in all the
// rest too).
enum class Field { kSeq, kCollective, kRoot, kDatatype, kOp, kCount };
constexpr Field kFields[] = {Field::kSeq,      Field::kCollective, Field::kRoot,
                             Field::kDatatype, Field::kOp,         Field::kCount};

uint64_t value(const CallSignature& s, Field f) {
  switch (f) {
    case Field::kSeq:
      return s.seq;
    case Field::kCollective:
      return uint64_t(uint32_t(s.collective));
    case Field::kRoot:
      return uint64_t(uint32_t(s.root));
    case Field::kDatatype:
      return uint64_t(uint32_t(s.datatype));
    case Field::kOp:
      return uint64_t(uint32_t(s.op));
    case Field::kCount:
      return s.count;
  }
  return 0;
}

const char* collective_name(int32_t c) {
  return c >= 0 && c < kCollCount ? collective_info(Coll(c)).name : "an unknown collective";
}

// "passed root 1", "called coll_bcast", ...: what one rank did.
std::string describe(const CallSignature& s, Field f) {
  switch (f) {
    case Field::kSeq:
      return strfmt("is at its call %llu on this communicator",
                    static_cast<unsigned long long>(s.seq));
    case Field::kCollective:
      return strfmt("called coll_%s", collective_name(s.collective));
    case Field::kRoot:
      return strfmt("passed root %d", s.root);
    case Field::kDatatype:
      return strfmt("passed datatype %s", datatype_name(s.datatype));
    case Field::kOp:
      return strfmt("passed op %s", op_name(s.op));
    case Field::kCount:
      if (agreed_counts(Coll(s.collective)))
        return strfmt("passed recvcounts summing to %llu (hash %016llx)",
                      static_cast<unsigned long long>(s.total),
                      static_cast<unsigned long long>(s.count));
      return strfmt("passed count %llu", static_cast<unsigned long long>(s.count));
  }
  return "";
}

// A pair of counts that disagree, as one rank found it in the second
// exchange: rank `from` sends `sent` elements to rank `to`, which expects
// `expected`. from < 0: this rank found none.
struct Finding {
  int64_t from = -1, to = -1;
  uint64_t sent = 0, expected = 0;
};

// gatherv, scatterv: the root's per-rank counts against each rank's own;
// alltoallv: every rank's sends against every rank's receives.
bool counts_pair(Coll c, const std::vector<CallSignature>& all, int root) {
  const int n = int(all.size());
  if (c == Coll::kGatherv || c == Coll::kScatterv)
    return hash_counts(n, [&](int i) { return all[size_t(i)].mine; }) == all[size_t(root)].pair;
  uint64_t sent = 0, received = 0;
  for (const CallSignature& s : all) sent += s.mine, received += s.pair;
  return sent == received;
}

// What this rank can tell of the pair that disagrees (gatherv, scatterv:
// only the root can tell). For alltoallv, got[i] is what rank i sends this
// one.
Finding find_pair(const Operation& op, const std::vector<CallSignature>& all,
                  const std::vector<size_t>& got, int me) {
  const Args& a = op.args;
  const int n = int(all.size());
  Finding f;
  switch (op.info->id) {
    case Coll::kGatherv:
    case Coll::kScatterv:
      if (me != a.root) break;
      for (int i = 0; i < n; ++i) {
        const size_t at_root = op.info->id == Coll::kGatherv ? a.recvcounts[i] : a.sendcounts[i];
        if (all[size_t(i)].mine != at_root) {
          f = {i, me, all[size_t(i)].mine, at_root};
          break;
        }
      }
      break;
    default:  // alltoallv
      for (int i = 0; i < n; ++i)
        if (got[size_t(i)] != a.recvcounts[i]) {
          f = {i, me, got[size_t(i)], a.recvcounts[i]};
          break;
        }
  }
  return f;
}

std::string describe_pair(Coll c, const Finding& f) {
  const int from = int(f.from), to = int(f.to);
  const auto sent = static_cast<unsigned long long>(f.sent);
  const auto expected = static_cast<unsigned long long>(f.expected);
  switch (c) {
    case Coll::kGatherv:
      return strfmt(
          "rank %d passed sendcount %llu, rank %d (the root) passed recvcounts[%d] = %llu", from,
          sent, to, from, expected);
    case Coll::kScatterv:
      return strfmt(
          "rank %d passed recvcount %llu, rank %d (the root) passed sendcounts[%d] = %llu", from,
          sent, to, from, expected);
    default:
      return strfmt("rank %d passed sendcounts[%d] = %llu, rank %d passed recvcounts[%d] = %llu",
                    from, to, sent, to, from, expected);
  }
}

}  // namespace

Task agree_on_arguments(Channel& ch, const Operation& op, ArgCheck& scratch, bool compare) {
  const int n = ch.size(), me = ch.rank();
  // Control messages: a rank that meets a call's data here, or whose call
  // meets these, fails instead of misreading them (Channel::ControlScope).
  Channel::ControlScope control(ch);
  scratch.mine = signature_of(op, n, me);
  co_await exchange_bytes(ch, Coll::kAllgather, bruck_allgather, &scratch.mine, scratch.all.data(),
                          sizeof(CallSignature));
  const std::vector<CallSignature>& all = scratch.all;
  // A rank that refused the call on its own arguments: every rank fails
  // it, before comparing what the others passed (the refuser's fields are
  // empty). The refuser keeps its own message (it names the argument in
  // full); the others get the first refuser's, cut to a Reason, from a
  // second exchange.
  for (int r = 0; r < n; ++r) {
    const CallSignature& s = all[size_t(r)];
    if (s.datatype != CallSignature::kRefused) continue;
    struct Reason {
      char text[96];
    };
    Reason mine{};
    const size_t len = std::min(op.refusal.size(), sizeof mine.text - 1);
    std::memcpy(mine.text, op.refusal.data(), len);
    if (len < op.refusal.size()) std::memcpy(mine.text + len - 3, "...", 3);
    std::vector<Reason> reasons(static_cast<size_t>(n));
    co_await exchange_bytes(ch, Coll::kAllgather, bruck_allgather, &mine, reasons.data(),
                            sizeof(Reason));
    co_await ch.flush();  // as below: the exchanges' sources may still be read
    if (op.refused) throw AgreedError(op.refused, op.refusal);
    Reason& theirs = reasons[size_t(r)];
    theirs.text[sizeof theirs.text - 1] = '\0';
    throw AgreedError(s.op, strfmt("coll_%s: rank %d refused the call: %s", op.info->name, r,
                                   theirs.text));
  }
  if (!compare) co_return;
  std::string mismatch;
  for (int r = 1; r < n && mismatch.empty(); ++r)
    for (Field f : kFields)
      if (value(all[size_t(r)], f) != value(all[0], f)) {
        mismatch = strfmt("rank %d %s, rank 0 %s", r, describe(all[size_t(r)], f).c_str(),
                          describe(all[0], f).c_str());
        break;
      }
  const Coll c = op.info->id;
  const bool paired = c == Coll::kGatherv || c == Coll::kScatterv || c == Coll::kAlltoallv;
  if (mismatch.empty() && paired && !counts_pair(c, all, op.args.root)) {
    // Every rank knows that some pair disagrees, not which: a second
    // exchange (only on this path) tells. For alltoallv each rank first
    // learns what every rank sends it.
    std::vector<size_t> got(static_cast<size_t>(n));
    if (c == Coll::kAlltoallv)
      co_await exchange_bytes(ch, Coll::kAlltoall, pairwise_alltoall, op.args.sendcounts,
                              got.data(), sizeof(size_t));
    const Finding mine = find_pair(op, all, got, me);
    std::vector<Finding> found(static_cast<size_t>(n));
    co_await exchange_bytes(ch, Coll::kAllgather, bruck_allgather, &mine, found.data(),
                            sizeof(Finding));
    for (const Finding& f : found)
      if (f.from >= 0) {
        mismatch = describe_pair(c, f);
        break;
      }
    if (mismatch.empty()) mismatch = "the per-rank counts do not pair (hash mismatch)";
  }
  if (mismatch.empty()) co_return;
  // The exchanges' sources (the findings in this frame, the scratch) may
  // still be read by the transport (RDMA): wait for those writes before
  // the frame goes and the next call refills the scratch.
  co_await ch.flush();
  throw AgreedError(COLL_ERR_INVALID_ARG,
                    strfmt("coll_%s: argument mismatch: %s", op.info->name, mismatch.c_str()));
}

}  // namespace coll
