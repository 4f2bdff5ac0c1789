// The cpu kernels of the row lookups: gather and scatter_add (graph.h's semantics).
#include <algorithm>

#include "runtime/backend/cpu/buffers.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/element_math.h"

namespace tpusim::runtime::cpu {

HostTensor gather(const Node& n, const Inputs& in) {
  const HostTensor& table = *in[0];
  const HostTensor& indices = *in[1];
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  const int64_t rows = table.shape.dim(0);
  const auto cols = static_cast<size_t>(table.shape.dim(1));
  for (size_t i = 0; i < indices.i.size(); ++i) {
    const auto row = static_cast<size_t>(element::clamp_index(indices.i[i], rows));
    std::copy_n(table.f.begin() + static_cast<std::ptrdiff_t>(row * cols), cols,
                out.f.begin() + static_cast<std::ptrdiff_t>(i * cols));
  }
  return out;  // copies of bf16 values are bf16 values: nothing to round
}

HostTensor scatter_add(const Node& n, const Inputs& in) {
  const HostTensor& updates = *in[0];
  const HostTensor& indices = *in[1];
  HostTensor out = new_tensor(n.dtype, n.shape);
  const int64_t rows = n.shape.dim(0);
  const auto cols = static_cast<size_t>(n.shape.dim(1));
  // Index order, each row's sum in f32 (no wider accumulator): what the tpusim backend's
  // read-add-write of one row at a time computes, bit for bit.
  for (size_t i = 0; i < indices.i.size(); ++i) {
    float* row =
        out.f.data() + static_cast<size_t>(element::clamp_index(indices.i[i], rows)) * cols;
    const float* update = updates.f.data() + i * cols;
    for (size_t c = 0; c < cols; ++c) row[c] += update[c];
  }
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

}  // namespace tpusim::runtime::cpu
