#pragma once
// Types of the graph IR: element types, static shapes, and host tensors (values on the host,
// what feeds, outputs and variables hold).

#include <cstdint>
#include <string>
#include <vector>

namespace tpusim::runtime {

// bf16 values are held as f32 numbers that bf16 can represent exactly.
enum class DType { kF32, kBF16, kS32 };

const char* dtype_name(DType dtype);
bool is_floating(DType dtype);

// A static shape: the extent of each dimension, outermost first. Rank 0 is a scalar.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t elements() const;
  // For a shape read from a file: elements() if every dimension is at least 0 and the count is
  // at most `limit`, computed without overflowing; -1 otherwise.
  int64_t elements_within(int64_t limit) const;
  // Row-major strides in elements.
  std::vector<int64_t> strides() const;
  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }
  // "[128, 784]"; "[]" for a scalar.
  std::string str() const;

 private:
  std::vector<int64_t> dims_;
};

// A dense row-major tensor on the host. Floating types use `f`, s32 uses `i`.
struct HostTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<float> f;
  std::vector<int32_t> i;

  static HostTensor zeros(DType dtype, const Shape& shape);
  static HostTensor scalar(float value);
  static HostTensor from(const Shape& shape, std::vector<float> values);
  static HostTensor from_ints(const Shape& shape, std::vector<int32_t> values);
  int64_t elements() const { return shape.elements(); }
  // Bytes of its payload as the device stores it (bf16 takes 2 bytes per element).
  int64_t bytes() const;
};

}  // namespace tpusim::runtime
