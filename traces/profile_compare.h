#pragma once
// A measured profile against a simulated one, op by op (`tpusim compare-profile`): ops matched
// by name and category, each side's time a step on one device (xspace_ops.h) and their ratio,
// summed by category and over the step, so a user with a real TPU profile sees where the
// simulator is wrong for their model. Ratios are simulated over measured: above 1, the simulator
// is slower than the device.

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "traces/xspace_ops.h"

namespace tpusim::traces {

// Seconds a step on one device of one op or category, measured and simulated (0 where that side
// has none of it).
struct SideBySide {
  std::string name;      // the op's, or the category's
  std::string category;  // the op's category ("" for a category row and ops without one)
  double measured = 0, simulated = 0;
  int ops_measured = 0, ops_simulated = 0;  // how many ops the row sums (categories)
  // simulated / measured; nullopt when nothing was measured.
  std::optional<double> ratio() const;
};

struct ProfileComparison {
  OpProfile measured, simulated;
  std::vector<SideBySide> matched;        // in both, costliest measured first
  std::vector<SideBySide> only_measured;  // costliest first
  std::vector<SideBySide> only_simulated;
  std::vector<SideBySide> categories;  // every op of each side, costliest measured first
  SideBySide ops_total;                // every op of each side
  // simulated step / measured step; nullopt when the measured step is 0.
  std::optional<double> step_ratio() const;

  std::string to_text(size_t top) const;  // the `top` costliest matched ops (0: all)
  nlohmann::ordered_json to_json() const;
};

ProfileComparison compare_profiles(OpProfile measured, OpProfile simulated);

}  // namespace tpusim::traces
