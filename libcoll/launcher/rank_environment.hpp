// A rank's environment as an ordered list of NAME=value entries in which
// each name appears once: a later setting replaces an earlier one.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace collrun {

class RankEnvironment {
 public:
  RankEnvironment() = default;
  // Entries of an environ-style list; later duplicates replace earlier ones.
  explicit RankEnvironment(const std::vector<std::string>& entries);

  void set(std::string_view name, std::string_view value);
  void set_entry(std::string_view entry);  // "NAME=value"
  bool contains(std::string_view name) const;

  const std::vector<std::string>& entries() const { return entries_; }

  // The entries a remote rank must be given explicitly (ssh forwards no
  // environment): every COLL_* name and the names in `also`, each only
  // where it is a valid shell variable name.
  std::vector<std::string> for_remote_rank(const std::vector<std::string>& also) const;

 private:
  std::vector<std::string> entries_;
};

// Letters, digits and '_', not starting with a digit.
bool is_shell_name(std::string_view name);

}  // namespace collrun
