#include "tools/tpusim/op_report.h"

#include <algorithm>

#include <fmt/format.h>

namespace tpusim::cli {
namespace {

double intensity(const runtime::OpTiming& o) { return o.hbm_bytes > 0 ? o.flops / o.hbm_bytes : 0; }

double achieved(const runtime::OpTiming& o) { return o.seconds > 0 ? o.flops / o.seconds : 0; }

// Collectives (the ops that send over the interconnect) sit under no roof of this chart: their
// time is the links' and their peers'.
bool on_ici(const runtime::OpTiming& o) { return o.ici_bytes > 0; }

const char* unit(const runtime::OpTiming& o) {
  if (on_ici(o)) return "ici";
  if (o.flops <= 0) return "none";
  return o.mxu_flops > 0 ? "mxu" : "vector";
}

// The op's compute roof: the MXUs' peak when they did any of its FLOPs, else the vector units'.
double compute_roof(const runtime::OpTiming& o, const runtime::ChipRoofs& roofs) {
  return o.mxu_flops > 0 ? roofs.peak_flops : roofs.peak_vector_flops;
}

// The roofline's ceiling at the op's intensity: the HBM slope left of its unit's ridge, the
// unit's peak right of it.
double roof_at(const runtime::OpTiming& o, const runtime::ChipRoofs& roofs) {
  const double compute = compute_roof(o, roofs);
  if (o.hbm_bytes <= 0) return compute;
  return std::min(compute, intensity(o) * roofs.hbm_bytes_per_second);
}

// The op's floor at the chip's roofs: max(FLOPs / its unit's peak, HBM bytes / bandwidth), the
// time it would take at the roof (docs/cost_model.md); 0 for a collective, whose floor is the
// links' (sim/net/collective_bound.h).
double roof_seconds(const runtime::OpTiming& o, const runtime::ChipRoofs& roofs) {
  if (on_ici(o)) return 0;
  const double compute = o.flops > 0 ? o.flops / compute_roof(o, roofs) : 0;
  const double memory = roofs.hbm_bytes_per_second > 0 ? o.hbm_bytes / roofs.hbm_bytes_per_second : 0;
  return std::max(compute, memory);
}

const char* bound(const runtime::OpTiming& o, const runtime::ChipRoofs& roofs) {
  if (on_ici(o)) return "interconnect";
  if (o.flops <= 0) return "none";
  return o.hbm_bytes <= 0 || intensity(o) * roofs.hbm_bytes_per_second >= compute_roof(o, roofs)
             ? "compute"
             : "memory";
}

// The roof an op sits under, for the table: "HBM", "MXU" or "vector".
const char* roof_name(const runtime::OpTiming& o, const runtime::ChipRoofs& roofs) {
  if (std::string(bound(o, roofs)) == "memory") return "HBM";
  return o.mxu_flops > 0 ? "MXU" : "vector";
}

}  // namespace

void add_op_profile(const std::vector<runtime::OpTiming>& ops, const runtime::ChipRoofs& roofs,
                    nlohmann::ordered_json* report) {
  if (ops.empty()) return;
  (*report)["roofline"] = {{"peak_flops", roofs.peak_flops},
                           {"peak_vector_flops", roofs.peak_vector_flops},
                           {"hbm_bytes_per_second", roofs.hbm_bytes_per_second},
                           {"ridge_intensity", roofs.ridge_intensity()},
                           {"vector_ridge_intensity", roofs.vector_ridge_intensity()}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const runtime::OpTiming& o : ops) {
    const double roof = on_ici(o) ? 0 : roof_at(o, roofs);
    rows.push_back({{"label", o.label},
                    {"op", o.op},
                    {"unit", unit(o)},
                    {"flops", o.flops},
                    {"mxu_flops", o.mxu_flops},
                    {"hbm_bytes", o.hbm_bytes},
                    {"ici_bytes", o.ici_bytes},
                    {"seconds", o.seconds},
                    {"instructions", o.instructions},
                    {"arithmetic_intensity", intensity(o)},
                    {"flops_per_second", achieved(o)},
                    {"bound", bound(o, roofs)},
                    {"roof_fraction", roof > 0 ? achieved(o) / roof : 0.0},
                    {"roof_seconds", roof_seconds(o, roofs)}});
  }
  (*report)["ops"] = std::move(rows);
}

std::string op_profile_text(const std::vector<runtime::OpTiming>& ops,
                            const runtime::ChipRoofs& roofs, size_t top) {
  std::vector<const runtime::OpTiming*> order;
  double total = 0;
  for (const runtime::OpTiming& o : ops) {
    order.push_back(&o);
    total += o.seconds;
  }
  if (order.empty()) return "";
  std::stable_sort(order.begin(), order.end(),
                   [](const auto* a, const auto* b) { return a->seconds > b->seconds; });
  order.resize(std::min(top, order.size()));
  std::string out = fmt::format(
      "ops taking the most time per step on chip 0 (roofs: MXU {:.1f} TFLOPS, vector {:.2f} "
      "TFLOPS, HBM {:.0f} GB/s; ridges {:.0f} and {:.1f} FLOP/B; at roof: the op's time at them, "
      "max(FLOPs / peak, bytes / bandwidth)):\n",
      roofs.peak_flops / 1e12, roofs.peak_vector_flops / 1e12, roofs.hbm_bytes_per_second / 1e9,
      roofs.ridge_intensity(), roofs.vector_ridge_intensity());
  for (const runtime::OpTiming* o : order) {
    const double roof = roof_at(*o, roofs);
    const std::string where =
        on_ici(*o) ? fmt::format("{:>10.1f} MB over ICI, {:.1f} MB HBM", o->ici_bytes / 1e6,
                                 o->hbm_bytes / 1e6)
        : o->flops > 0
            ? fmt::format("{:>7.1f} FLOP/B {:>7.2f} TFLOPS {:>3.0f}% of {} roof", intensity(*o),
                          achieved(*o) / 1e12, roof > 0 ? 100 * achieved(*o) / roof : 0.0,
                          roof_name(*o, roofs))
            : fmt::format("{:>22.1f} MB HBM, no FLOPs", o->hbm_bytes / 1e6);
    const std::string at_roof =
        on_ici(*o) ? std::string(17, ' ') : fmt::format("at roof {:>6.3f} ms", roof_seconds(*o, roofs) * 1e3);
    out += fmt::format("  {:>8.3f} ms {:>5.1f}%  {}  {:<52} {} {}\n", o->seconds * 1e3,
                       total > 0 ? 100 * o->seconds / total : 0.0, at_roof, where, o->op, o->label);
  }
  return out;
}

}  // namespace tpusim::cli
