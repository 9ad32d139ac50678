// The hosts a job may run on and how many ranks each takes, from -H or
// --hostfile, in Open MPI's syntax.
//
//   -H a:2,b:2,c     host a with 2 slots, b with 2, c with 1
//   --hostfile FILE  one host a line: "a slots=2", "c" (1 slot),
//                    "b slots=4 max_slots=8"; '#' starts a comment
//
// A host named again (in either form) adds its slots to the first mention,
// as with Open MPI; hosts keep the order of their first mention.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace collrun {

struct HostSlots {
  std::string name;  // as given: also the ranks' COLL_HOST_ID
  int slots = 1;
  // The most ranks --oversubscribe may put there (hostfile max_slots).
  std::optional<int> max_slots;
};

// Both throw UsageError naming the offending entry (and line).
std::vector<HostSlots> parse_host_list(std::string_view text);
std::vector<HostSlots> parse_hostfile(std::string_view contents, const std::string& file_name);
// Reads and parses FILE; throws UsageError when it cannot be read.
std::vector<HostSlots> load_hostfile(const std::string& path);

// A name the launch agent can be given as one argument: letters, digits,
// '.', '_', '-', and "user@" in front, not starting with '-' (an ssh
// option) or '.'.
bool is_valid_host_name(std::string_view name);

}  // namespace collrun
