#include "sim/stats/op_profile.h"

#include <algorithm>

namespace tpusim::sim {

void OpProfile::reset(std::vector<OpFigures> origins) {
  entries_.clear();
  entries_.resize(origins.size());
  for (size_t i = 0; i < origins.size(); ++i) entries_[i].figures = std::move(origins[i]);
}

void OpProfile::record(uint32_t origin, uint64_t step, uint64_t start, uint64_t end,
                       const OpWork& work) {
  if (origin == 0 || origin > entries_.size()) return;
  Entry& e = entries_[origin - 1];
  e.figures.flops += work.flops;
  if (work.on_mxu) e.figures.mxu_flops += work.flops;
  e.figures.hbm_bytes += work.hbm_bytes;
  e.figures.ici_bytes += work.ici_bytes;
  ++e.figures.instructions;
  if (e.open && e.open_step == step) {
    e.open_start = std::min(e.open_start, start);
    e.open_end = std::max(e.open_end, end);
    return;
  }
  if (e.open) e.figures.cycles += e.open_end - e.open_start;
  e.open = true;
  e.open_step = step;
  e.open_start = start;
  e.open_end = std::max(start, end);
}

std::vector<OpFigures> OpProfile::figures() const {
  std::vector<OpFigures> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) {
    out.push_back(e.figures);
    if (e.open) out.back().cycles += e.open_end - e.open_start;
  }
  return out;
}

}  // namespace tpusim::sim
