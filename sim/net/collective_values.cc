#include "sim/net/collective_values.h"

#include <cstring>
#include <vector>

#include "sim/net/collective_numerics.h"

namespace tpusim::sim {

void write_collective_results(const CollectiveGroup& group, const CollectivePlan& plan,
                              const std::function<Memory&(CoreId core)>& memory_of,
                              NumericsWorker* numerics) {
  // Waits only for the numerics jobs that write what the collective reads or touch what it
  // writes, so the members' other work goes on (an overlapped all-reduce starts while they still
  // compute). While a memory's host storage may still move, everything queued runs first.
  const std::vector<CoreId>& cores = group.cores;
  bool stable = true;
  for (CoreId core : cores) stable = stable && memory_of(core).base_is_stable();
  if (numerics != nullptr && !stable) numerics->drain();
  auto settle = [&](const HostRange* reads, size_t count, HostRange write) {
    if (numerics != nullptr && stable) numerics->before_shared_access(reads, count, write);
  };
  const uint64_t n = group.c.elements();
  std::vector<std::vector<float>> src(cores.size(), std::vector<float>(n));
  for (size_t i = 0; i < cores.size(); ++i) {
    Memory& memory = memory_of(cores[i]);
    uint8_t* to = reinterpret_cast<uint8_t*>(src[i].data());
    group.src[i].for_each(0, n * 4, [&](uint64_t address, uint64_t bytes) {
      const uint8_t* at = memory.base_covering(address, address + bytes) + address;
      const HostRange read{at, at + bytes};
      settle(&read, 1, {});
      std::memcpy(to, at, bytes);
      to += bytes;
    });
  }
  const auto dst = collective_results(group.c, cores, plan, src, group.peers);
  for (size_t i = 0; i < cores.size(); ++i) {
    Memory& memory = memory_of(cores[i]);
    const uint8_t* from = reinterpret_cast<const uint8_t*>(dst[i].data());
    group.dst[i].for_each(0, dst[i].size() * 4, [&](uint64_t address, uint64_t bytes) {
      uint8_t* at = memory.base_covering(address, address + bytes) + address;
      settle(nullptr, 0, {at, at + bytes});
      std::memcpy(at, from, bytes);
      from += bytes;
    });
  }
}

}  // namespace tpusim::sim
