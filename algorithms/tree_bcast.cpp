// Double binary tree broadcast, for medium messages: the root sends half t
// of the buffer to the top of tree t, a binary tree over the other n - 1
// ranks (NCCL's double binary tree, tree_schedule.hpp), in chunks that
// stream down both trees at once. A rank forwards in at most one tree (the
// root's, plus one rank when n - 1 is odd), so the forwarding work is
// shared by about half the ranks each way.
//
// Deadlock freedom: data only moves down. Order the work by (chunk, tree,
// depth in that tree): a receive waits for the parent's send with the same
// chunk and tree, a send for the release of an earlier message on the same
// pair; both have smaller keys, and each rank's program follows the key.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "channel.hpp"
#include "tree_schedule.hpp"

namespace coll {

Task tree_bcast(Channel& ch, const Args& a) {
  const int n = ch.size(), r = ch.rank();
  const tree::Node node[2] = {tree::bcast_node(n, a.root, 0, r), tree::bcast_node(n, a.root, 1, r)};
  const size_t chunk_bytes = tree::pipeline_chunk_elems(a.bytes, 1, ch.slot_bytes());
  const size_t chunks = tree::num_chunks(a.bytes, chunk_bytes);
  auto* buf = static_cast<char*>(a.recvbuf);
  for (size_t c = 0; c < chunks; ++c) {
    for (int t = 0; t < 2; ++t) {
      const tree::Range x = tree::chunk(a.bytes, t, chunks, c);
      if (x.count == 0) continue;
      if (node[t].parent != tree::kNone) {
        const void* data = co_await ch.recv(node[t].parent, x.count);
        std::memcpy(buf + x.offset, data, x.count);
        co_await ch.release(node[t].parent);
      }
      for (int child : node[t].child)
        if (child != tree::kNone) co_await ch.send(child, buf + x.offset, x.count);
    }
  }
}

}  // namespace coll
