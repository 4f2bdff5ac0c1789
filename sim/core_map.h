#pragma once
// Where each core of a slice sits: its chip, its position on the chip, and the host that feeds
// the chip. The one place that knows the numbering, which is chip by chip: core c is core
// c % cores_per_chip of chip c / cores_per_chip, and a host feeds chips_per_host consecutive
// chips. Cheap to copy (three integers); built from the slice's spec.

#include <algorithm>
#include <cstdint>

#include "configs/slice_spec.h"
#include "sim/ids.h"

namespace tpusim::sim {

class CoreMap {
 public:
  // `cores_per_chip` and `chips_per_host` of 0 count as 1.
  CoreMap(uint32_t chips, uint32_t cores_per_chip, uint32_t chips_per_host = 1)
      : chips_(chips),
        cores_per_chip_(std::max<uint32_t>(cores_per_chip, 1)),
        chips_per_host_(std::max<uint32_t>(chips_per_host, 1)) {}
  explicit CoreMap(const config::SliceSpec& slice)
      : CoreMap(slice.chips, slice.chip.tensor_cores, slice.chips_per_host) {}

  uint32_t chips() const { return chips_; }
  uint32_t cores() const { return chips_ * cores_per_chip_; }
  uint32_t cores_per_chip() const { return cores_per_chip_; }
  bool contains(CoreId core) const { return index(core) < cores(); }
  bool contains(ChipId chip) const { return index(chip) < chips_; }

  ChipId chip_of(CoreId core) const { return ChipId{index(core) / cores_per_chip_}; }
  // The core's position on its chip, 0 .. cores_per_chip - 1.
  uint32_t core_on_chip(CoreId core) const { return index(core) % cores_per_chip_; }
  CoreId first_core(ChipId chip) const { return CoreId{index(chip) * cores_per_chip_}; }
  CoreId core(ChipId chip, uint32_t core_on_chip) const {
    return CoreId{index(first_core(chip)) + core_on_chip};
  }
  // The host that feeds `chip` (its infeed thread and host link; System::queue_infeed_step).
  uint32_t host_of(ChipId chip) const { return index(chip) / chips_per_host_; }

 private:
  uint32_t chips_;
  uint32_t cores_per_chip_;
  uint32_t chips_per_host_;
};

// Each core of a chip owns an equal share of the chip's HBM, as a v3 core owns 16 of its chip's
// 32 GiB: `bytes` from `base` (bytes into the chip's HBM). Compilers and program builders put a
// core's buffers there.
struct HbmShare {
  uint64_t base = 0;
  uint64_t bytes = 0;
};
inline HbmShare hbm_share(const config::SliceSpec& slice, CoreId core) {
  const CoreMap map(slice);
  const uint64_t bytes = slice.chip.hbm.capacity_bytes / map.cores_per_chip();
  return {map.core_on_chip(core) * bytes, bytes};
}

}  // namespace tpusim::sim
