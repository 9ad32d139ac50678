// Bruck's allgather, for small blocks: ceil(log2 n) steps on any n instead
// of the ring's n - 1 (bruck_schedule.hpp). Each rank gathers the blocks in
// rotated order (position i: the block of rank r + i) in a scratch buffer,
// where what it sends at each step is its first positions and what it
// receives lands right behind them, each a contiguous run; at the end the
// blocks go to their places in recvbuf. Serves allgather (blocks of count
// elements, contiguous) and allgatherv (recvcounts and displs, which every
// rank knows; empty blocks take no room, and an empty run sends nothing).
//
// Rank 0's rotation is the identity: for allgather it gathers straight in
// recvbuf.
//
// bruck_allgather_among runs the same schedule on some of the channel's
// ranks only (members[i] is the channel rank of position i): the others
// take no part, and no message goes to or from them. Only the pairs of
// members carry messages, so their pair sequences stay in step as long as
// every member starts this exchange in the same order relative to the
// channel's other operations that involve it (Communicator::
// create_group_body says why that holds).
//
// Deadlock freedom: at each step a rank sends its run to r - d and receives
// one of the same length from r + d (what r + d sends is exactly what r
// expects), chunk c of the send before chunk c of the receive. Order the
// work by (step, chunk, send before receive): a receive waits for the
// send with the same step and chunk on its peer, a send for the release of
// an earlier message on the same pair, which has a smaller key; every
// rank's program follows that order.
#include <cstring>
#include <vector>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "bruck_schedule.hpp"
#include "channel.hpp"

namespace coll {
namespace {

// members: the channel ranks taking part, by position (nullptr: all, in
// order); r: this rank's position.
Task gather_rotated(Channel& ch, const Args& a, Blocks blocks, const std::vector<int>* members,
                    int r) {
  const int n = members ? int(members->size()) : ch.size();
  auto rank_of = [members](int pos) { return members ? (*members)[size_t(pos)] : pos; };
  const size_t es = a.elem_size;
  auto* out = static_cast<char*>(a.recvbuf);
  // at[i]: where position i begins in the rotated buffer, in bytes.
  std::vector<size_t> at(size_t(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    at[size_t(i) + 1] = at[size_t(i)] + blocks.count(bruck::allgather_block_at(r, i, n)) * es;
  const bool direct = r == 0 && !blocks.counts;
  Scratch scratch;
  if (!direct) scratch.allocate(ch, at[size_t(n)]);
  char* rot = direct ? out : scratch.get();
  if (at[1] > 0 && rot != a.sendbuf) std::memcpy(rot, a.sendbuf, at[1]);

  for (int s = 0; s < bruck::num_steps(n); ++s) {
    const int d = bruck::distance(s), m = bruck::allgather_blocks(s, n);
    co_await exchange(ch, rank_of(bruck::allgather_send_to(r, s, n)), rot, at[size_t(m)],
                      rank_of(bruck::allgather_recv_from(r, s, n)),
                      at[size_t(d + m)] - at[size_t(d)], CopyTo{rot + at[size_t(d)]});
  }
  if (!direct) {
    for (int i = 0; i < n; ++i) {
      const int owner = bruck::allgather_block_at(r, i, n);
      const size_t len = at[size_t(i) + 1] - at[size_t(i)];
      if (len == 0) continue;  // its displacement may be anything
      // Our own block is there already when it was passed in place. Not
      // "dst != sendbuf": in place with an empty own block, sendbuf is
      // recvbuf itself, where another rank's block may go (displacement 0).
      if (a.in_place && owner == r) continue;
      std::memcpy(out + blocks.displ(owner) * es, rot + at[size_t(i)], len);
    }
    co_await ch.flush();  // the scratch was a source of sends
  }
}

}  // namespace

Task bruck_allgather(Channel& ch, const Args& a) {
  return gather_rotated(ch, a, Blocks::same(a.count), nullptr, ch.rank());
}

Task bruck_allgatherv(Channel& ch, const Args& a) {
  return gather_rotated(ch, a, Blocks::given(a.recvcounts, a.rdispls), nullptr, ch.rank());
}

Task bruck_allgather_among(Channel& ch, const std::vector<int>& members, int me, const Args& a) {
  return gather_rotated(ch, a, Blocks::same(a.count), &members, me);
}

}  // namespace coll
