#pragma once
// Strong ids for the slice's TensorCores and chips. Both are numbered from 0 across the slice
// (a core's number is the ISA's CoreProgram.core), and both were bare uint32_t, so a core could
// be passed where a chip was meant (write_hbm takes a chip, write_vmem a core). As enum classes,
// the way DRAMSys numbers its banks and ranks, they do not convert into each other or from an
// integer by accident: CoreId{3} makes one, index(id) reads it. sim/core_map.h maps between them.

#include <cstdint>
#include <ostream>

namespace tpusim::sim {

enum class CoreId : uint32_t {};
enum class ChipId : uint32_t {};

constexpr uint32_t index(CoreId core) { return static_cast<uint32_t>(core); }
constexpr uint32_t index(ChipId chip) { return static_cast<uint32_t>(chip); }

// "core 3", "chip 1": for streams (a test's failure message).
inline std::ostream& operator<<(std::ostream& os, CoreId core) {
  return os << "core " << index(core);
}
inline std::ostream& operator<<(std::ostream& os, ChipId chip) {
  return os << "chip " << index(chip);
}

}  // namespace tpusim::sim
