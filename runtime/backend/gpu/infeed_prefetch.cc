#include "runtime/backend/gpu/infeed_prefetch.h"

#include <cstring>

#include "common/strings.h"
#include "runtime/backend/gpu/cuda_status.h"

namespace tpusim::runtime::gpu {

void InfeedPrefetch::clear() {
  // Errors here have no one to tell: the device's next call reports a fault.
  if (stream_ != nullptr) cudaStreamSynchronize(stream_);
  copies_queued_ = false;
  reserved_.clear();
  ready_.clear();
}

InfeedPrefetch::~InfeedPrefetch() {
  clear();
  if (staging_ != nullptr) cudaFreeHost(staging_);
  if (allocated_ != nullptr) cudaEventDestroy(allocated_);
  if (copied_ != nullptr) cudaEventDestroy(copied_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

absl::Status InfeedPrefetch::ensure_stream() {
  if (stream_ != nullptr) return absl::OkStatus();
  if (absl::Status st = cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                                    "creating the infeed copy stream");
      !st.ok()) {
    stream_ = nullptr;
    return st;
  }
  if (absl::Status st = cuda_status(cudaEventCreateWithFlags(&allocated_, cudaEventDisableTiming),
                                    "creating an event");
      !st.ok()) {
    return st;
  }
  return cuda_status(cudaEventCreateWithFlags(&copied_, cudaEventDisableTiming),
                     "creating an event");
}

absl::Status InfeedPrefetch::ensure_staging(size_t bytes) {
  // The last copies out of the staging must be done before it is written or freed.
  if (copies_queued_) {
    if (absl::Status st = cuda_status(cudaEventSynchronize(copied_), "waiting for infeed copies");
        !st.ok()) {
      return st;
    }
    copies_queued_ = false;
  }
  if (bytes <= staging_bytes_) return absl::OkStatus();
  if (staging_ != nullptr) cudaFreeHost(staging_);
  staging_ = nullptr;
  staging_bytes_ = 0;
  if (absl::Status st = cuda_status(cudaHostAlloc(&staging_, bytes, cudaHostAllocDefault),
                                    str_cat("pinning ", bytes, " bytes of host memory"));
      !st.ok()) {
    staging_ = nullptr;
    return st;
  }
  staging_bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status InfeedPrefetch::reserve(const std::map<int, size_t>& bytes) {
  reserved_.clear();
  if (bytes.empty()) return absl::OkStatus();
  if (absl::Status st = ensure_stream(); !st.ok()) return st;
  for (const auto& [node, size] : bytes) {
    auto buffer = DeviceBuffer::allocate(size);
    if (!buffer.ok()) return buffer.status();
    reserved_[node] = *std::move(buffer);
  }
  // The buffers come from the default stream's pool, allocated while it is idle (the step's
  // kernels are queued after): the copy stream waits for the allocations alone.
  if (absl::Status st = cuda_status(cudaEventRecord(allocated_, cudaStreamLegacy), "an event");
      !st.ok()) {
    return st;
  }
  return cuda_status(cudaStreamWaitEvent(stream_, allocated_, 0), "an event wait");
}

absl::Status InfeedPrefetch::copy(const std::vector<Batch>& batches) {
  size_t total = 0;
  for (const Batch& b : batches) {
    const auto it = reserved_.find(b.node);
    if (it == reserved_.end() || it->second->bytes() != b.bytes * b.replicas.size()) {
      return absl::InternalError(
          str_cat("infeed node ", b.node, "'s prefetch buffer was not reserved at its size"));
    }
    total += b.bytes * b.replicas.size();
  }
  if (total == 0) return absl::OkStatus();
  if (absl::Status st = ensure_staging(total); !st.ok()) return st;
  auto* staged = static_cast<char*>(staging_);
  for (const Batch& b : batches) {
    const size_t bytes = b.bytes * b.replicas.size();
    for (size_t r = 0; r < b.replicas.size(); ++r)
      std::memcpy(staged + r * b.bytes, b.replicas[r], b.bytes);
    if (absl::Status st = cuda_status(cudaMemcpyAsync(reserved_[b.node]->data(), staged, bytes,
                                                      cudaMemcpyHostToDevice, stream_),
                                      "copying the next step's infeed to the device");
        !st.ok()) {
      return st;
    }
    staged += bytes;
  }
  if (absl::Status st = cuda_status(cudaEventRecord(copied_, stream_), "an event"); !st.ok())
    return st;
  copies_queued_ = true;
  ready_ = std::move(reserved_);
  reserved_.clear();
  return absl::OkStatus();
}

absl::StatusOr<Buffer> InfeedPrefetch::take(int node) {
  auto it = ready_.find(node);
  if (it == ready_.end()) return Buffer{};
  Buffer buffer = std::move(it->second);
  ready_.erase(it);
  if (absl::Status st = cuda_status(cudaStreamWaitEvent(cudaStreamLegacy, copied_, 0),
                                    "waiting for the infeed copy");
      !st.ok()) {
    return st;
  }
  return buffer;
}

}  // namespace tpusim::runtime::gpu
