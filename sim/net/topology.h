#pragma once
// The slice's interconnect as directed links (docs/architecture.md, "The hardware model"): each
// chip has an ICI link to its neighbour in each direction of each dimension of the topology (with
// wraparound on a torus; on a ring of 2 both go to the same neighbour, as on the 4-chip boards),
// and a link each way between every two of its cores. Chips are numbered x-major: chip =
// x + X * (y + Y * z). Transfers between chips follow dimension-order routes (X, then Y, then Z),
// each dimension the shorter way round a torus (ties go the positive way).
//
// The core grid lays every core out in two dimensions for rings and the 2D-torus algorithm: X'
// runs over the cores of the chips along X (x * cores_per_chip + core on chip), Y' over the rest
// of the chip coordinates (y + Y * z). The 3D-torus algorithm keeps Y and Z apart.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "configs/slice_spec.h"
#include "sim/core_map.h"

namespace tpusim::sim {

// Which way a route goes round a torus dimension where both ways are as short (a ring of 2
// chips has a link each way to its one neighbour): rings that go round the negative way take
// the negative links.
enum class TieBreak : uint8_t { kPositive, kNegative };

struct LinkSpec {
  double bytes_per_s = 0;
  double latency_s = 0;
};

class Topology {
 public:
  explicit Topology(const config::SliceSpec& slice);

  uint32_t chips() const { return map_.chips(); }
  uint32_t cores() const { return map_.cores(); }
  uint32_t cores_per_chip() const { return map_.cores_per_chip(); }
  uint32_t link_count() const { return static_cast<uint32_t>(links_.size()); }
  const LinkSpec& link(uint32_t id) const { return links_[id]; }
  // "chip 3 +x", "chip 0 core 1->0".
  std::string link_name(uint32_t id) const;
  // The chip the link leaves from.
  ChipId link_chip(uint32_t id) const;
  std::vector<uint32_t> chip_coords(ChipId chip) const;

  // The links a transfer from core `from` to core `to` crosses, in order (empty when equal).
  std::vector<uint32_t> route(CoreId from, CoreId to, TieBreak ties = TieBreak::kPositive) const;

  uint32_t grid_x() const { return grid_x_; }
  uint32_t grid_y() const { return grid_y_; }
  CoreId core_at(uint32_t gx, uint32_t gy) const;
  // The core grid along the chips' three dimensions (the 3D-torus algorithm): X' as above, then
  // the chips' Y and Z (1 where the topology has fewer); core (gx, y, z) is core_at(gx, y + Y z).
  std::array<uint32_t, 3> grid_3d() const;
  CoreId core_at_3d(const std::array<uint32_t, 3>& xyz) const;
  // The r-th row of the grid in snake order over the chips' (y, z) plane, so that consecutive
  // rows are one hop apart in 3D too (the identity in 2D).
  uint32_t snake_row(uint32_t r) const;
  // Every core in snake order over the core grid: row 0 left to right, row 1 right to left, ...
  // Neighbours are one hop apart, and on a torus with an even number of rows so are the ends.
  std::vector<CoreId> snake_ring() const;

 private:
  uint32_t ici_link(uint32_t chip, uint32_t dim, bool positive) const;
  uint32_t core_link(uint32_t chip, uint32_t from_core, uint32_t to_core) const;

  std::vector<uint32_t> shape_;
  bool torus_ = false;
  CoreMap map_;
  uint32_t ici_links_ = 0;  // ids below this are ICI links, the rest core links
  std::vector<LinkSpec> links_;
  uint32_t grid_x_ = 1, grid_y_ = 1;
};

}  // namespace tpusim::sim
