#include "rank_environment.hpp"

#include <algorithm>

namespace collrun {
namespace {

std::string_view name_of(std::string_view entry) { return entry.substr(0, entry.find('=')); }

}  // namespace

bool is_shell_name(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

RankEnvironment::RankEnvironment(const std::vector<std::string>& entries) {
  for (const std::string& entry : entries) set_entry(entry);
}

void RankEnvironment::set(std::string_view name, std::string_view value) {
  std::string entry = std::string(name) + "=" + std::string(value);
  for (std::string& existing : entries_)
    if (name_of(existing) == name) {
      existing = std::move(entry);
      return;
    }
  entries_.push_back(std::move(entry));
}

void RankEnvironment::set_entry(std::string_view entry) {
  size_t eq = entry.find('=');
  if (eq == std::string_view::npos) return;  // not an assignment
  set(entry.substr(0, eq), entry.substr(eq + 1));
}

bool RankEnvironment::contains(std::string_view name) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const std::string& entry) { return name_of(entry) == name; });
}

std::vector<std::string> RankEnvironment::for_remote_rank(
    const std::vector<std::string>& also) const {
  std::vector<std::string> chosen;
  for (const std::string& entry : entries_) {
    std::string_view name = name_of(entry);
    // Never the job secret: a remote rank's variables go on its agent's
    // command line, which ps shows to every user; it reads the secret from
    // its lifeline instead (remote_rank_script).
    if (name == "COLL_JOB_SECRET") continue;
    bool wanted =
        name.starts_with("COLL_") || std::find(also.begin(), also.end(), name) != also.end();
    if (wanted && is_shell_name(name)) chosen.push_back(entry);
  }
  return chosen;
}

}  // namespace collrun
