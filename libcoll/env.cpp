#include "env.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "error.hpp"

namespace coll {
namespace {

double env_double(const char* name, double fallback, double min, double max) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v, &end);
  if (errno || *end || !(d >= min && d <= max))
    fail(COLL_ERR_INVALID_ARG, "%s=%s: expected a number in [%g, %g]", name, v,
         min, max);
  return d;
}

// Accepts a byte count with an optional K/M/G suffix (powers of 1024); what
// names the kind of number in the error ("a byte count", "a count").
size_t env_number(const char* name, size_t fallback, size_t min, size_t max, const char* what) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  errno = 0;
  // Digits only: strtoull also takes blanks and a sign, and negates what
  // follows a '-' (COLL_ZCOPY_THRESHOLD=-1 was read as 2^64 - 1 and
  // silently turned zero-copy off).
  const bool digits = *v >= '0' && *v <= '9';
  unsigned long long n = std::strtoull(v, &end, 10);
  unsigned shift = 0;
  if (*end == 'k' || *end == 'K') shift = 10, ++end;
  else if (*end == 'm' || *end == 'M') shift = 20, ++end;
  else if (*end == 'g' || *end == 'G') shift = 30, ++end;
  if (!digits || errno || *end || end == v || (n << shift) >> shift != n || (n << shift) < min ||
      (n << shift) > max)
    fail(COLL_ERR_INVALID_ARG, "%s=%s: expected %s in [%zu, %zu]", name, v, what, min, max);
  return static_cast<size_t>(n << shift);
}

size_t env_bytes(const char* name, size_t fallback, size_t min, size_t max) {
  return env_number(name, fallback, min, max, "a byte count");
}
// Slots, polls: a count (the K/M/G suffixes still work, as powers of 1024).
size_t env_count(const char* name, size_t fallback, size_t min, size_t max) {
  return env_number(name, fallback, min, max, "a count");
}

// 0 or 1; absent or empty -> fallback.
bool env_flag(const char* name, bool fallback = false) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  if ((v[0] != '0' && v[0] != '1') || v[1])
    fail(COLL_ERR_INVALID_ARG, "%s=%s: expected 0 or 1", name, v);
  return v[0] == '1';
}

}  // namespace

std::string env_string(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : std::string(fallback);
}

std::vector<std::string> env_list(const char* name) {
  std::vector<std::string> items;
  const std::string text = env_string(name);
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const size_t first = text.find_first_not_of(" \t", start);
    if (first < comma) {
      const size_t last = text.find_last_not_of(" \t", comma - 1);
      items.push_back(text.substr(first, last - first + 1));
    }
    start = comma + 1;
  }
  return items;
}

Config load_config() {
  Config c;
  c.transport = env_string("COLL_TRANSPORT");
  if (c.transport == "auto") c.transport.clear();
  c.reduce_kernels = env_string("COLL_REDUCE_KERNELS");
  c.timeout_s = env_double("COLL_TIMEOUT", c.timeout_s, 0.01, 1e9);
  c.slot_bytes = env_bytes("COLL_SLOT_SIZE", c.slot_bytes, 64, size_t{1} << 30);
  // Slots are cache-line aligned so that flags never share a line with data.
  c.slot_bytes = (c.slot_bytes + 63) & ~size_t{63};
  // Three slots is the least that keeps the ring deadlock-free: a rank may
  // run up to two messages ahead of what it received (algorithms/ring_*).
  c.num_slots = int(env_count("COLL_NUM_SLOTS", size_t(c.num_slots), 3, 16));
  if (!env_string("COLL_ZCOPY_THRESHOLD").empty())
    c.zcopy_threshold = env_bytes("COLL_ZCOPY_THRESHOLD", 0, 0, std::numeric_limits<size_t>::max());
  c.regcache = env_flag("COLL_REGCACHE", true);
  c.regcache_monitor = env_string("COLL_REGCACHE_MONITOR", "auto");
  if (c.regcache_monitor != "auto" && c.regcache_monitor != "userfaultfd" &&
      c.regcache_monitor != "none")
    fail(COLL_ERR_INVALID_ARG, "COLL_REGCACHE_MONITOR=%s: expected auto, userfaultfd or none",
         c.regcache_monitor.c_str());
  c.regcache_verify = env_flag("COLL_REGCACHE_VERIFY");
  c.debug = env_flag("COLL_DEBUG");
  c.async_progress = env_flag("COLL_ASYNC_PROGRESS");
  c.check_args = env_flag("COLL_CHECK_ARGS");
  c.fast_path = env_flag("COLL_FAST_PATH", true);
  c.hierarchy = env_flag("COLL_HIERARCHY", true);
  const std::string reproducible = env_string("COLL_REPRODUCIBLE");
  if (reproducible == "order")
    c.reproducible = COLL_REPRODUCIBLE_ORDER;
  else if (reproducible == "exact")
    c.reproducible = COLL_REPRODUCIBLE_EXACT;
  else if (!reproducible.empty() && reproducible != "0" && reproducible != "off")
    fail(COLL_ERR_INVALID_ARG, "COLL_REPRODUCIBLE=%s: expected order, exact, off or 0",
         reproducible.c_str());
  if (!env_string("COLL_SHM_ARENA").empty())
    c.shm_arena_bytes = env_bytes("COLL_SHM_ARENA", 0, size_t{1} << 20, size_t{1} << 44);
  c.fault_inject = env_string("COLL_FAULT_INJECT");
  c.debug_dump_s = env_double("COLL_DEBUG_DUMP", 0, 0, 1e9);
  c.dump_signal = env_flag("COLL_DUMP_SIGNAL", true);
  if (!env_string("COLL_SPIN_POLLS").empty())
    c.spin_polls = env_count("COLL_SPIN_POLLS", 0, 0, uint64_t(1) << 40);
  return c;
}

}  // namespace coll
