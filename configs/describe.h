#pragma once
// Views of a validated config: JSON for tools and reports, and a readable summary for people.

#include <string>

#include <nlohmann/json.hpp>

#include "configs/slice_spec.h"

namespace tpusim::config {

// The slice with its derived figures. Rates in bytes/s, sizes in bytes, times in seconds,
// FLOP/s as TFLOPS where the key says so; "config" holds the validated input.
nlohmann::ordered_json to_json(const SliceSpec& slice);
nlohmann::ordered_json to_json(const ChipSpec& chip);
nlohmann::ordered_json to_json(const HostSpec& host);

// Multi-line summary, the text form of `tpusim config show`.
std::string describe(const SliceSpec& slice);
std::string describe(const ChipSpec& chip);
std::string describe(const HostSpec& host);

}  // namespace tpusim::config
