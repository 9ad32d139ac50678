// Hierarchical reduce, for communicators that span hosts: reduce within
// each host to its leader, reduce among the leaders to the root host's
// leader, and, when the root is not that leader, the result from the
// leader to the root over the host's channel. Only the leaders' part
// crosses the network. A leader that is not the root reduces into
// scratch (its recvbuf is not significant). Parts as in hierarchy.hpp.
//
// Deadlock freedom: every rank runs node reduce, leaders' reduce (leaders
// only), the last hop (the root host's leader and the root only), in that
// order. The leaders' part waits on leaders that enter it right after
// their host's reduce; the last hop's receive at the root waits on its
// leader's send, which follows the leaders' part; the root is in no other
// part by then. Each part is deadlock-free by itself.
#include "blocks.hpp"
#include "hierarchy.hpp"

namespace coll {

Task hierarchical_reduce(Channel& ch, const Args& a) {
  const Hierarchy* h = ch.hierarchy();
  if (!h) {
    co_await run_flat(ch, Coll::kReduce, a);
    co_return;
  }
  const int me = ch.rank();
  const int root_host = h->host_of[size_t(a.root)];
  const int root_node_rank = h->node_rank[size_t(a.root)];
  const bool leader = h->leaders != nullptr;
  const bool root_is_leader = root_node_rank == 0;
  // Where a leader keeps its host's partial result: the root's recvbuf
  // when it is the root, scratch otherwise.
  Scratch partial;
  char* acc = static_cast<char*>(a.recvbuf);
  if (leader && me != a.root) {
    partial.allocate(ch, a.bytes);
    acc = partial.get();
  }
  co_await run_on(ch, *h->node, Coll::kReduce, vector_args(a.sendbuf, acc, a, 0));
  if (leader)
    co_await run_on(ch, *h->leaders, Coll::kReduce,
                    vector_args(h->host_of[size_t(me)] == root_host ? COLL_IN_PLACE : acc, acc, a,
                                root_host));
  if (root_is_leader || h->host_of[size_t(me)] != root_host) co_return;
  LentPins pins(ch, *h->node);
  if (leader) {
    co_await send_bytes(*h->node, root_node_rank, acc, a.bytes);
    co_await h->node->flush();  // the scratch goes with this frame
  } else if (me == a.root) {
    co_await recv_bytes(*h->node, 0, a.bytes, CopyTo{static_cast<char*>(a.recvbuf)});
  }
}

}  // namespace coll
