#include "sim/net/topology.h"

#include "common/strings.h"

namespace tpusim::sim {

Topology::Topology(const config::SliceSpec& slice)
    : shape_(slice.topology.shape), torus_(slice.topology.torus), map_(slice) {
  const LinkSpec ici{slice.chip.ici.link_bandwidth_bytes_per_s, slice.chip.ici.hop_latency_s};
  const LinkSpec core{slice.chip.ici.core_link_bytes_per_s, slice.chip.ici.core_link_latency_s};
  const uint32_t per_chip = map_.cores_per_chip();
  ici_links_ = chips() * static_cast<uint32_t>(shape_.size()) * 2;
  links_.assign(ici_links_, ici);
  links_.resize(ici_links_ + chips() * per_chip * per_chip, core);
  grid_x_ = (shape_.empty() ? 1 : shape_[0]) * per_chip;
  grid_y_ = cores() / grid_x_;
}

std::vector<uint32_t> Topology::chip_coords(ChipId chip) const {
  std::vector<uint32_t> c;
  uint32_t rest = index(chip);
  for (uint32_t n : shape_) {
    c.push_back(rest % n);
    rest /= n;
  }
  return c;
}

uint32_t Topology::ici_link(uint32_t chip, uint32_t dim, bool positive) const {
  return (chip * static_cast<uint32_t>(shape_.size()) + dim) * 2 + (positive ? 0 : 1);
}

uint32_t Topology::core_link(uint32_t chip, uint32_t from_core, uint32_t to_core) const {
  const uint32_t per_chip = map_.cores_per_chip();
  return ici_links_ + (chip * per_chip + from_core) * per_chip + to_core;
}

std::string Topology::link_name(uint32_t id) const {
  static const char* const kDims = "xyz";
  if (id < ici_links_) {
    const uint32_t dims = static_cast<uint32_t>(shape_.size());
    return str_cat("chip ", id / (dims * 2), " ", (id % 2 == 0) ? "+" : "-",
                   kDims[(id / 2) % dims]);
  }
  const uint32_t rest = id - ici_links_, per_chip = map_.cores_per_chip();
  return str_cat("chip ", rest / (per_chip * per_chip), " core ", (rest / per_chip) % per_chip,
                 "->", rest % per_chip);
}

ChipId Topology::link_chip(uint32_t id) const {
  if (id < ici_links_) return ChipId{id / (static_cast<uint32_t>(shape_.size()) * 2)};
  return ChipId{(id - ici_links_) / (map_.cores_per_chip() * map_.cores_per_chip())};
}

std::vector<uint32_t> Topology::route(CoreId from, CoreId to, TieBreak ties) const {
  std::vector<uint32_t> links;
  if (from == to) return links;
  const ChipId a = map_.chip_of(from), b = map_.chip_of(to);
  if (a == b) {
    links.push_back(core_link(index(a), map_.core_on_chip(from), map_.core_on_chip(to)));
    return links;
  }
  std::vector<uint32_t> at = chip_coords(a);
  const std::vector<uint32_t> goal = chip_coords(b);
  uint32_t stride = 1;
  uint32_t chip = index(a);  // where the route has got to
  for (uint32_t d = 0; d < shape_.size(); ++d) {
    const uint32_t n = shape_[d];
    const uint32_t up = (goal[d] + n - at[d]) % n;  // hops the positive way round
    bool positive = goal[d] >= at[d];
    uint32_t hops = positive ? goal[d] - at[d] : at[d] - goal[d];
    if (torus_ && up > 0) {
      positive = ties == TieBreak::kPositive ? up <= n - up : up < n - up;
      hops = positive ? up : n - up;
    }
    for (uint32_t h = 0; h < hops; ++h) {
      links.push_back(ici_link(chip, d, positive));
      const uint32_t next = positive ? (at[d] + 1) % n : (at[d] + n - 1) % n;
      chip = chip + next * stride - at[d] * stride;
      at[d] = next;
    }
    stride *= n;
  }
  return links;
}

CoreId Topology::core_at(uint32_t gx, uint32_t gy) const {
  // Column gx of the grid is core gx % cores_per_chip of the (gx / cores_per_chip)-th chip along X.
  const uint32_t per_chip = map_.cores_per_chip();
  const uint32_t x_chips = grid_x_ / per_chip;
  const ChipId chip{gx / per_chip + x_chips * gy};
  return map_.core(chip, gx % per_chip);
}

std::array<uint32_t, 3> Topology::grid_3d() const {
  return {grid_x_, shape_.size() > 1 ? shape_[1] : 1, shape_.size() > 2 ? shape_[2] : 1};
}

CoreId Topology::core_at_3d(const std::array<uint32_t, 3>& xyz) const {
  return core_at(xyz[0], xyz[1] + grid_3d()[1] * xyz[2]);
}

uint32_t Topology::snake_row(uint32_t r) const {
  if (shape_.size() < 3) return r;
  const uint32_t y_size = shape_[1];
  const uint32_t z = r / y_size, y = r % y_size;
  return (z % 2 == 0 ? y : y_size - 1 - y) + y_size * z;
}

std::vector<CoreId> Topology::snake_ring() const {
  std::vector<CoreId> ring;
  for (uint32_t r = 0; r < grid_y_; ++r) {
    for (uint32_t i = 0; i < grid_x_; ++i) {
      ring.push_back(core_at(r % 2 == 0 ? i : grid_x_ - 1 - i, snake_row(r)));
    }
  }
  return ring;
}

}  // namespace tpusim::sim
