#include "sim/memory/block.h"

#include <cstring>

#include "sim/numerics/bf16.h"
#include "sim/numerics/convert.h"

namespace tpusim::sim {

uint32_t dtype_bytes(isa::DType dtype) {
  switch (dtype) {
    case isa::F32:
    case isa::S32:
      return 4;
    case isa::BF16:
      return 2;
    default:
      return 0;
  }
}

const char* dtype_name(isa::DType dtype) {
  switch (dtype) {
    case isa::F32:
      return "f32";
    case isa::BF16:
      return "bf16";
    case isa::S32:
      return "s32";
    default:
      return "unspecified";
  }
}

uint64_t row_stride(const isa::Block& b) {
  return b.row_stride_bytes() != 0 ? b.row_stride_bytes()
                                   : static_cast<uint64_t>(b.cols()) * dtype_bytes(b.dtype());
}

bool same_block(const isa::Block& x, const isa::Block& y) {
  return x.address() == y.address() && x.rows() == y.rows() && x.cols() == y.cols() &&
         row_stride(x) == row_stride(y) && x.dtype() == y.dtype();
}

uint64_t payload_bytes(const isa::Block& b) {
  return static_cast<uint64_t>(b.rows()) * b.cols() * dtype_bytes(b.dtype());
}

uint64_t end_address(const isa::Block& b) {
  if (b.rows() == 0 || b.cols() == 0) return b.address();
  return b.address() + (b.rows() - 1) * row_stride(b) +
         static_cast<uint64_t>(b.cols()) * dtype_bytes(b.dtype());
}

isa::Block shifted(const isa::Block& b, uint64_t bytes) {
  isa::Block moved = b;
  moved.set_address(b.address() + bytes);
  return moved;
}

bool is_dense(const isa::Block& b) {
  return row_stride(b) == static_cast<uint64_t>(b.cols()) * dtype_bytes(b.dtype());
}

void load_block(const uint8_t* memory, const isa::Block& b, MatrixF* out) {
  out->resize(b.rows(), b.cols());
  const uint64_t stride = row_stride(b);
  for (uint32_t r = 0; r < b.rows(); ++r) {
    const uint8_t* row = memory + b.address() + r * stride;
    float* dst = out->data() + static_cast<size_t>(r) * b.cols();
    if (b.dtype() == isa::BF16) {
      const auto* src = reinterpret_cast<const uint16_t*>(row);
      for (uint32_t c = 0; c < b.cols(); ++c) dst[c] = bf16_bits_to_f32(src[c]);
    } else if (b.dtype() == isa::S32) {
      const auto* src = reinterpret_cast<const int32_t*>(row);
      for (uint32_t c = 0; c < b.cols(); ++c) dst[c] = static_cast<float>(src[c]);
    } else {
      std::memcpy(dst, row, sizeof(float) * b.cols());
    }
  }
}

void store_block(uint8_t* memory, const isa::Block& b, const MatrixF& values) {
  const uint64_t stride = row_stride(b);
  for (uint32_t r = 0; r < b.rows(); ++r) {
    uint8_t* row = memory + b.address() + r * stride;
    const float* src = values.data() + static_cast<size_t>(r) * b.cols();
    if (b.dtype() == isa::BF16) {
      auto* dst = reinterpret_cast<uint16_t*>(row);
      for (uint32_t c = 0; c < b.cols(); ++c) dst[c] = f32_to_bf16_bits(src[c]);
    } else if (b.dtype() == isa::S32) {
      auto* dst = reinterpret_cast<int32_t*>(row);
      for (uint32_t c = 0; c < b.cols(); ++c) dst[c] = f32_to_s32(src[c]);
    } else {
      std::memcpy(row, src, sizeof(float) * b.cols());
    }
  }
}

}  // namespace tpusim::sim
