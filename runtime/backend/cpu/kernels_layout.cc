#include <algorithm>
#include <limits>
#include <type_traits>

#include "runtime/backend/cpu/buffers.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/walk.h"
#include "runtime/backend/element_math.h"

namespace tpusim::runtime::cpu {
namespace {

template <typename F>
void copy_values(const HostTensor& from, HostTensor* to, F index_map_walk) {
  if (from.dtype == DType::kS32) {
    index_map_walk([&](int64_t o, int64_t i) {
      to->i[static_cast<size_t>(o)] = from.i[static_cast<size_t>(i)];
    });
  } else {
    index_map_walk([&](int64_t o, int64_t i) {
      to->f[static_cast<size_t>(o)] = from.f[static_cast<size_t>(i)];
    });
  }
}

// The other direction: `index_map_walk` visits (index in `from`, index in `to`) pairs and each
// element of `from` lands in `to` (concat, pad).
template <typename F>
void scatter_values(const HostTensor& from, HostTensor* to, F index_map_walk) {
  copy_values(from, to, [&](auto gather) {
    index_map_walk([&](int64_t from_index, int64_t to_index) { gather(to_index, from_index); });
  });
}

// out[k] = from[base + sum(index[d] * strides[d])] for every index k of `shape` (transpose,
// broadcast, slice), row by row on the host's threads: a row read contiguously is one copy, a
// broadcast row one fill.
template <typename T>
void gather_rows(const std::vector<T>& from, std::vector<T>* to, const Shape& shape,
                 const std::vector<int64_t>& strides, int64_t base) {
  parallel_walk_rows(shape, strides, base, strides, base, [&](const Row& r) {
    const T* src = from.data() + r.ia;
    T* dst = to->data() + r.k;
    if (r.step_a == 1) {
      std::copy(src, src + r.count, dst);
    } else if (r.step_a == 0) {
      std::fill(dst, dst + r.count, *src);
    } else {
      for (int64_t j = 0; j < r.count; ++j) dst[j] = src[j * r.step_a];
    }
  });
}

void gather_values(const HostTensor& from, HostTensor* to, const std::vector<int64_t>& strides,
                   int64_t base) {
  if (from.dtype == DType::kS32) {
    gather_rows(from.i, &to->i, to->shape, strides, base);
  } else {
    gather_rows(from.f, &to->f, to->shape, strides, base);
  }
}

// Linear offset of the element at `begin` under `strides`.
int64_t start_offset(const std::vector<int64_t>& begin, const std::vector<int64_t>& strides) {
  int64_t base = 0;
  for (size_t d = 0; d < strides.size(); ++d) base += begin[d] * strides[d];
  return base;
}

// Whether a reduction's axes are its input's first `axes.size()` ones (from 0) or its last ones
// (`trailing`): each output then sums a column of an [len, outputs] matrix or a contiguous row
// of an [outputs, len] one.
bool reduces_axes_at_one_end(const std::vector<int64_t>& axes, int rank, bool trailing) {
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  const int64_t first = trailing ? rank - static_cast<int64_t>(sorted.size()) : 0;
  for (size_t k = 0; k < sorted.size(); ++k) {
    if (sorted[k] != first + static_cast<int64_t>(k)) return false;
  }
  return !sorted.empty();
}

// Reductions in element_math.h's order: each output's terms (row-major order of the reduced
// coordinates) in blocks of kReduceBlock, each block summed in double from the start, the
// blocks' sums then added by the levels of its tree: the gpu kernels' order, bit for bit.
// `sums` holds the start (0, or -infinity for max) on entry.
using element::kReduceBlock;
using element::reduce_blocks;
using element::reduce_start;
using element::reduce_step;

// Adds up the first level's block sums by the levels above (element_math.h's tree):
// parts[j * outputs + o] holds output o's sum of block j of `blocks`; sums[o], the start on
// entry, ends as output o's result.
template <typename Max>
void fold_block_sums(std::vector<double> parts, int64_t blocks, int64_t outputs, Max max,
                     double* sums) {
  while (blocks > kReduceBlock) {
    const int64_t groups = reduce_blocks(blocks);
    std::vector<double> next(static_cast<size_t>(groups * outputs));
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t o = 0; o < outputs; ++o) {
        double acc = reduce_start(max);
        for (int64_t i = g * kReduceBlock; i < std::min(blocks, (g + 1) * kReduceBlock); ++i)
          acc = reduce_step(max, acc, parts[static_cast<size_t>(i * outputs + o)]);
        next[static_cast<size_t>(g * outputs + o)] = acc;
      }
    }
    parts.swap(next);
    blocks = groups;
  }
  for (int64_t j = 0; j < blocks; ++j) {
    for (int64_t o = 0; o < outputs; ++o)
      sums[o] = reduce_step(max, sums[o], parts[static_cast<size_t>(j * outputs + o)]);
  }
}

// Leading axes reduced: output c sums column c of an [len, outputs] matrix. Every (block,
// column group) is its own task, so a few long columns (a bias gradient) still fill the cores.
template <typename Max>
void reduce_columns(const float* x, int64_t len, int64_t outputs, Max max, double* sums) {
  constexpr int64_t kColumns = 64;
  const int64_t blocks = reduce_blocks(len);
  const int64_t groups = (outputs + kColumns - 1) / kColumns;
  if (blocks ==
      1) {  // one block a column: summed into `sums` itself, the column groups in parallel
#pragma omp parallel for schedule(static) if (len * outputs > 65536 && outputs > kColumns)
    for (int64_t c0 = 0; c0 < outputs; c0 += kColumns) {
      const int64_t c1 = std::min(outputs, c0 + kColumns);
      for (int64_t row = 0; row < len; ++row) {
        const float* terms = x + row * outputs;
        for (int64_t c = c0; c < c1; ++c) sums[c] = reduce_step(max, sums[c], terms[c]);
      }
    }
    return;
  }
  std::vector<double> partial(static_cast<size_t>(blocks * outputs));
#pragma omp parallel for schedule(static) if (len * outputs > 65536)
  for (int64_t task = 0; task < blocks * groups; ++task) {
    const int64_t j = task / groups, c0 = (task % groups) * kColumns;
    const int64_t c1 = std::min(outputs, c0 + kColumns);
    double* part = partial.data() + j * outputs;
    for (int64_t c = c0; c < c1; ++c) part[c] = reduce_start(max);
    for (int64_t row = j * kReduceBlock; row < std::min(len, (j + 1) * kReduceBlock); ++row) {
      const float* terms = x + row * outputs;
      for (int64_t c = c0; c < c1; ++c) part[c] = reduce_step(max, part[c], terms[c]);
    }
  }
  fold_block_sums(std::move(partial), blocks, outputs, max, sums);
}

// Trailing axes reduced: output r sums row r of an [outputs, len] matrix, eight rows at a time
// (eight independent chains of additions in flight instead of one).
template <typename Max>
void reduce_rows(const float* x, int64_t len, int64_t outputs, Max max, double* sums) {
  constexpr int64_t kRows = 8;
#pragma omp parallel for schedule(static) if (len * outputs > 65536)
  for (int64_t r0 = 0; r0 < outputs; r0 += kRows) {
    const int64_t count = std::min(kRows, outputs - r0);
    const int64_t blocks = reduce_blocks(len);
    // Up to kReduceBlock blocks form the tree's last level: each block's sum is added as it
    // ends. Past that the levels need every block's sum first.
    const bool one_level = blocks <= kReduceBlock;
    std::vector<double> parts(one_level ? 0 : static_cast<size_t>(blocks * count));
    for (int64_t j = 0; j < blocks; ++j) {
      double part[kRows];
      std::fill(part, part + count, reduce_start(max));
      for (int64_t k = j * kReduceBlock; k < std::min(len, (j + 1) * kReduceBlock); ++k) {
        for (int64_t r = 0; r < count; ++r)
          part[r] = reduce_step(max, part[r], x[(r0 + r) * len + k]);
      }
      for (int64_t r = 0; r < count; ++r) {
        if (one_level) {
          sums[r0 + r] = reduce_step(max, sums[r0 + r], part[r]);
        } else {
          parts[static_cast<size_t>(j * count + r)] = part[r];
        }
      }
    }
    if (!one_level) fold_block_sums(std::move(parts), blocks, count, max, sums + r0);
  }
}

// Any other axes: each output walks its terms through the strided maps of its kept and reduced
// coordinates (as the gpu's reduce kernel does), the outputs on the host's threads.
template <typename Max>
void reduce_strided(const Node& n, const HostTensor& a, Max max, double* sums) {
  element::StridedMap kept, reduced;
  const auto strides = a.shape.strides();
  for (int d = 0; d < a.shape.rank(); ++d) {
    const bool is_reduced =
        std::find(n.attrs.axes.begin(), n.attrs.axes.end(), d) != n.attrs.axes.end();
    element::StridedMap& m = is_reduced ? reduced : kept;
    m.dims[m.rank] = a.shape.dim(d);
    m.strides[m.rank] = strides[static_cast<size_t>(d)];
    ++m.rank;
  }
  int64_t terms = 1;
  for (int d = 0; d < reduced.rank; ++d) terms *= reduced.dims[d];
  kept = element::merged_map(kept);  // the same offsets with fewer divisions
  reduced = element::merged_map(reduced);
  const float* x = a.f.data();
  const int64_t outputs = n.shape.elements();
#pragma omp parallel for schedule(static) if (a.shape.elements() > 65536)
  for (int64_t o = 0; o < outputs; ++o) {
    const int64_t base = element::strided_offset(kept, o);
    const int64_t blocks = reduce_blocks(terms);
    const bool one_level = blocks <= kReduceBlock;  // as in reduce_rows
    std::vector<double> parts(one_level ? 0 : static_cast<size_t>(blocks));
    for (int64_t j = 0; j < blocks; ++j) {
      double part = reduce_start(max);
      for (int64_t k = j * kReduceBlock; k < std::min(terms, (j + 1) * kReduceBlock); ++k)
        part = reduce_step(max, part, x[base + element::strided_offset(reduced, k)]);
      if (one_level) {
        sums[o] = reduce_step(max, sums[o], part);
      } else {
        parts[static_cast<size_t>(j)] = part;
      }
    }
    if (!one_level) fold_block_sums(std::move(parts), blocks, 1, max, sums + o);
  }
}

// Whether the reduced axes are one run [first, end) of the input's axes; if so, the input is
// [outer, len, inner] with the middle reduced.
bool reduces_one_run(const std::vector<int64_t>& axes, const Shape& s, int64_t* outer, int64_t* len,
                     int64_t* inner) {
  std::vector<int64_t> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 1; k < sorted.size(); ++k) {
    if (sorted[k] != sorted[k - 1] + 1) return false;
  }
  if (sorted.empty()) return false;
  *outer = *len = *inner = 1;
  for (int d = 0; d < s.rank(); ++d) {
    int64_t* part = d < sorted.front() ? outer : d <= sorted.back() ? len : inner;
    *part *= s.dim(d);
  }
  return true;
}

template <typename Max>
void accumulate_in_double(const Node& n, const HostTensor& a, Max max, double* sums) {
  const Shape& s = a.shape;
  const int64_t outputs = n.shape.elements();
  if (outputs == 0) return;
  const int64_t len = s.elements() / outputs;
  int64_t outer = 1, run = 1, inner = 1;
  if (reduces_axes_at_one_end(n.attrs.axes, s.rank(), /*trailing=*/false)) {
    reduce_columns(a.f.data(), len, outputs, max, sums);
  } else if (reduces_one_run(n.attrs.axes, s, &outer, &run, &inner) && inner > 1) {
    // A middle run: each outer slice is a columns reduction, read in memory order.
    for (int64_t o = 0; o < outer; ++o)
      reduce_columns(a.f.data() + o * run * inner, run, inner, max, sums + o * inner);
  } else if (reduces_axes_at_one_end(n.attrs.axes, s.rank(), /*trailing=*/true)) {
    reduce_rows(a.f.data(), len, outputs, max, sums);
  } else {
    reduce_strided(n, a, max, sums);
  }
}

}  // namespace

HostTensor reduce(const Node& n, const Inputs& in, const KernelContext& ctx) {
  const HostTensor& a = *in[0];
  const Shape& s = a.shape;
  // Strides that map an input index to its output index (0 along reduced axes).
  std::vector<int64_t> to_out(static_cast<size_t>(s.rank()), 0);
  const auto out_strides = n.shape.strides();
  for (int d = 0, o = 0; d < s.rank(); ++d) {
    if (std::find(n.attrs.axes.begin(), n.attrs.axes.end(), d) == n.attrs.axes.end()) {
      to_out[static_cast<size_t>(d)] = out_strides[static_cast<size_t>(o++)];
    }
  }
  const bool is_max = n.op == Op::kReduceMax;
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  if (ctx.f32_reductions && !is_max) {  // in f32, in the same order
    std::vector<float> acc(static_cast<size_t>(n.shape.elements()), 0.0f);
    walk(s, to_out, 0,
         [&](int64_t i, int64_t o) { acc[static_cast<size_t>(o)] += a.f[static_cast<size_t>(i)]; });
    std::copy(acc.begin(), acc.end(), out.f.begin());
    if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
    return out;
  }
  // In double, in element_math.h's blocked order, as the gpu kernels sum.
  std::vector<double> acc(static_cast<size_t>(n.shape.elements()),
                          is_max ? -std::numeric_limits<double>::infinity() : 0.0);
  if (is_max) {
    accumulate_in_double(n, a, std::true_type{}, acc.data());
  } else {
    accumulate_in_double(n, a, std::false_type{}, acc.data());
  }
  for (size_t i = 0; i < acc.size(); ++i) out.f[i] = static_cast<float>(acc[i]);
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

HostTensor argmax(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  const int64_t axis = n.attrs.axis;
  const int64_t len = a.shape.dim(static_cast<int>(axis));
  const int64_t inner = a.shape.strides()[static_cast<size_t>(axis)];
  const int64_t outer = a.shape.elements() / (len * inner);
  HostTensor out = new_tensor(DType::kS32, n.shape, Init::kOverwritten);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      // The first NaN, else the first maximum, as XLA's argmax.
      const int64_t best =
          sim::nan_argmax(a.f.data() + static_cast<size_t>(o * len * inner + i), len, inner);
      out.i[static_cast<size_t>(o * inner + i)] = static_cast<int32_t>(best);
    }
  }
  return out;
}

// A transpose that moves the input's last (contiguous) axis away from the end copies in square
// tiles: rows along that axis read contiguously, columns along the output's last axis written
// contiguously, so neither side strides through memory one element at a time.
template <typename T>
void transpose_tiled(const std::vector<T>& from, std::vector<T>* to, const Shape& out,
                     const std::vector<int64_t>& in_strides, int row_dim) {
  constexpr int64_t kTile = 32;
  const int last = out.rank() - 1;
  const auto out_strides = out.strides();
  const int64_t rows = out.dim(row_dim), cols = out.dim(last);
  const int64_t row_out = out_strides[static_cast<size_t>(row_dim)];
  const int64_t col_in = in_strides[static_cast<size_t>(last)];
  std::vector<int64_t> outer = out.dims();
  outer[static_cast<size_t>(row_dim)] = 1;
  outer[static_cast<size_t>(last)] = 1;
  walk_indices(Shape(outer), out_strides, 0, in_strides, 0, [&](int64_t, int64_t o, int64_t i) {
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t r = r0; r < r1; ++r) {
          T* dst = to->data() + o + r * row_out;
          const T* src = from.data() + i + r;  // the row axis is the input's contiguous one
          for (int64_t c = c0; c < c1; ++c) dst[c] = src[c * col_in];
        }
      }
    }
  });
}

HostTensor reshape(const Node& n, const Inputs& in) {
  // On recycled storage and the host's threads: a fresh vector's copy was mostly the kernel
  // faulting its pages in.
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  gather_values(*in[0], &out, n.shape.strides(), 0);
  return out;
}

HostTensor transpose(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = new_tensor(a.dtype, n.shape, Init::kOverwritten);
  const auto s = a.shape.strides();
  std::vector<int64_t> in_strides;
  for (int64_t p : n.attrs.axes) in_strides.push_back(s[static_cast<size_t>(p)]);
  // The output dimension the input's last axis lands on.
  const int rank = n.shape.rank();
  int row_dim = rank - 1;
  for (int d = 0; d < rank; ++d) {
    if (n.attrs.axes[static_cast<size_t>(d)] == rank - 1) row_dim = d;
  }
  if (row_dim != rank - 1 && n.shape.dim(row_dim) > 1 && n.shape.dim(rank - 1) > 1) {
    if (a.dtype == DType::kS32) {
      transpose_tiled(a.i, &out.i, n.shape, in_strides, row_dim);
    } else {
      transpose_tiled(a.f, &out.f, n.shape, in_strides, row_dim);
    }
    return out;
  }
  gather_values(a, &out, in_strides, 0);
  return out;
}

HostTensor broadcast(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = new_tensor(a.dtype, n.shape, Init::kOverwritten);
  const auto strides = broadcast_strides(a.shape, n.shape, n.attrs.axes);
  gather_values(a, &out, strides, 0);
  return out;
}

HostTensor concat(const Node& n, const Inputs& in) {
  HostTensor out = new_tensor(n.dtype, n.shape, Init::kOverwritten);
  const auto out_strides = n.shape.strides();
  int64_t offset = 0;
  for (const HostTensor* part : in) {
    // Walk the part; its element lands at the same index shifted along the axis.
    scatter_values(*part, &out, [&](auto f) {
      walk(part->shape, out_strides, offset * out_strides[static_cast<size_t>(n.attrs.axis)], f);
    });
    offset += part->shape.dim(static_cast<int>(n.attrs.axis));
  }
  return out;
}

HostTensor slice(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = new_tensor(a.dtype, n.shape, Init::kOverwritten);
  const auto s = a.shape.strides();
  const int64_t base = start_offset(n.attrs.begin, s);
  gather_values(a, &out, s, base);
  return out;
}

HostTensor pad(const Node& n, const Inputs& in) {
  const HostTensor& a = *in[0];
  HostTensor out = new_tensor(a.dtype, n.shape);
  const auto s = n.shape.strides();
  const int64_t base = start_offset(n.attrs.begin, s);
  // Walk the input; each element lands in the padded output.
  scatter_values(a, &out, [&](auto f) { walk(a.shape, s, base, f); });
  return out;
}

void write_patch_rows(const float* image, const Shape& image_shape, const Node& patches,
                      int64_t first, int64_t count, float* dst) {
  const Window& w = patches.attrs.window;
  const int64_t H = image_shape.dim(1), W = image_shape.dim(2), C = image_shape.dim(3);
  const int64_t OH = patches.shape.dim(1), OW = patches.shape.dim(2);
  for (int64_t row = first; row < first + count; ++row) {
    const int64_t ox = row % OW, oy = row / OW % OH, b = row / (OW * OH);
    for (int64_t ky = 0; ky < w.kh; ++ky) {
      const int64_t y = oy * w.sh + ky - w.pad_top;
      for (int64_t kx = 0; kx < w.kw; ++kx, dst += C) {
        const int64_t xx = ox * w.sw + kx - w.pad_left;
        if (y < 0 || y >= H || xx < 0 || xx >= W) {  // zero padding
          std::fill(dst, dst + C, 0.0f);
          continue;
        }
        const float* src = image + ((b * H + y) * W + xx) * C;
        std::copy(src, src + C, dst);
      }
    }
  }
}

HostTensor extract_patches(const Node& n, const Inputs& in) {
  const HostTensor& x = *in[0];
  const int64_t positions = n.shape.dim(0) * n.shape.dim(1), OW = n.shape.dim(2);
  // Every element is written, the padding's zeros too, on the host's threads (a serial pass to
  // zero the patches first was a tenth of resnet_small's step).
  HostTensor out = new_tensor(x.dtype, n.shape, Init::kOverwritten);
  const int64_t width = n.shape.dim(3);
#pragma omp parallel for if (positions > 16)
  for (int64_t row = 0; row < positions; ++row)
    write_patch_rows(x.f.data(), x.shape, n, row * OW, OW, out.f.data() + row * OW * width);
  return out;
}

HostTensor patches_to_image(const Node& n, const Inputs& in) {
  const HostTensor& p = *in[0];
  const Window& w = n.attrs.window;
  const int64_t N = n.shape.dim(0), H = n.shape.dim(1), W = n.shape.dim(2), C = n.shape.dim(3);
  const int64_t OH = p.shape.dim(1), OW = p.shape.dim(2);
  HostTensor out = new_tensor(p.dtype, n.shape, Init::kOverwritten);
  // Sequential per image, in a fixed order: overlapping windows add up reproducibly. Each image
  // is zeroed by the thread that sums into it.
#pragma omp parallel for if (N > 1)
  for (int64_t b = 0; b < N; ++b) {
    std::fill(out.f.data() + b * H * W * C, out.f.data() + (b + 1) * H * W * C, 0.0f);
    for (int64_t oy = 0; oy < OH; ++oy) {
      for (int64_t ox = 0; ox < OW; ++ox) {
        const float* src = p.f.data() + ((b * OH + oy) * OW + ox) * w.kh * w.kw * C;
        for (int64_t ky = 0; ky < w.kh; ++ky) {
          const int64_t y = oy * w.sh + ky - w.pad_top;
          for (int64_t kx = 0; kx < w.kw; ++kx, src += C) {
            const int64_t xx = ox * w.sw + kx - w.pad_left;
            if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
            float* dst = out.f.data() + ((b * H + y) * W + xx) * C;
            for (int64_t c = 0; c < C; ++c) dst[c] += src[c];
          }
        }
      }
    }
  }
  if (n.dtype == DType::kBF16) round_all_to_bf16(out.f);
  return out;
}

}  // namespace tpusim::runtime::cpu
