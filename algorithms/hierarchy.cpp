#include "hierarchy.hpp"

namespace coll {

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
  const Algorithm* algo = &choose_algorithm(c, sub.size(), args.select_bytes);
  if (sub.zero_copy_spares_copies(args.bytes)) algo = &zero_copy_choice(*algo, c);
  co_await algo->run(sub, args);
  co_await sub.flush();
}

Task run_flat(Channel& ch, Coll c, const Args& args) {
  const Algorithm* algo = &choose_algorithm(c, ch.size(), args.select_bytes);
  if (ch.zero_copy_spares_copies(args.bytes)) algo = &zero_copy_choice(*algo, c);
  return algo->run(ch, args);
}

}  // namespace coll
