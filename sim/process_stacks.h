#pragma once
// The address space a System's SystemC thread processes take before they run: each gets a
// coroutine stack of SC_DEFAULT_STACK_SIZE (256 KiB in Debian's SystemC 2.3.4) and a guard page,
// mapped when the kernel first starts. A pod slice has tens of thousands of them (v3-2048: two
// TensorCores on each of 2,048 chips, every unit a thread), so under an address-space limit
// (`ulimit -v`) the mapping can fail inside the kernel ("(E518) stack setup failed") where no
// status can be returned. System::create holds the stacks against the limit first and refuses
// the slice by name and figures.

#include <cstdint>
#include <string>
#include <systemc>

#include <absl/status/status.h>

namespace tpusim::sim {

// The thread and clocked-thread processes elaborated in this process, at any depth.
uint64_t elaborated_thread_processes();

// The bytes one thread process's stack maps: SC_DEFAULT_STACK_SIZE rounded up to whole pages,
// and a guard page.
uint64_t stack_bytes_per_thread();

// OK, or ResourceExhausted when `threads` stacks would not fit in what an address-space or
// data limit (`ulimit -v`, `ulimit -d`) leaves this process: "`what`'s N SystemC thread
// processes map stacks of K each, S in all, over ...". Physical memory does not bound them: a
// stack's pages are not touched until its thread runs that deep.
absl::Status check_thread_stacks(const std::string& what, uint64_t threads);

}  // namespace tpusim::sim
