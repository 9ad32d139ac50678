// Hierarchical bcast, for communicators that span hosts: within the root's
// host from the root, then among the hosts' leaders from the root host's
// leader, then within every other host from its leader. The message
// crosses the network once per host (by the leaders' algorithm) instead of
// once per rank. Parts as in hierarchy.hpp.
//
// Deadlock freedom: every rank runs its parts in the order root host's
// bcast (its ranks only), leaders' bcast (leaders only), own host's bcast
// (the other hosts' ranks only). The root host's leader enters the
// leaders' part after the first, which needs only the root's host; the
// other leaders wait in it only for that leader, and their hosts' ranks
// only for them. Each part is deadlock-free among its own ranks.
#include "hierarchy.hpp"

namespace coll {

Task hierarchical_bcast(Channel& ch, const Args& a) {
  const Hierarchy* h = ch.hierarchy();
  if (!h) {
    co_await run_flat(ch, Coll::kBcast, a);
    co_return;
  }
  const int root_host = h->host_of[size_t(a.root)];
  const bool root_side = h->host_of[size_t(ch.rank())] == root_host;
  if (root_side)
    co_await run_on(ch, *h->node, Coll::kBcast,
                    vector_args(nullptr, a.recvbuf, a, h->node_rank[size_t(a.root)]));
  // The leaders' channel has the hosts in order: the root host's leader is
  // its rank root_host.
  if (h->leaders)
    co_await run_on(ch, *h->leaders, Coll::kBcast, vector_args(nullptr, a.recvbuf, a, root_host));
  if (!root_side)
    co_await run_on(ch, *h->node, Coll::kBcast, vector_args(nullptr, a.recvbuf, a, 0));
}

}  // namespace coll
