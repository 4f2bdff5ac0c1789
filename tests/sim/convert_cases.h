#pragma once
// f32 -> s32 conversions as XLA defines them, the values jax 0.10.2 gives for
// jnp.array([...], jnp.float32).astype(jnp.int32) on a CPU: truncation toward zero, saturation,
// NaN to 0. The simulator, the cpu backend and the gpu backend's shared per-element code are
// each checked against this table.

#include <cstdint>
#include <limits>

namespace tpusim::sim::testing {

struct F32ToS32Case {
  float in;
  int32_t out;
};

inline constexpr float kInf = std::numeric_limits<float>::infinity();

inline const F32ToS32Case kF32ToS32Cases[] = {
    {std::numeric_limits<float>::quiet_NaN(), 0},
    {1e10f, INT32_MAX},
    {-1e10f, INT32_MIN},
    {kInf, INT32_MAX},
    {-kInf, INT32_MIN},
    {2.7f, 2},
    {-2.7f, -2},
    {-0.5f, 0},
    {2147483520.0f, 2147483520},  // the largest f32 below 2^31
    {2147483648.0f, INT32_MAX},   // 2^31: just out of range
    {-2147483648.0f, INT32_MIN},  // -2^31: in range, exactly
};

}  // namespace tpusim::sim::testing
