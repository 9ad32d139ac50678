// A process's scheduler state, from /proc/PID/stat: 'R', 'S', 'Z' (exited,
// not yet reaped: it still answers kill(0)), 'T'/'t' (stopped, traced), ...;
// 0 when it cannot be read (gone, or not ours to see). Header-only: the shm
// transport and collrun (which does not link libcoll) both ask.
#pragma once

#include <sys/types.h>

#include <cstdio>
#include <cstring>

namespace coll {

inline char process_state(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  std::FILE* f = std::fopen(path, "r");
  if (!f) return 0;
  char line[512] = {};
  const bool got = std::fgets(line, sizeof line, f) != nullptr;
  std::fclose(f);
  // "pid (comm) S ...": comm may hold spaces and parentheses, so the last ')'.
  const char* paren = got ? std::strrchr(line, ')') : nullptr;
  return paren && paren[1] == ' ' ? paren[2] : 0;
}

}  // namespace coll
