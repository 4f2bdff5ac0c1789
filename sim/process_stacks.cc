#include "sim/process_stacks.h"

#include <unistd.h>

#include "common/host_budget.h"
#include "common/strings.h"

namespace tpusim::sim {

namespace {

uint64_t threads_among(const std::vector<sc_core::sc_object*>& objects) {
  uint64_t threads = 0;
  for (const sc_core::sc_object* object : objects) {
    const std::string kind = object->kind();
    if (kind == "sc_thread_process" || kind == "sc_cthread_process") ++threads;
    threads += threads_among(object->get_child_objects());
  }
  return threads;
}

}  // namespace

uint64_t elaborated_thread_processes() {
  return threads_among(sc_core::sc_get_top_level_objects());
}

uint64_t stack_bytes_per_thread() {
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const auto stack = static_cast<uint64_t>(sc_core::SC_DEFAULT_STACK_SIZE);
  return (stack + page - 1) / page * page + page;
}

absl::Status check_thread_stacks(const std::string& what, uint64_t threads) {
  const StaticMemoryLimits& limits = static_memory_limits();
  if (limits.rlimit_bytes == 0) return absl::OkStatus();
  const uint64_t per_thread = stack_bytes_per_thread();
  const uint64_t bytes = saturating_product(threads, per_thread);
  const HostBudget left = host_memory_budget();
  if (bytes <= left.bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(str_cat(
      what, "'s ", threads, " SystemC thread processes map stacks of ", byte_size(per_thread),
      " each, ", byte_size(bytes), " in all, over the ", byte_size(left.bytes),
      " of address space this process has left (", limits.rlimit_source, ")"));
}

}  // namespace tpusim::sim
