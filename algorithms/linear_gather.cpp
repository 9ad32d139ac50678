// Linear gather, for large blocks and for gatherv: every rank sends its
// block straight to the root, in slot-sized chunks; the root takes the
// ranks in turn from root + 1 on. No rank forwards another's data, so the
// root receives every byte once and nothing waits for a third rank. Serves
// gather (blocks of count) and gatherv (sendcount here, recvcounts and
// displs at the root; an empty block is neither sent nor expected).
//
// Deadlock freedom: only the root receives, and the other ranks only send:
// a send waits for the root's release of an earlier chunk from the same
// rank, which the root makes right after receiving it; the root waits only
// for chunks that their senders send unconditionally.
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {
namespace {

Task linear(Channel& ch, const Args& a, size_t send_bytes_here, Blocks at_root) {
  const int n = ch.size(), r = ch.rank(), root = a.root;
  const size_t es = a.elem_size;
  if (r != root) {
    co_await send_bytes(ch, root, static_cast<const char*>(a.sendbuf), send_bytes_here);
    co_return;
  }
  auto* out = static_cast<char*>(a.recvbuf);
  auto block = [&](int i) { return out + at_root.displ(i) * es; };
  const size_t own = at_root.count(r) * es;
  if (own > 0 && a.sendbuf != block(r)) std::memcpy(block(r), a.sendbuf, own);
  for (int k = 1; k < n; ++k) {
    const int i = (root + k) % n;
    const size_t len = at_root.count(i) * es;
    if (len > 0) co_await recv_bytes(ch, i, len, CopyTo{block(i)});
  }
}

}  // namespace

Task linear_gather(Channel& ch, const Args& a) {
  return linear(ch, a, a.bytes, Blocks::same(a.count));
}

Task linear_gatherv(Channel& ch, const Args& a) {
  return linear(ch, a, a.sendcount * a.elem_size, Blocks::given(a.recvcounts, a.rdispls));
}

}  // namespace coll
