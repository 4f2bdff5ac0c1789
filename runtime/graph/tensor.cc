#include "runtime/graph/tensor.h"

#include "common/strings.h"

namespace tpusim::runtime {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kBF16:
      return "bf16";
    case DType::kS32:
      return "s32";
  }
  return "?";
}

bool is_floating(DType dtype) { return dtype != DType::kS32; }

int64_t Shape::elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t Shape::elements_within(int64_t limit) const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return -1;
    if (d > 0 && n > limit / d) return -1;  // n * d > limit, without computing it
    n *= d;
  }
  return n <= limit ? n : -1;
}

std::vector<int64_t> Shape::strides() const {
  std::vector<int64_t> s(dims_.size(), 1);
  for (int i = rank() - 2; i >= 0; --i)
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i) + 1] * dims_[static_cast<size_t>(i) + 1];
  return s;
}

std::string Shape::str() const { return str_cat("[", str_join(dims_, ", "), "]"); }

HostTensor HostTensor::zeros(DType dtype, const Shape& shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  if (dtype == DType::kS32) {
    t.i.assign(static_cast<size_t>(shape.elements()), 0);
  } else {
    t.f.assign(static_cast<size_t>(shape.elements()), 0.0f);
  }
  return t;
}

HostTensor HostTensor::scalar(float value) { return from(Shape{}, {value}); }

HostTensor HostTensor::from(const Shape& shape, std::vector<float> values) {
  HostTensor t;
  t.shape = shape;
  t.f = std::move(values);
  return t;
}

HostTensor HostTensor::from_ints(const Shape& shape, std::vector<int32_t> values) {
  HostTensor t;
  t.dtype = DType::kS32;
  t.shape = shape;
  t.i = std::move(values);
  return t;
}

int64_t HostTensor::bytes() const { return elements() * (dtype == DType::kBF16 ? 2 : 4); }

}  // namespace tpusim::runtime
