#include "tools/tpusim/hbm_account.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

namespace tpusim::cli {
namespace {

// Bytes per op name, most first (ties by name), and their sum.
std::vector<std::pair<std::string, double>> bytes_by_op(const std::vector<runtime::OpTiming>& ops,
                                                        double* total) {
  std::map<std::string, double> sums;
  *total = 0;
  for (const runtime::OpTiming& o : ops) {
    sums[o.op] += o.hbm_bytes;
    *total += o.hbm_bytes;
  }
  std::vector<std::pair<std::string, double>> out(sums.begin(), sums.end());
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  return out;
}

bool accountable(const std::vector<runtime::OpTiming>& ops, const runtime::HbmFloor& floor) {
  return !ops.empty() && floor.total() > 0;
}

}  // namespace

void add_hbm_account(const std::vector<runtime::OpTiming>& ops, const runtime::ChipRoofs& roofs,
                     const runtime::HbmFloor& floor, nlohmann::ordered_json* report) {
  if (!accountable(ops, floor)) return;
  double total = 0;
  nlohmann::ordered_json by_op = nlohmann::ordered_json::array();
  for (const auto& [op, bytes] : bytes_by_op(ops, &total))
    by_op.push_back({{"op", op}, {"bytes", bytes}, {"fraction", total > 0 ? bytes / total : 0.0}});
  (*report)["hbm_account"] = {
      {"bytes", total},
      {"seconds_at_bandwidth",
       roofs.hbm_bytes_per_second > 0 ? total / roofs.hbm_bytes_per_second : 0.0},
      {"by_op", std::move(by_op)},
      {"floor",
       {{"inputs", floor.inputs},
        {"variables", floor.variables},
        {"gradients", floor.gradients},
        {"saved_activations", floor.saved_activations},
        {"total", floor.total()}}},
      {"over_floor", total / floor.total()}};
}

std::string hbm_account_text(const std::vector<runtime::OpTiming>& ops,
                             const runtime::ChipRoofs& roofs, const runtime::HbmFloor& floor,
                             size_t top) {
  if (!accountable(ops, floor)) return "";
  double total = 0;
  const auto by_op = bytes_by_op(ops, &total);
  std::string out = fmt::format(
      "HBM a step on chip 0: {:.2f} GB ({:.1f} ms at {:.0f} GB/s), {:.1f}x its floor of {:.2f} GB "
      "(saved activations {:.2f}, variables {:.2f}, gradients {:.2f}, inputs {:.2f}: "
      "docs/validation.md, \"The HBM account\")\n  most bytes:",
      total / 1e9, roofs.hbm_bytes_per_second > 0 ? 1e3 * total / roofs.hbm_bytes_per_second : 0.0,
      roofs.hbm_bytes_per_second / 1e9, total / floor.total(), floor.total() / 1e9,
      floor.saved_activations / 1e9, floor.variables / 1e9, floor.gradients / 1e9,
      floor.inputs / 1e9);
  for (size_t i = 0; i < std::min(top, by_op.size()); ++i) {
    out += fmt::format("{} {} {:.2f} GB ({:.0f}%)", i == 0 ? "" : ",", by_op[i].first,
                       by_op[i].second / 1e9, total > 0 ? 100 * by_op[i].second / total : 0.0);
  }
  return out + "\n";
}

}  // namespace tpusim::cli
