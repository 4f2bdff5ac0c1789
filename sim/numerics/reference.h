#pragma once
// Helpers for checking the model's numerics against Eigen: seeded random operands, bf16-rounded
// copies, and the relative error measure every report uses.

#include <cstdint>

#include "sim/memory/block.h"

namespace tpusim::sim {

// rows x cols values uniform in [-scale, scale) from a seeded mt19937: the same seed gives the
// same matrix on every machine.
MatrixF random_uniform(Eigen::Index rows, Eigen::Index cols, uint32_t seed, float scale = 1.0f);
// Each value rounded to the nearest bf16.
MatrixF rounded_to_bf16(const MatrixF& m);
// max |got - ref| / max |ref| (the plain max |got - ref| when ref is all zeros).
double max_rel_error(const MatrixF& got, const MatrixF& ref);

}  // namespace tpusim::sim
