#pragma once
// The per-op profile of a training run (the tpusim backend's OpTiming per graph op) as the
// report's "ops" and "roofline", and as a short table of the ops that take the most time.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/backend/backend.h"

namespace tpusim::cli {

// Adds to `report`:
//   "roofline": {peak_flops (the MXUs'), peak_vector_flops, hbm_bytes_per_second,
//     ridge_intensity, vector_ridge_intensity} of one chip;
//   "ops": per graph op in program order, per step on chip 0: label, op, unit ("mxu" when the
//     MXUs did any of its FLOPs, "vector" when only the vector units did, "none" without FLOPs),
//     flops, mxu_flops, hbm_bytes, seconds, instructions, arithmetic_intensity (FLOPs per HBM
//     byte; 0 without HBM traffic), flops_per_second, bound ("compute" at or right of its unit's
//     ridge, else "memory"; "none" without FLOPs) and roof_fraction (achieved FLOPS over its
//     unit's roof at its intensity).
// Nothing when `ops` is empty.
void add_op_profile(const std::vector<runtime::OpTiming>& ops, const runtime::ChipRoofs& roofs,
                    nlohmann::ordered_json* report);

// The `top` ops taking the most time per step, one line each, under a header line.
std::string op_profile_text(const std::vector<runtime::OpTiming>& ops,
                            const runtime::ChipRoofs& roofs, size_t top);

}  // namespace tpusim::cli
