#pragma once
// The HBM account of a training step on chip 0: the bytes each kind of op moved (the per-op
// profile summed by op) beside the floor of a compiler that recomputes nothing
// (runtime/graph/hbm_floor.h), as
// the report's "hbm_account" and a few lines of train's summary.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/backend/backend.h"

namespace tpusim::cli {

// Adds to `report` "hbm_account": {bytes (chip 0's a step, every op's), seconds_at_bandwidth (at
// the chip's HBM bandwidth), by_op: [{op, bytes, fraction}] most bytes first, floor: {inputs,
// variables, gradients, saved_activations, total}, over_floor (bytes / floor total)}. Nothing
// when `ops` is empty or the floor is 0 (no training step).
void add_hbm_account(const std::vector<runtime::OpTiming>& ops, const runtime::ChipRoofs& roofs,
                     const runtime::HbmFloor& floor, nlohmann::ordered_json* report);

// The account in two lines (the `top` ops with the most bytes); empty when add_hbm_account adds
// nothing.
std::string hbm_account_text(const std::vector<runtime::OpTiming>& ops,
                             const runtime::ChipRoofs& roofs, const runtime::HbmFloor& floor,
                             size_t top);

}  // namespace tpusim::cli
