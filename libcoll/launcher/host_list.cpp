#include "host_list.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "launch_options.hpp"
#include "small_file.hpp"

namespace collrun {
namespace {

// A slot count: a positive integer no larger than the ranks collrun starts
// at all, so that sums over hosts cannot overflow.
std::optional<int> parse_count(std::string_view text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  int value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  if (value < 1 || value > kMaxRanks) return std::nullopt;
  return value;
}

std::string count_rule() { return "a whole number from 1 to " + std::to_string(kMaxRanks); }

// Adds `host` to `hosts`, merging it into an earlier mention of its name.
void add_host(std::vector<HostSlots>& hosts, HostSlots host) {
  auto same = std::find_if(hosts.begin(), hosts.end(),
                           [&](const HostSlots& h) { return h.name == host.name; });
  if (same == hosts.end()) {
    hosts.push_back(std::move(host));
    return;
  }
  same->slots = std::min(same->slots + host.slots, kMaxRanks);
  if (host.max_slots)
    same->max_slots = std::min(same->max_slots.value_or(0) + *host.max_slots, kMaxRanks);
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (;;) {
    size_t at = text.find(separator);
    parts.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return parts;
    text.remove_prefix(at + 1);
  }
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

std::string bad_name_message(std::string_view name) {
  return "'" + std::string(name) +
         "' is not a host name collrun can pass to the launch agent (letters, digits, '.', "
         "'_', '-', an optional user@ in front)";
}

}  // namespace

bool is_valid_host_name(std::string_view name) {
  if (name.empty() || name.size() > 255) return false;
  size_t at = name.find('@');
  if (at != std::string_view::npos) {
    if (at == 0 || name.find('@', at + 1) != std::string_view::npos) return false;
    // The user part follows the same rules as the host part.
    return is_valid_host_name(name.substr(0, at)) && is_valid_host_name(name.substr(at + 1));
  }
  if (name.front() == '-' || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

std::vector<HostSlots> parse_host_list(std::string_view text) {
  std::vector<HostSlots> hosts;
  for (std::string_view entry : split(text, ',')) {
    if (entry.empty())
      throw UsageError("-H '" + std::string(text) + "': an empty host entry (two commas?)");
    HostSlots host;
    size_t colon = entry.rfind(':');
    std::string_view name = entry.substr(0, colon);
    if (colon != std::string_view::npos) {
      std::optional<int> slots = parse_count(entry.substr(colon + 1));
      if (!slots)
        throw UsageError("-H '" + std::string(text) + "': the slots of '" + std::string(entry) +
                         "' must be " + count_rule());
      host.slots = *slots;
    }
    if (!is_valid_host_name(name))
      throw UsageError("-H '" + std::string(text) + "': " + bad_name_message(name));
    host.name = std::string(name);
    add_host(hosts, std::move(host));
  }
  return hosts;
}

std::vector<HostSlots> parse_hostfile(std::string_view contents, const std::string& file_name) {
  std::vector<HostSlots> hosts;
  int line_number = 0;
  for (std::string_view line : split(contents, '\n')) {
    ++line_number;
    std::string where = file_name + ":" + std::to_string(line_number) + ": ";
    line = line.substr(0, line.find('#'));
    std::vector<std::string_view> words = words_of(line);
    if (words.empty()) continue;
    if (!is_valid_host_name(words[0])) throw UsageError(where + bad_name_message(words[0]));
    HostSlots host;
    host.name = std::string(words[0]);
    for (size_t i = 1; i < words.size(); ++i) {
      std::string_view word = words[i];
      size_t eq = word.find('=');
      std::string_view key = word.substr(0, eq);
      if (eq == std::string_view::npos)
        throw UsageError(where + "'" + std::string(word) +
                         "': expected slots=N or max_slots=N after the host name");
      std::optional<int> count = parse_count(word.substr(eq + 1));
      if (!count)
        throw UsageError(where + "'" + std::string(word) + "': " + std::string(key) + " must be " +
                         count_rule());
      if (key == "slots") {
        host.slots = *count;
      } else if (key == "max_slots" || key == "max-slots") {
        host.max_slots = *count;
      } else {
        throw UsageError(where + "unknown attribute '" + std::string(key) +
                         "' (collrun reads slots=N and max_slots=N)");
      }
    }
    if (host.max_slots && *host.max_slots < host.slots)
      throw UsageError(where + "max_slots=" + std::to_string(*host.max_slots) +
                       " is less than slots=" + std::to_string(host.slots));
    add_host(hosts, std::move(host));
  }
  if (hosts.empty()) throw UsageError(file_name + ": no hosts in the hostfile");
  return hosts;
}

std::vector<HostSlots> load_hostfile(const std::string& path) {
  std::string contents;
  const std::string why = coll::read_small_file(path, coll::kMaxConfigFileBytes, &contents);
  if (!why.empty()) throw UsageError("--hostfile " + path + ": " + why);
  return parse_hostfile(contents, path);
}

}  // namespace collrun
