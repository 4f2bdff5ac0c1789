#pragma once
// SCALE-Sim v2 topology files (docs/references.md, "SCALE-Sim v2 topology files"): one layer per
// line, either the conv format (name, IFMAP H, IFMAP W, filter H, filter W, channels, filters,
// stride) or the GEMM format (name, M, N, K). Fields are comma separated with optional whitespace,
// a trailing comma and blank lines; the first line is a header.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "common/named_values.h"

namespace tpusim::runtime {

struct TopologyLayer {
  std::string name;
  // As SCALE-Sim maps the layer onto a weight-stationary array (batch 1):
  uint64_t t = 0;  // rows streamed: ofmap pixels (conv) or M (GEMM)
  uint64_t k = 0;  // rows of the stationary operand: Fh x Fw x C (conv) or K (GEMM)
  uint64_t n = 0;  // its columns: filters (conv) or N (GEMM)
  uint64_t macs() const { return t * k * n; }
};

enum class TopologyFormat { kAuto, kConv, kGemm };
inline constexpr NamedValues<TopologyFormat, 3> kTopologyFormats{
    {{{TopologyFormat::kAuto, "auto"},
      {TopologyFormat::kConv, "conv"},
      {TopologyFormat::kGemm, "gemm"}}}};

// Parses a topology; errors name the file and line. kAuto tells the formats apart by the number
// of numeric fields (7 conv, 3 GEMM).
absl::StatusOr<std::vector<TopologyLayer>> read_scalesim_topology(
    const std::string& path, TopologyFormat format = TopologyFormat::kAuto);
absl::StatusOr<std::vector<TopologyLayer>> parse_scalesim_topology(
    const std::string& text, const std::string& label,
    TopologyFormat format = TopologyFormat::kAuto);

}  // namespace tpusim::runtime
