// What recursive_doubling_allreduce.cpp and rabenseifner_allreduce.cpp
// share: on n ranks, not necessarily a power of two, the ranks beyond the
// largest power of two p fold their data into a partner first and get the
// result back last (binomial::Doubling, as in MPICH); in between, the p
// exchange ranks run the algorithm's steps. Data moves between two partners
// in slot-sized chunks, chunk c of what one sends before chunk c of what it
// receives, the order of the deadlock arguments in both algorithms.
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
  template <class Take>
  Task exchange(int peer, const char* src, size_t tx, size_t tx_end, size_t rx, size_t rx_end,
                Take take, bool flush_first = false) const {
    for (size_t c = 0;; c += chunk_elems) {
      const bool sending = tx + c < tx_end, receiving = rx + c < rx_end;
      if (!sending && !receiving) break;
      if (sending)
        co_await ch.send(peer, src + (tx + c) * es, std::min(chunk_elems, tx_end - tx - c) * es);
      if (receiving) {
        const size_t len = std::min(chunk_elems, rx_end - rx - c);
        const void* data = co_await ch.recv(peer, len * es);
        if (flush_first) co_await ch.flush();
        take(rx + c, data, len);
        co_await ch.release(peer);
      }
    }
  }
  Task send_all(int peer, const char* src) const {
    return exchange(peer, src, 0, a.count, 0, 0, [](size_t, const void*, size_t) {});
  }
  template <class Take>
  Task receive_all(int peer, Take take) const {
    return exchange(peer, nullptr, 0, 0, 0, a.count, take);
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
    co_await f.send_all(r + 1, f.in);
    co_await ch.flush();  // sendbuf may be recvbuf, overwritten next
    co_await f.receive_all(r + 1, f.copy_to_out());
    co_return;
  }
  const bool takes_fold = r < 2 * f.d.extra;
  if (takes_fold) {
    co_await f.receive_all(r - 1, [&](size_t at, const void* data, size_t len) {
      a.reduce(f.out + at * f.es, data, f.in + at * f.es, len);  // r - 1's operand first
    });
  }
  co_await steps(f, takes_fold ? f.out : f.in);
  if (takes_fold) co_await f.send_all(r - 1, f.out);
}

}  // namespace coll
