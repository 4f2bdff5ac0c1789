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

namespace {

// The cycles covered by at least one of `spans` (sorted here).
uint64_t covered_cycles(std::vector<OpSpan>& spans) {
  std::sort(spans.begin(), spans.end(),
            [](const OpSpan& a, const OpSpan& b) { return a.start < b.start; });
  uint64_t covered = 0, reached = 0;
  for (const OpSpan& s : spans) {
    const uint64_t from = std::max(s.start, reached);
    if (s.end > from) covered += s.end - from;
    reached = std::max(reached, s.end);
  }
  return covered;
}

}  // namespace

std::vector<OpFigures> chip_figures(const std::vector<std::vector<OpFigures>>& cores) {
  if (cores.empty()) return {};
  size_t ops = cores[0].size();
  for (const auto& core : cores) ops = std::min(ops, core.size());
  std::vector<OpFigures> out(ops);
  for (size_t i = 0; i < ops; ++i) {
    OpFigures& chip = out[i];
    chip.label = cores[0][i].label;
    chip.op = cores[0][i].op;
    std::map<uint64_t, std::vector<OpSpan>> by_step;
    for (const auto& core : cores) {
      const OpFigures& f = core[i];
      chip.flops += f.flops;
      chip.mxu_flops += f.mxu_flops;
      chip.hbm_bytes += f.hbm_bytes;
      chip.ici_bytes += f.ici_bytes;
      chip.instructions += f.instructions;
      for (const OpSpan& s : f.spans) by_step[s.step].push_back(s);
    }
    for (auto& [step, spans] : by_step) {
      chip.cycles += covered_cycles(spans);
      OpSpan hull = spans.front();
      for (const OpSpan& s : spans) hull.end = std::max(hull.end, s.end);
      chip.spans.push_back(hull);
    }
  }
  return out;
}

}  // namespace tpusim::sim
