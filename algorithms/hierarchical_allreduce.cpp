// Hierarchical allreduce, for communicators that span hosts: reduce within
// each host to its leader (the host's lowest rank), allreduce among the
// leaders, bcast within each host from its leader. Across the network each
// host then sends and receives what one rank of a flat algorithm would,
// instead of what all its ranks would (a flat ring or recursive doubling
// crosses the network from every rank of a host). Each part is an
// ordinary collective on a sub-channel, by the algorithm the selection
// table gives its size (hierarchy.hpp).
//
// Deterministic: the host grouping and every part's algorithm depend only
// on the host map, the sizes and the rank counts.
//
// Deadlock freedom: every rank runs its parts in the order node reduce,
// leaders' allreduce (leaders only), node bcast, and each part is
// deadlock-free among its own ranks. A leader's allreduce waits only for
// other leaders, each of which enters it right after its host's reduce,
// which needs nothing but that host's ranks' first parts; a non-leader's
// bcast waits only for its leader, which gets there after the allreduce.
// No part waits for a later part of anyone.
#include "hierarchy.hpp"

namespace coll {

Task hierarchical_allreduce(Channel& ch, const Args& a) {
  const Hierarchy* h = ch.hierarchy();
  if (!h) {
    co_await run_flat(ch, Coll::kAllreduce, a);
    co_return;
  }
  // The input is at a.sendbuf (recvbuf when in place: the check put it
  // there); the leader's reduce lands in recvbuf, in place when they are
  // one buffer.
  co_await run_on(ch, *h->node, Coll::kReduce, vector_args(a.sendbuf, a.recvbuf, a, 0));
  if (h->leaders)
    co_await run_on(ch, *h->leaders, Coll::kAllreduce,
                    vector_args(COLL_IN_PLACE, a.recvbuf, a, 0));
  co_await run_on(ch, *h->node, Coll::kBcast, vector_args(nullptr, a.recvbuf, a, 0));
}

}  // namespace coll
