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
// 32 GiB: `bytes` of the chip's HBM. Compilers and program builders put a core's buffers there.
//
// The simulator holds every value as 4 bytes (a bf16 value widened to f32, exactly), where the
// TPU holds a bf16 value in 2: its transfers are charged at 2 bytes (Dma.packed_bf16), and the
// compiler checks what a core's tensors need against `bytes` with bf16 at 2 bytes. Its model of
// the chip's HBM therefore spans kHbmRepresentation times the chip's capacity, and a core's
// buffers sit in `span` bytes from `base`: room for the same tensors held 4 bytes a value.
// (Bases stay multiples of the share, so every address falls in the HBM channel it would.)
inline constexpr uint64_t kHbmRepresentation = 2;
struct HbmShare {
  uint64_t base = 0;   // where the core's buffers start in the simulator's address space
  uint64_t bytes = 0;  // the core's share of the chip's HBM, as the device has it
  uint64_t span = 0;   // the simulator's room for it: kHbmRepresentation x bytes
};
inline HbmShare hbm_share(const config::SliceSpec& slice, CoreId core) {
  const CoreMap map(slice);
  const uint64_t bytes = slice.chip.hbm.capacity_bytes / map.cores_per_chip();
  const uint64_t span = kHbmRepresentation * bytes;
  return {map.core_on_chip(core) * span, bytes, span};
}
// The bytes of the simulator's model of a chip's HBM (addresses below it are valid).
inline uint64_t hbm_address_space(const config::SliceSpec& slice) {
  return kHbmRepresentation * slice.chip.hbm.capacity_bytes;
}

}  // namespace tpusim::sim
