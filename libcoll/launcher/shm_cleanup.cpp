#include "shm_cleanup.hpp"

#include <dirent.h>
#include <unistd.h>

#include <memory>
#include <string_view>

namespace collrun {

std::string shm_prefix_for_job(const std::string& job_id) { return "coll-" + job_id + "-"; }

std::vector<std::string> remove_entries_with_prefix(const std::string& directory,
                                                    const std::string& prefix) {
  std::vector<std::string> removed;
  // An empty prefix would match everything: never remove "all of it".
  if (prefix.empty()) return removed;
  struct CloseDir {
    void operator()(DIR* dir) const { ::closedir(dir); }
  };
  std::unique_ptr<DIR, CloseDir> dir(::opendir(directory.c_str()));
  if (!dir) return removed;
  // Collect first, unlink after: unlinking while readdir walks the
  // directory may skip entries.
  std::vector<std::string> matching;
  while (dirent* entry = ::readdir(dir.get())) {
    std::string_view name(entry->d_name);
    if (name.starts_with(prefix)) matching.emplace_back(name);
  }
  for (const std::string& name : matching)
    if (::unlink((directory + "/" + name).c_str()) == 0) removed.push_back(name);
  return removed;
}

}  // namespace collrun
