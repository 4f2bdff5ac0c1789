#include "runtime/onnx/folded.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/strings.h"

namespace tpusim::runtime::onnx_import {
namespace {

int64_t product(const std::vector<int64_t>& dims, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < dims.size(); ++i) n *= dims[i];
  return n;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

bool integer_type(int32_t t) {
  return t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32 ||
         t == onnx::TensorProto::INT16 || t == onnx::TensorProto::INT8 ||
         t == onnx::TensorProto::UINT8 || t == onnx::TensorProto::UINT16 ||
         t == onnx::TensorProto::UINT32 || t == onnx::TensorProto::UINT64 ||
         t == onnx::TensorProto::BOOL;
}

// The bytes of raw_data as `T`s (little-endian, as ONNX stores them).
template <typename T>
absl::Status read_raw(const onnx::TensorProto& t, int64_t n, std::vector<double>* out) {
  if (t.raw_data().size() != static_cast<size_t>(n) * sizeof(T)) {
    return absl::InvalidArgumentError(str_cat("tensor '", t.name(), "' has ", t.raw_data().size(),
                                              " bytes of raw_data; its shape needs ",
                                              n * static_cast<int64_t>(sizeof(T))));
  }
  out->resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, t.raw_data().data() + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    (*out)[static_cast<size_t>(i)] = static_cast<double>(v);
  }
  return absl::OkStatus();
}

// float16's bits as a double.
double half_to_double(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  if (exponent == 31) return mantissa != 0 ? std::nan("") : sign * HUGE_VAL;
  return sign * std::ldexp(mantissa + 1024, exponent - 25);
}

absl::Status read_typed(const onnx::TensorProto& t, int64_t n, std::vector<double>* out) {
  auto check = [&](int have) -> absl::Status {
    if (have != n) {
      return absl::InvalidArgumentError(
          str_cat("tensor '", t.name(), "' holds ", have, " values; its shape needs ", n));
    }
    return absl::OkStatus();
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (auto s = check(t.float_data_size()); !s.ok()) return s;
      out->assign(t.float_data().begin(), t.float_data().end());
      return absl::OkStatus();
    case onnx::TensorProto::DOUBLE:
      if (auto s = check(t.double_data_size()); !s.ok()) return s;
      out->assign(t.double_data().begin(), t.double_data().end());
      return absl::OkStatus();
    case onnx::TensorProto::INT64:
      if (auto s = check(t.int64_data_size()); !s.ok()) return s;
      out->assign(t.int64_data().begin(), t.int64_data().end());
      return absl::OkStatus();
    case onnx::TensorProto::FLOAT16:
      if (auto s = check(t.int32_data_size()); !s.ok()) return s;
      for (int32_t bits : t.int32_data())
        out->push_back(half_to_double(static_cast<uint16_t>(bits)));
      return absl::OkStatus();
    default:  // int32, int16, int8, uint8, uint16, bool: int32_data
      if (auto s = check(t.int32_data_size()); !s.ok()) return s;
      out->assign(t.int32_data().begin(), t.int32_data().end());
      return absl::OkStatus();
  }
}

absl::Status read_raw_any(const onnx::TensorProto& t, int64_t n, std::vector<double>* out) {
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      return read_raw<float>(t, n, out);
    case onnx::TensorProto::DOUBLE:
      return read_raw<double>(t, n, out);
    case onnx::TensorProto::INT64:
      return read_raw<int64_t>(t, n, out);
    case onnx::TensorProto::INT32:
      return read_raw<int32_t>(t, n, out);
    case onnx::TensorProto::INT16:
      return read_raw<int16_t>(t, n, out);
    case onnx::TensorProto::INT8:
      return read_raw<int8_t>(t, n, out);
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      return read_raw<uint8_t>(t, n, out);
    case onnx::TensorProto::UINT16:
      return read_raw<uint16_t>(t, n, out);
    case onnx::TensorProto::FLOAT16: {
      std::vector<double> bits;
      if (auto s = read_raw<uint16_t>(t, n, &bits); !s.ok()) return s;
      for (double b : bits) out->push_back(half_to_double(static_cast<uint16_t>(b)));
      return absl::OkStatus();
    }
    default:
      return absl::InvalidArgumentError(str_cat("tensor '", t.name(), "' has data type ",
                                                t.data_type(), ", which tpusim does not read"));
  }
}

}  // namespace

int64_t foldable_elements(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  bool empty = false;
  for (int64_t d : dims) {
    if (d < 0) return -1;
    if (d == 0) {    // empties the tensor, but the others still count: nothing downstream that
      empty = true;  // multiplies them all may overflow
      continue;
    }
    if (n > kMaxFoldedElements / d) return -1;
    n *= d;
  }
  return empty ? 0 : n;
}

int64_t Folded::elements() const { return product(dims); }

absl::StatusOr<std::vector<int64_t>> Folded::ints(const std::string& what) const {
  std::vector<int64_t> out;
  for (double v : data) {
    if (v != std::floor(v) || std::abs(v) > 9.0e18)
      return absl::InvalidArgumentError(str_cat(what, " holds ", v, ", not an integer"));
    out.push_back(static_cast<int64_t>(v));
  }
  return out;
}

absl::StatusOr<HostTensor> Folded::host_tensor() const {
  HostTensor t;
  t.shape = Shape(dims);
  if (!integer) {
    t.dtype = DType::kF32;
    t.f.assign(data.begin(), data.end());
    return t;
  }
  t.dtype = DType::kS32;
  for (double v : data) {
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      return absl::InvalidArgumentError(str_cat("the integer ", v, " does not fit 32 bits"));
    t.i.push_back(static_cast<int32_t>(v));
  }
  return t;
}

absl::StatusOr<Folded> fold_tensor(const onnx::TensorProto& t) {
  Folded f;
  f.integer = integer_type(t.data_type());
  for (int64_t d : t.dims()) {
    if (d < 0 || d > (int64_t{1} << 40))
      return absl::InvalidArgumentError(str_cat("tensor '", t.name(), "' has dimension ", d));
    f.dims.push_back(d);
  }
  // Counted without overflowing: dimensions of up to 2^40 each multiply past int64.
  const int64_t n = foldable_elements(f.dims);
  if (n < 0)
    return absl::InvalidArgumentError(str_cat("tensor '", t.name(), "' of dimensions ",
                                              Shape(f.dims).str(), " is too large (more than ",
                                              kMaxFoldedElements, " elements, zeros aside)"));
  absl::Status s = t.has_raw_data() ? read_raw_any(t, n, &f.data) : read_typed(t, n, &f.data);
  if (!s.ok()) return s;
  return f;
}

Folded fold_scalar(double value, bool integer) { return Folded{{}, {value}, integer}; }

Folded fold_vector(const std::vector<int64_t>& values) {
  Folded f;
  f.dims = {static_cast<int64_t>(values.size())};
  f.data.assign(values.begin(), values.end());
  f.integer = true;
  return f;
}

absl::StatusOr<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      return absl::InvalidArgumentError(
          str_cat("shapes ", Shape(a).str(), " and ", Shape(b).str(), " do not broadcast"));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

absl::StatusOr<Folded> fold_binary(const Folded& a, const Folded& b, double (*f)(double, double),
                                   bool integer_result) {
  auto dims = broadcast_dims(a.dims, b.dims);
  if (!dims.ok()) return dims.status();
  if (foldable_elements(*dims) < 0) {
    return absl::InvalidArgumentError(str_cat("a tensor of ", Shape(*dims).str(), " (over ",
                                              kMaxFoldedElements, " elements) to fold"));
  }
  Folded out;
  out.dims = *dims;
  out.integer = integer_result;
  const size_t rank = dims->size();
  // Each operand's strides over the output's dimensions (0 where it is broadcast).
  auto aligned = [&](const std::vector<int64_t>& d) {
    std::vector<int64_t> s(rank, 0);
    const std::vector<int64_t> own = strides_of(d);
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i] != 1) s[rank - d.size() + i] = own[i];
    }
    return s;
  };
  const std::vector<int64_t> sa = aligned(a.dims), sb = aligned(b.dims);
  const int64_t n = product(*dims);
  std::vector<int64_t> index(rank, 0);
  out.data.resize(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    int64_t ia = 0, ib = 0;
    for (size_t i = 0; i < rank; ++i) {
      ia += index[i] * sa[i];
      ib += index[i] * sb[i];
    }
    out.data[static_cast<size_t>(e)] =
        f(a.data[static_cast<size_t>(ia)], b.data[static_cast<size_t>(ib)]);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < (*dims)[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

Folded fold_transpose(const Folded& a, const std::vector<int64_t>& perm) {
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i)) return a;
  }
  if (perm.size() != a.dims.size()) return a;
  Folded out;
  out.integer = a.integer;
  for (int64_t p : perm) out.dims.push_back(a.dims[static_cast<size_t>(p)]);
  const std::vector<int64_t> in_strides = strides_of(a.dims);
  const size_t rank = perm.size();
  std::vector<int64_t> index(rank, 0);
  out.data.resize(a.data.size());
  for (size_t e = 0; e < out.data.size(); ++e) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += index[i] * in_strides[static_cast<size_t>(perm[i])];
    out.data[e] = a.data[static_cast<size_t>(src)];
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < out.dims[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

absl::StatusOr<Folded> fold_gather(const Folded& a, const Folded& indices, int64_t axis) {
  auto ids = indices.ints("Gather's indices");
  if (!ids.ok()) return ids.status();
  const auto ax = static_cast<size_t>(axis);
  const int64_t extent = a.dims[ax];
  const int64_t outer = product(std::vector<int64_t>(a.dims.begin(), a.dims.begin() + axis));
  const int64_t inner = product(a.dims, ax + 1);
  Folded out;
  out.integer = a.integer;
  out.dims.assign(a.dims.begin(), a.dims.begin() + axis);
  out.dims.insert(out.dims.end(), indices.dims.begin(), indices.dims.end());
  out.dims.insert(out.dims.end(), a.dims.begin() + axis + 1, a.dims.end());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t id : *ids) {
      const int64_t row = id < 0 ? id + extent : id;
      if (row < 0 || row >= extent) {
        return absl::InvalidArgumentError(
            str_cat("Gather index ", id, " is outside [", -extent, ", ", extent, ")"));
      }
      const auto* src = a.data.data() + (o * extent + row) * inner;
      out.data.insert(out.data.end(), src, src + inner);
    }
  }
  return out;
}

Folded fold_slice(const Folded& a, const std::vector<int64_t>& begin,
                  const std::vector<int64_t>& end) {
  Folded out;
  out.integer = a.integer;
  const size_t rank = a.dims.size();
  for (size_t i = 0; i < rank; ++i) out.dims.push_back(end[i] - begin[i]);
  const std::vector<int64_t> strides = strides_of(a.dims);
  std::vector<int64_t> index(rank, 0);
  const int64_t n = product(out.dims);
  for (int64_t e = 0; e < n; ++e) {
    int64_t src = 0;
    for (size_t i = 0; i < rank; ++i) src += (begin[i] + index[i]) * strides[i];
    out.data.push_back(a.data[static_cast<size_t>(src)]);
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < out.dims[i]) break;
      index[i] = 0;
    }
  }
  return out;
}

Folded fold_concat(const std::vector<const Folded*>& parts, int64_t axis) {
  Folded out;
  out.integer = parts.front()->integer;
  out.dims = parts.front()->dims;
  const auto ax = static_cast<size_t>(axis);
  out.dims[ax] = 0;
  for (const Folded* p : parts) out.dims[ax] += p->dims[ax];
  const int64_t outer = product(std::vector<int64_t>(out.dims.begin(), out.dims.begin() + axis));
  for (int64_t o = 0; o < outer; ++o) {
    for (const Folded* p : parts) {
      const int64_t chunk = product(p->dims, ax);
      const auto* src = p->data.data() + o * chunk;
      out.data.insert(out.data.end(), src, src + chunk);
    }
  }
  return out;
}

}  // namespace tpusim::runtime::onnx_import
