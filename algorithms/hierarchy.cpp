#include "hierarchy.hpp"

namespace coll {
namespace {

// The automatic choice for a call on ch (Communicator::choose is the same,
// with its choices cached).
const Algorithm& automatic(Channel& ch, Coll c, const Args& args) {
  const Algorithm& chosen = choose_algorithm(c, ch.size(), args.select_bytes);
  return ch.zero_copy_spares_copies(args.bytes) ? zero_copy_choice(chosen, c) : chosen;
}

}  // namespace

Task run_on(Channel& parent, Channel& sub, Coll c, Args args) {
  const CollectiveInfo& info = collective_info(c);
  info.check(args, sub.size(), sub.rank());
  if (info.empty(args)) co_return;
  if (sub.size() == 1) {
    info.local(args);
    co_return;
  }
  LentPins pins(parent, sub);
  if (sub.needs_local_registration())
    for (auto [buf, len] : info.buffers(args, sub.size())) sub.pin(buf, len);
  co_await automatic(sub, c, args).run(sub, args);
  co_await sub.flush();
}

Task run_flat(Channel& ch, Coll c, const Args& args) {
  return automatic(ch, c, args).run(ch, args);
}

}  // namespace coll
