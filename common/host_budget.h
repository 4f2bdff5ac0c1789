#pragma once
// The host's budgets: how much memory this process can hold and how much disk a folder has, so
// that a size an input or a flag implies is refused before it is allocated or written, naming
// the flag or field and both sizes (docs/reliability.md, "Budgets"). Memory: the least of the
// machine's physical memory, the address-space and data limits (`ulimit -v`, `ulimit -d`, less
// the address space the process already holds) and the cgroup's memory.max (a container's
// limit). Disk: what statvfs says an unprivileged user may still write in the folder.

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <string>

#include <absl/status/status.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/strings.h"

namespace tpusim {

struct HostBudget {
  uint64_t bytes = 0;
  std::string source;  // what sets it: "physical memory", "ulimit -v", ...
};

namespace host_budget_internal {

inline uint64_t held_address_space() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  if (!(statm >> pages)) return 0;
  return pages * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// cgroup v2's memory.max for this process's group ("max" or absent: no limit).
inline uint64_t cgroup_memory_max() {
  std::ifstream group("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(group, line)) {
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  }
  if (path.empty()) return UINT64_MAX;
  std::ifstream max("/sys/fs/cgroup" + path + "/memory.max");
  uint64_t bytes = 0;
  return max >> bytes ? bytes : UINT64_MAX;
}

}  // namespace host_budget_internal

// What bounds this process's memory apart from what it holds: physical memory, the cgroup's
// memory.max, and the finite one of `ulimit -v` and `ulimit -d` (0: none). Read once a process:
// a reader asks for each record, and these do not change under it.
struct StaticMemoryLimits {
  HostBudget fixed;
  uint64_t rlimit_bytes = 0;
  const char* rlimit_source = "";
};

inline const StaticMemoryLimits& static_memory_limits() {
  static const StaticMemoryLimits limits = [] {
    StaticMemoryLimits l;
    l.fixed = {static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                   static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)),
               "physical memory"};
    if (const uint64_t cgroup = host_budget_internal::cgroup_memory_max(); cgroup < l.fixed.bytes)
      l.fixed = {cgroup, "the cgroup's memory.max"};
    for (const auto& [resource, source] :
         {std::pair{RLIMIT_AS, "ulimit -v"}, std::pair{RLIMIT_DATA, "ulimit -d"}}) {
      rlimit r{};
      if (::getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY &&
          (l.rlimit_bytes == 0 || r.rlim_cur < l.rlimit_bytes)) {
        l.rlimit_bytes = r.rlim_cur;
        l.rlimit_source = source;
      }
    }
    return l;
  }();
  return limits;
}

// The memory this process may still hold: the static limits, and an address-space or data
// limit less the address space already held (read from /proc only when such a limit is set).
inline HostBudget host_memory_budget() {
  const StaticMemoryLimits& l = static_memory_limits();
  HostBudget b = l.fixed;
  if (l.rlimit_bytes != 0) {
    const uint64_t held = host_budget_internal::held_address_space();
    const uint64_t left = l.rlimit_bytes > held ? l.rlimit_bytes - held : 0;
    if (left < b.bytes) b = {left, l.rlimit_source};
  }
  return b;
}

// The bytes an unprivileged user may still write in `dir` (UINT64_MAX when statvfs fails, or on
// a filesystem of no blocks: /proc and the like, whose writes fail on their own terms).
inline uint64_t free_disk_bytes(const std::string& dir) {
  struct statvfs s {};
  if (::statvfs(dir.c_str(), &s) != 0 || s.f_blocks == 0) return UINT64_MAX;
  return static_cast<uint64_t>(s.f_bavail) * static_cast<uint64_t>(s.f_frsize);
}

// `a` x `b`, or UINT64_MAX where it overflows.
inline uint64_t saturating_product(uint64_t a, uint64_t b) {
  return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

// `a` + `b`, or UINT64_MAX where it overflows.
inline uint64_t saturating_sum(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

// "3.29 GB" for a byte count (UINT64_MAX: "more than 18 EB").
inline std::string byte_size(uint64_t bytes) {
  if (bytes == UINT64_MAX) return "more than 18 EB";
  const char* units[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000 && u < 6) v /= 1000, ++u;
  return u == 0 ? str_cat(bytes, " bytes") : fmt::format("{:.2f} {}", v, units[u]);
}

// OK, or ResourceExhausted: "`what` needs N, over this host's memory budget of M (SOURCE)".
inline absl::Status check_host_memory(const std::string& what, uint64_t bytes) {
  const HostBudget b = host_memory_budget();
  if (bytes <= b.bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(str_cat(what, " needs ", byte_size(bytes),
                                              ", over this host's memory budget of ",
                                              byte_size(b.bytes), " (", b.source, ")"));
}

// OK, or ResourceExhausted: "`what` writes N into DIR, which has M free".
inline absl::Status check_free_disk(const std::string& what, uint64_t bytes,
                                    const std::string& dir) {
  const uint64_t free = free_disk_bytes(dir);
  if (bytes <= free) return absl::OkStatus();
  return absl::ResourceExhaustedError(str_cat(what, " writes ", byte_size(bytes), " into ", dir,
                                              ", which has ", byte_size(free), " free"));
}

}  // namespace tpusim
