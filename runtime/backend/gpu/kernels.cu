// Every kernel of the gpu backend: one generic element kernel (element_kernel.h says what each
// element computes) and the ring sum of cross_replica_sum. Nothing here is fused or tiled: the
// backend exists to cross-check numerics, and one thread per output element keeps every sum in
// the cpu kernels' order. Built with nvcc's defaults (IEEE division and sqrt; contraction into
// FMA cannot change these kernels, whose float arithmetic has no multiply feeding an add).
#include <algorithm>

#include "runtime/backend/gpu/kernels.h"
#include "runtime/backend/gpu/split_batch.h"

namespace tpusim::runtime::gpu {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;

int blocks_for(int64_t count) {
  return static_cast<int>(std::min<int64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

// One kind's kernel; blockIdx.y is the replica.
template <ElementKind K>
__global__ void element_kernel(ElementPlan plan, ReplicaOperands in, void* out,
                               int64_t out_stride) {
  const int64_t r = blockIdx.y;
  const char* a = static_cast<const char*>(in.data[0]) + r * in.stride[0];
  const char* b = static_cast<const char*>(in.data[1]) + r * in.stride[1];
  const char* c = static_cast<const char*>(in.data[2]) + r * in.stride[2];
  void* o = static_cast<char*>(out) + r * out_stride;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < plan.count;
       e += stride) {
    eval_kind<K>(plan, a, b, c, o, e);
  }
}

// kExtractPatches and kPatchesToImage with C a multiple of 4: a thread takes four channels of
// one pixel (elements 4t .. 4t+3), so the index arithmetic is done once for four values and
// each moves as one 16-byte load and store. Each channel's sum is the scalar kernel's, term for
// term. blockIdx.y is the replica.
template <ElementKind K>
__global__ void quad_kernel(ElementPlan plan, ReplicaOperands in, void* out, int64_t out_stride) {
  const int64_t r = blockIdx.y;
  const auto* a =
      reinterpret_cast<const float*>(static_cast<const char*>(in.data[0]) + r * in.stride[0]);
  auto* o = reinterpret_cast<float*>(static_cast<char*>(out) + r * out_stride);
  const int64_t quads = plan.count / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < quads;
       q += stride) {
    const auto e = static_cast<uint32_t>(q * 4);
    float4 v;
    if constexpr (K == ElementKind::kExtractPatches) {
      const int64_t from = detail::patch_source(plan.patches, e);
      v = from < 0 ? make_float4(0, 0, 0, 0) : *reinterpret_cast<const float4*>(a + from);
    } else {
      float acc[4];
      detail::image_elements<uint32_t, 4>(plan.patches, a, e, acc);
      v = make_float4(detail::finish(plan, acc[0]), detail::finish(plan, acc[1]),
                      detail::finish(plan, acc[2]), detail::finish(plan, acc[3]));
    }
    *reinterpret_cast<float4*>(o + e) = v;
  }
}

// Whether quad_kernel can run `plan`: a patch kind, C a multiple of 4 and 32-bit indices.
bool runs_in_quads(const ElementPlan& plan) {
  return (plan.kind == ElementKind::kExtractPatches || plan.kind == ElementKind::kPatchesToImage) &&
         plan.patches.c % 4 == 0 && fits_32_bits(plan);
}

// kTranspose: [batches, rows, cols] -> [batches, cols, rows] of 4-byte words through a 32 x 32
// tile in shared memory, so reads run along the input's rows and writes along the output's.
// blockIdx.x walks column tiles, y row tiles, z the batches of every replica.
constexpr int kTile = 32, kTileRows = 8;

__global__ void transpose_kernel(int64_t batches, int64_t rows, int64_t cols, ReplicaOperands in,
                                 void* out, int64_t out_stride, int64_t replicas) {
  __shared__ uint32_t tile[kTile][kTile + 1];  // +1: no bank conflicts reading columns
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  for (int64_t z = blockIdx.z; z < batches * replicas; z += gridDim.z) {
    const int64_t r = z / batches, batch = z % batches;
    const auto* src =
        reinterpret_cast<const uint32_t*>(static_cast<const char*>(in.data[0]) + r * in.stride[0]) +
        batch * rows * cols;
    auto* dst =
        reinterpret_cast<uint32_t*>(static_cast<char*>(out) + r * out_stride) + batch * rows * cols;
    const int64_t col = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x;
    for (int64_t ty = blockIdx.y; ty < row_tiles; ty += gridDim.y) {
      for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const int64_t row = ty * kTile + j;
        if (row < rows && col < cols) tile[j][threadIdx.x] = src[row * cols + col];
      }
      __syncthreads();
      const int64_t out_col = ty * kTile + threadIdx.x;  // an input row
      for (int j = threadIdx.y; j < kTile; j += kTileRows) {
        const int64_t out_row = static_cast<int64_t>(blockIdx.x) * kTile + j;  // an input column
        if (out_row < cols && out_col < rows) dst[out_row * rows + out_col] = tile[threadIdx.x][j];
      }
      __syncthreads();
    }
  }
}

cudaError_t launch_transpose(const ElementPlan& plan, const ReplicaOperands& in, void* out,
                             int64_t out_stride, uint32_t replicas) {
  const int64_t rows = plan.len, cols = plan.inner;
  const int64_t batches = plan.count / (rows * cols);
  const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                  static_cast<unsigned>(std::min<int64_t>((rows + kTile - 1) / kTile, 65535)),
                  static_cast<unsigned>(std::min<int64_t>(batches * replicas, 65535)));
  transpose_kernel<<<grid, dim3(kTile, kTileRows)>>>(batches, rows, cols, in, out, out_stride,
                                                     replicas);
  return cudaGetLastError();
}

// f32 -> bf16 encodings, four a thread (one 16-byte load, one 8-byte store).
__global__ void bf16_kernel(const float* in, uint16_t* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x * 4;
  for (int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * 4; i < n;
       i += stride) {
    if (i + 3 < n) {
      const float4 v = *reinterpret_cast<const float4*>(in + i);
      ushort4 w;
      w.x = element::f32_to_bf16_bits(v.x);
      w.y = element::f32_to_bf16_bits(v.y);
      w.z = element::f32_to_bf16_bits(v.z);
      w.w = element::f32_to_bf16_bits(v.w);
      *reinterpret_cast<ushort4*>(out + i) = w;
    } else {
      for (int64_t j = i; j < n; ++j) out[j] = element::f32_to_bf16_bits(in[j]);
    }
  }
}

__global__ void sum_partials_kernel(const float* parts, int64_t slices, int64_t count,
                                    int64_t total, float* out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t g = e / count, i = e - g * count;
    const float* p = parts + g * slices * count + i;
    float acc = 0;
    for (int64_t c = 0; c < slices; ++c) acc += p[c * count];
    out[e] = acc;
  }
}

__global__ void split_pointers_kernel(SplitPointers p, const void** a_out, const void** b_out,
                                      void** c_out) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < p.count;
       g += stride) {
    a_out[g] =
        p.a + split_batch_offset(g, p.chunks, p.group_stride_a, p.chunk_stride_a) * p.element_bytes;
    b_out[g] =
        p.b + split_batch_offset(g, p.chunks, p.group_stride_b, p.chunk_stride_b) * p.element_bytes;
    c_out[g] = p.c + g * p.stride_c;
  }
}

// Replica r's values at a fixed stride in one buffer, as ring_sum_of reads them.
template <typename T>
struct StridedParts {
  const char* base;
  int64_t stride;
  __device__ const T* operator[](uint64_t r) const {
    return reinterpret_cast<const T*>(base + static_cast<int64_t>(r) * stride);
  }
};

template <typename T>
__global__ void ring_sum_kernel(StridedParts<T> parts, uint64_t k, uint64_t n, T* out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = element::ring_sum_of<T>(parts, k, n, i);
  }
}

}  // namespace

cudaError_t launch_elements(const ElementPlan& plan, const ReplicaOperands& in, void* out,
                            int64_t out_stride, uint32_t replicas) {
  if (plan.count <= 0 || replicas == 0) return cudaSuccess;
  if (plan.kind == ElementKind::kTranspose)
    return launch_transpose(plan, in, out, out_stride, replicas);
  if (runs_in_quads(plan)) {
    const dim3 quads(static_cast<unsigned>(blocks_for(plan.count / 4)), replicas);
    if (plan.kind == ElementKind::kExtractPatches) {
      quad_kernel<ElementKind::kExtractPatches><<<quads, kThreads>>>(plan, in, out, out_stride);
    } else {
      quad_kernel<ElementKind::kPatchesToImage><<<quads, kThreads>>>(plan, in, out, out_stride);
    }
    return cudaGetLastError();
  }
  const dim3 grid(static_cast<unsigned>(blocks_for(plan.count)), replicas);
  switch (plan.kind) {
#define TPUSIM_LAUNCH_KIND(K)                                                      \
  case ElementKind::K:                                                             \
    element_kernel<ElementKind::K><<<grid, kThreads>>>(plan, in, out, out_stride); \
    break;
    TPUSIM_ELEMENT_KINDS(TPUSIM_LAUNCH_KIND)
#undef TPUSIM_LAUNCH_KIND
    case ElementKind::kTranspose:
      break;  // launched above
  }
  return cudaGetLastError();
}

cudaError_t launch_to_bf16(const float* in, uint16_t* out, int64_t n) {
  if (n <= 0) return cudaSuccess;
  bf16_kernel<<<blocks_for((n + 3) / 4), kThreads>>>(in, out, n);
  return cudaGetLastError();
}

cudaError_t launch_sum_partials(const float* parts, int64_t slices, int64_t count, int64_t groups,
                                float* out) {
  const int64_t total = count * groups;
  if (total <= 0) return cudaSuccess;
  sum_partials_kernel<<<blocks_for(total), kThreads>>>(parts, slices, count, total, out);
  return cudaGetLastError();
}

cudaError_t launch_split_pointers(const SplitPointers& p, const void** a_out, const void** b_out,
                                  void** c_out) {
  if (p.count <= 0) return cudaSuccess;
  split_pointers_kernel<<<blocks_for(p.count), kThreads>>>(p, a_out, b_out, c_out);
  return cudaGetLastError();
}

cudaError_t launch_elements(const ElementPlan& plan, const void* a, const void* b, const void* c,
                            void* out) {
  ReplicaOperands in;
  in.data[0] = a;
  in.data[1] = b;
  in.data[2] = c;
  return launch_elements(plan, in, out, 0, 1);
}

cudaError_t launch_ring_sum(const void* values, int64_t stride, uint64_t k, uint64_t n, bool is_int,
                            void* out) {
  if (n == 0) return cudaSuccess;
  const int blocks = blocks_for(static_cast<int64_t>(n));
  const char* base = static_cast<const char*>(values);
  if (is_int) {
    ring_sum_kernel<int32_t>
        <<<blocks, kThreads>>>({base, stride}, k, n, static_cast<int32_t*>(out));
  } else {
    ring_sum_kernel<float><<<blocks, kThreads>>>({base, stride}, k, n, static_cast<float*>(out));
  }
  return cudaGetLastError();
}

}  // namespace tpusim::runtime::gpu
