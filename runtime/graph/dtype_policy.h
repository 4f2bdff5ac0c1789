#pragma once
// Keras's dtype policies, which the zoo's models train under and each backend declares it trains
// (runtime/backend/declaration.h).

#include "common/named_values.h"

namespace tpusim::runtime {

// kFloat32 ("float32"): everything in f32. kMixedBFloat16 ("mixed_bfloat16"), the TPU recipe
// (tf.compat.v1.tpu.bfloat16_scope): the images cast to bf16 on entry, activations, their
// gradients and the MXU's operands in bf16; variables (updated and checkpointed) in f32 and read
// through casts; batch norm, layer norm and softmax computed in f32; the logits cast back to f32,
// so the loss is f32.
enum class DTypePolicy { kFloat32, kMixedBFloat16 };
inline constexpr NamedValues<DTypePolicy, 2> kDTypePolicies{
    {{{DTypePolicy::kFloat32, "float32"}, {DTypePolicy::kMixedBFloat16, "mixed_bfloat16"}}}};

}  // namespace tpusim::runtime
