// Linear (chain) scan and exscan, for large vectors on few ranks: rank r
// receives the prefix of ranks 0 .. r - 1 from r - 1, chunk by chunk,
// reduces its input in and passes the prefix of 0 .. r on, so the chunks
// stream down the chain and every rank sends and receives the vector once
// (recursive doubling moves it log2(n) times). scan keeps the new prefix
// as its result and sends it from recvbuf; exscan keeps what it received
// and sends the new prefix from a scratch vector. Rank 0 only sends (its
// input), so its recvbuf is untouched by exscan.
//
// Every rank's result reduces its predecessors' inputs in rank order.
//
// Deadlock freedom: data only moves down the chain. Order the work by
// (chunk, position in the chain): a receive waits for the previous rank's
// send of the same chunk, a send for the release of an earlier chunk on
// the same pair, which the next rank makes right after receiving it. Both
// have smaller keys, and every rank's program follows the order.
#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "blocks.hpp"
#include "channel.hpp"

namespace coll {
namespace {

Task chain(Channel& ch, const Args& a, bool exclusive) {
  const int n = ch.size(), r = ch.rank();
  const size_t es = a.elem_size;
  const auto* in = static_cast<const char*>(a.sendbuf);
  auto* out = static_cast<char*>(a.recvbuf);
  const bool last = r == n - 1;
  Scratch scratch;
  if (exclusive && r > 0 && !last) scratch.allocate(ch, a.count * es);
  const size_t chunk_elems = std::max<size_t>(1, ch.slot_bytes() / es);
  for (size_t off = 0; off < a.count; off += chunk_elems) {
    const size_t len = std::min(chunk_elems, a.count - off);
    const size_t at = off * es, bytes = len * es;
    // What goes on to r + 1. Set where this rank has it: the last rank's
    // sendbuf may be NULL in an exscan, where even in + at is undefined.
    const char* prefix = nullptr;
    if (r > 0) {
      const void* data = co_await ch.recv(r - 1, bytes);
      if (!exclusive) {
        a.reduce(out + at, data, in + at, len);
        prefix = out + at;
      } else {
        // The new prefix first: in place, the input is where the result goes.
        if (!last) {
          a.reduce(scratch.get() + at, data, in + at, len);
          prefix = scratch.get() + at;
        }
        std::memcpy(out + at, data, bytes);
      }
      co_await ch.release(r - 1);
    } else {
      prefix = in + at;
      if (!exclusive && out != in) std::memcpy(out + at, in + at, bytes);
    }
    if (!last) co_await ch.send(r + 1, prefix, bytes);
  }
  if (scratch.get()) co_await ch.flush();  // the scratch was a source of sends
}

}  // namespace

Task linear_scan(Channel& ch, const Args& a) { return chain(ch, a, false); }
Task linear_exscan(Channel& ch, const Args& a) { return chain(ch, a, true); }

}  // namespace coll
