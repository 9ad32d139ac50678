// What recursive_doubling_allreduce.cpp and rabenseifner_allreduce.cpp
// share: on n ranks, not necessarily a power of two, the ranks beyond the
// largest power of two p fold their data into a partner first and get the
// result back last (binomial::Doubling, as in MPICH); in between, the p
// exchange ranks run the algorithm's steps. Data moves between two partners
// in slot-sized chunks, chunk c of what one sends before chunk c of what it
// receives, the order of the deadlock arguments in both algorithms.
// Chunks that only copy into recvbuf may be placed (Channel::offer): a
// recvbuf from coll_mem_alloc then takes them where they belong, with no
// slot and no copy out; the messages, their order and so the deadlock
// arguments are the same either way.
#pragma once

#include <algorithm>
#include <cstring>

#include "algorithms.hpp"
#include "binomial_schedule.hpp"
#include "channel.hpp"

namespace coll {

// One rank's part of the allreduce.
struct DoublingFrame {
  DoublingFrame(Channel& channel, const Args& args)
      : ch(channel),
        a(args),
        es(args.elem_size),
        in(static_cast<const char*>(args.sendbuf)),
        out(static_cast<char*>(args.recvbuf)),
        chunk_elems(std::max<size_t>(1, channel.slot_bytes() / args.elem_size)),
        d(binomial::doubling(channel.size())),
        v(binomial::doubling_rank(channel.rank(), d)) {}

  int rank_of(int exchange_rank) const { return binomial::doubling_to_rank(exchange_rank, d); }

  // Sends elements [tx, tx_end) of src to peer and receives elements
  // [rx, rx_end) from it, chunk by chunk; take(at, data, len) consumes each
  // received chunk (at and len in elements) before its slot goes back.
  // flush_first: take overwrites the source of the chunk just sent, which
  // Channel::send wants unchanged until a flush.
  // placed: each chunk sent goes to its own offset of peer's recvbuf if
  // peer offered it (offer_out), and a chunk received may already be in
  // ours; take must then be copy_to_out(), which such a chunk skips.
  template <class Take>
  Task exchange(int peer, const char* src, size_t tx, size_t tx_end, size_t rx, size_t rx_end,
                Take take, bool flush_first = false, bool placed = false) const {
    for (size_t c = 0;; c += chunk_elems) {
      const bool sending = tx + c < tx_end, receiving = rx + c < rx_end;
      if (!sending && !receiving) break;
      if (sending) {
        const size_t len = std::min(chunk_elems, tx_end - tx - c) * es;
        if (placed)
          co_await ch.send_placed(peer, src + (tx + c) * es, len, (tx + c) * es);
        else
          co_await ch.send(peer, src + (tx + c) * es, len);
      }
      if (receiving) {
        const size_t len = std::min(chunk_elems, rx_end - rx - c);
        char* const dst = out + (rx + c) * es;
        const void* data = placed ? co_await ch.recv_placed(peer, dst, len * es)
                                  : co_await ch.recv(peer, len * es);
        if (flush_first) co_await ch.flush();
        if (data != dst) take(rx + c, data, len);  // a slot is never in recvbuf
        co_await ch.release(peer);
      }
    }
  }
  Task send_all(int peer, const char* src, bool placed = false) const {
    return exchange(peer, src, 0, a.count, 0, 0, [](size_t, const void*, size_t) {}, false,
                    placed);
  }
  template <class Take>
  Task receive_all(int peer, Take take, bool placed = false) const {
    return exchange(peer, nullptr, 0, 0, 0, a.count, take, false, placed);
  }
  // The messages exchange() moves for elements [lo, hi).
  size_t chunks(size_t lo, size_t hi) const { return (hi - lo + chunk_elems - 1) / chunk_elems; }
  // Offers recvbuf to peer for its next `messages` messages after `after`
  // (Channel::offer; nothing where recvbuf is not such memory).
  void offer_out(int peer, uint64_t messages, uint64_t after = 0) const {
    ch.offer(peer, out, a.count * es, messages, after);
  }
  // A take that copies the chunk into recvbuf.
  auto copy_to_out() const {
    return [this](size_t at, const void* data, size_t len) {
      std::memcpy(out + at * es, data, len * es);
    };
  }

  Channel& ch;
  const Args& a;
  const size_t es;
  const char* const in;
  char* const out;
  const size_t chunk_elems;
  const binomial::Doubling d;
  const int v;  // exchange rank; -1 for a rank folded away
};

// Runs steps(frame, mine) on the exchange ranks, mine being where the
// rank's partial result lives (sendbuf, or recvbuf once a fold was reduced
// into it); steps leaves the result in recvbuf. The fold around it: each of
// the first extra even ranks hands its data to the odd rank above it, which
// reduces it in (the lower rank's operand first) and sends the result back
// at the end.
// steps(f, mine) -> Task: the exchanges among the pof2 ranks that remain.
template <class Steps>
Task run_folded(Channel& ch, const Args& a, Steps steps) {
  const DoublingFrame f(ch, a);
  const int r = ch.rank();
  if (f.v < 0) {  // folded: hand the data to r + 1, get the result back
    // The result is r + 1's only message to us after our data, which it
    // needs first: the offer is always in when the result goes.
    f.offer_out(r + 1, f.chunks(0, a.count));
    co_await f.send_all(r + 1, f.in);
    co_await ch.flush();  // sendbuf may be recvbuf, overwritten next
    co_await f.receive_all(r + 1, f.copy_to_out(), true);
    co_return;
  }
  const bool takes_fold = r < 2 * f.d.extra;
  if (takes_fold) {
    co_await f.receive_all(r - 1, [&](size_t at, const void* data, size_t len) {
      a.reduce(f.out + at * f.es, data, f.in + at * f.es, len);  // r - 1's operand first
    });
  }
  co_await steps(f, takes_fold ? f.out : f.in);
  if (takes_fold) co_await f.send_all(r - 1, f.out, true);
}

}  // namespace coll
