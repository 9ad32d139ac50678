// Binomial-tree broadcast, for small messages: ceil(log2 n) hops from the
// root, in slot-sized chunks (binomial_schedule.hpp). Each rank copies a
// chunk into its buffer and forwards it from there, the biggest subtree
// first, so that a forwarded source never changes (Channel::send) and the
// slot goes back to the parent at once.
//
// Deadlock freedom: data only moves down the tree. Order the work by
// (chunk, depth): a receive waits for the parent's send of the same chunk,
// a send for the release of an earlier chunk on the same pair; both have
// smaller keys, and each rank's program follows the key.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "channel.hpp"

namespace coll {

Task binomial_bcast(Channel& ch, const Args& a) {
  const int n = ch.size();
  const int v = binomial::relative(ch.rank(), a.root, n);
  const int parent = v == 0 ? -1 : binomial::absolute(binomial::parent(v), a.root, n);
  // The children's ranks, in the order they are sent to.
  std::vector<int> kids = binomial::children(v, n);
  std::reverse(kids.begin(), kids.end());
  for (int& kid : kids) kid = binomial::absolute(kid, a.root, n);
  auto* buf = static_cast<char*>(a.recvbuf);
  const size_t chunk = ch.slot_bytes();
  for (size_t off = 0; off < a.bytes; off += chunk) {
    const size_t len = std::min(chunk, a.bytes - off);
    if (parent >= 0) {
      const void* data = co_await ch.recv(parent, len);
      std::memcpy(buf + off, data, len);
      co_await ch.release(parent);
    }
    for (int kid : kids) co_await ch.send(kid, buf + off, len);
  }
}

}  // namespace coll
