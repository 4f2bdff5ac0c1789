#pragma once
// Device memory that frees itself: one value of the gpu backend (a node's output, a variable,
// an uploaded constant or batch). Values are immutable once computed, so a reshape or a
// stop_gradient shares its input's buffer and the memory goes back when the last holder drops
// it (after the value's last use, as the cpu backend drops host tensors). Allocation and release
// are stream-ordered (cudaMallocAsync / cudaFreeAsync on the legacy default stream, which every
// kernel, copy and GEMM of the backend uses), so freeing never waits for the device. The device's
// default pool keeps what is freed (its release threshold raised to the maximum on the first
// allocation): at the default threshold of 0 the pool hands its memory back to the driver at
// every synchronisation (each step's read-back of its outputs, each timed GEMM), and the next
// step maps all of it again.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <absl/status/statusor.h>
#include <cuda_runtime_api.h>

#include "common/strings.h"
#include "runtime/backend/gpu/cuda_status.h"

namespace tpusim::runtime::gpu {

class DeviceBuffer {
 public:
  // `bytes` of uninitialised device memory (none for 0 bytes: data() is null).
  static absl::StatusOr<std::shared_ptr<DeviceBuffer>> allocate(size_t bytes) {
    static const absl::Status pool = keep_freed_memory();
    if (!pool.ok()) return pool;
    void* ptr = nullptr;
    if (bytes > 0) {
      if (absl::Status st = cuda_status(cudaMallocAsync(&ptr, bytes, nullptr),
                                        str_cat("cudaMallocAsync of ", bytes, " bytes"));
          !st.ok()) {
        return st;
      }
    }
    return std::shared_ptr<DeviceBuffer>(new DeviceBuffer(ptr, bytes));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, nullptr);  // an error here has no one to tell
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  // The bf16 encodings of this buffer's floats, made by the first matmul that reads it at mxu
  // precision and kept with it (a value is never written once computed), so a value that
  // feeds several GEMMs, or one GEMM run again, is rounded once. Null until then.
  const std::shared_ptr<DeviceBuffer>& bf16_twin() const { return bf16_twin_; }
  void set_bf16_twin(std::shared_ptr<DeviceBuffer> twin) const { bf16_twin_ = std::move(twin); }

 private:
  // Raises the current device's default memory pool's release threshold to the maximum.
  static absl::Status keep_freed_memory() {
    int device = 0;
    if (absl::Status st = cuda_status(cudaGetDevice(&device), "cudaGetDevice"); !st.ok()) return st;
    cudaMemPool_t pool = nullptr;
    if (absl::Status st =
            cuda_status(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
        !st.ok()) {
      return st;
    }
    uint64_t keep_all = UINT64_MAX;
    return cuda_status(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all),
                       "setting the memory pool's release threshold");
  }

  DeviceBuffer(void* ptr, size_t bytes) : ptr_(ptr), bytes_(bytes) {}
  void* ptr_;
  size_t bytes_;
  mutable std::shared_ptr<DeviceBuffer> bf16_twin_;
};

using Buffer = std::shared_ptr<DeviceBuffer>;

}  // namespace tpusim::runtime::gpu
