#include "sim/units/core_memory.h"

namespace tpusim::sim {

void CoreNumerics::post(bool shared, HostRange read, HostRange write, std::function<void()> job) {
  if (vmem_.base_is_stable() && (!shared || hbm_.base_is_stable())) {
    worker_.post(index(core_), shared, read, write, std::move(job));
  } else {
    worker_.drain();
    job();
  }
}

void CoreNumerics::before_vmem_access(const isa::Block* read, const isa::Block* write) {
  if (!worker_.may_be_busy()) return;
  const uint8_t* base = vmem_.stable_base();  // the worker runs jobs only then
  const HostRange r = read != nullptr ? host_range(base, *read) : HostRange{};
  worker_.before_access(index(core_), &r, 1,
                        write != nullptr ? host_range(base, *write) : HostRange{});
}

}  // namespace tpusim::sim
