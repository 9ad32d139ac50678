// Dissemination barrier: in round k every rank signals rank + 2^k and waits
// for rank - 2^k; after ceil(log2 n) rounds every rank has heard, directly
// or not, from every other. Messages are empty: a flag write each.
#include "algorithms.hpp"
#include "channel.hpp"
#include "ring_schedule.hpp"

namespace coll {

void dissemination_barrier(Channel& ch) {
  const int n = ch.size(), r = ch.rank();
  for (int k = 1; k < n; k <<= 1) {
    ch.send(ring::mod(r + k, n), nullptr, 0);
    ch.recv(ring::mod(r - k, n), 0);
    ch.release(ring::mod(r - k, n));
  }
}

}  // namespace coll
