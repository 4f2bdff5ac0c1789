#include "sim/stats/op_profile.h"

#include <algorithm>
#include <map>

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
  OpSpan& open = e.open_span;
  if (e.open && open.step == step) {
    open.start = std::min(open.start, start);
    open.end = std::max(open.end, end);
    return;
  }
  if (e.open) {
    e.figures.cycles += open.end - open.start;
    e.figures.spans.push_back(open);
  }
  e.open = true;
  open = {step, start, std::max(start, end)};
}

std::vector<OpFigures> OpProfile::figures() const {
  std::vector<OpFigures> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) {
    out.push_back(e.figures);
    if (e.open) {
      out.back().cycles += e.open_span.end - e.open_span.start;
      out.back().spans.push_back(e.open_span);
    }
  }
  return out;
}

std::vector<OpFigures> chip_figures(const std::vector<std::vector<OpFigures>>& cores) {
  if (cores.empty()) return {};
  size_t ops = cores[0].size();
  for (const auto& core : cores) ops = std::min(ops, core.size());
  std::vector<OpFigures> out(ops);
  for (size_t i = 0; i < ops; ++i) {
    OpFigures& chip = out[i];
    chip.label = cores[0][i].label;
    chip.op = cores[0][i].op;
    std::map<uint64_t, OpSpan> by_step;
    for (const auto& core : cores) {
      const OpFigures& f = core[i];
      chip.flops += f.flops;
      chip.mxu_flops += f.mxu_flops;
      chip.hbm_bytes += f.hbm_bytes;
      chip.ici_bytes += f.ici_bytes;
      chip.instructions += f.instructions;
      for (const OpSpan& s : f.spans) {
        auto [it, first] = by_step.emplace(s.step, s);
        if (first) continue;
        it->second.start = std::min(it->second.start, s.start);
        it->second.end = std::max(it->second.end, s.end);
      }
    }
    for (const auto& [step, span] : by_step) {
      chip.cycles += span.end - span.start;
      chip.spans.push_back(span);
    }
  }
  return out;
}

}  // namespace tpusim::sim
