#pragma once
// Geometry of an ISA block (sim/isa/isa.proto, Block): element sizes, strides and the byte
// range it covers, and moving it between memory bytes and an f32 matrix.

#include <cstdint>

#include <Eigen/Core>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Bytes per element of `dtype` (0 for DTYPE_UNSPECIFIED).
uint32_t dtype_bytes(isa::DType dtype);
const char* dtype_name(isa::DType dtype);

// Stride in bytes between rows (the dense stride when the block gives 0).
uint64_t row_stride(const isa::Block& b);
// Bytes of payload: rows x cols x element size.
uint64_t payload_bytes(const isa::Block& b);
// One past the last byte the block touches (address when the block is empty).
uint64_t end_address(const isa::Block& b);
// The block moved `bytes` on (a later group of a grouped matmul, isa.proto).
isa::Block shifted(const isa::Block& b, uint64_t bytes);
// Whether the rows of the block follow each other with no gap.
bool is_dense(const isa::Block& b);
// The same bytes viewed the same way: address, shape, row stride and dtype.
bool same_block(const isa::Block& x, const isa::Block& y);

// Host bytes [lo, hi); empty when lo >= hi.
struct HostRange {
  const uint8_t* lo = nullptr;
  const uint8_t* hi = nullptr;
  bool overlaps(const HostRange& other) const {
    return lo < hi && other.lo < other.hi && lo < other.hi && other.lo < hi;
  }
};

// The host bytes the block spans in a memory whose first byte is at `memory` (from its first
// byte to one past its last, the gaps between rows included).
inline HostRange host_range(const uint8_t* memory, const isa::Block& b) {
  return {memory + b.address(), memory + end_address(b)};
}

// Reads the block from `memory` (the base of the memory it lives in) as f32.
void load_block(const uint8_t* memory, const isa::Block& b, MatrixF* out);
// Writes `values` (the block's shape) to `memory`, rounding to bf16 when the block is bf16.
void store_block(uint8_t* memory, const isa::Block& b, const MatrixF& values);

}  // namespace tpusim::sim
