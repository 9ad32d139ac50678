// The safety net for shared memory: libcoll names its segments
// "coll-<COLL_JOBID>-..." and unlinks them itself, but a rank that was
// killed cannot. collrun removes what is left when the job ends.
#pragma once

#include <string>
#include <vector>

namespace collrun {

inline constexpr const char* kShmDirectory = "/dev/shm";

// "coll-<job id>-": the start of every segment name of the job.
std::string shm_prefix_for_job(const std::string& job_id);

// Unlinks every entry of `directory` whose name starts with `prefix`;
// returns the names removed. A missing directory removes nothing.
std::vector<std::string> remove_entries_with_prefix(const std::string& directory,
                                                    const std::string& prefix);

}  // namespace collrun
