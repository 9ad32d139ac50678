// Hierarchical barrier, for communicators that span hosts: a barrier within
// each host, one among the hosts' leaders, and one within each host again.
// Only the leaders' part crosses the network. Parts as in hierarchy.hpp.
//
// Correctness: a rank leaves after its host's second barrier, which its
// leader enters only after the leaders' barrier, which no leader leaves
// before every leader entered it, each after its own host's first barrier,
// which needs every rank of that host to have arrived. So nobody leaves
// before everybody arrived.
//
// Deadlock freedom: every rank runs node barrier, leaders' barrier (leaders
// only), node barrier, in that order; each part waits only on ranks that
// reach it after finishing earlier parts, and is deadlock-free by itself.
#include "hierarchy.hpp"

namespace coll {

Task hierarchical_barrier(Channel& ch, const Args& a) {
  const Hierarchy* h = ch.hierarchy();
  if (!h) {
    co_await run_flat(ch, Coll::kBarrier, a);
    co_return;
  }
  co_await run_on(ch, *h->node, Coll::kBarrier, Args{});
  if (h->leaders) co_await run_on(ch, *h->leaders, Coll::kBarrier, Args{});
  co_await run_on(ch, *h->node, Coll::kBarrier, Args{});
}

}  // namespace coll
