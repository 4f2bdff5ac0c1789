#include "runtime/backend/cpu/buffers.h"

#include <algorithm>
#include <vector>

namespace tpusim::runtime::cpu {
namespace {

// Bounded by count; the largest buffers are kept. Tensors under 64 KiB are left to malloc,
// which reuses those by itself, and a tensor takes no buffer over twice its size.
constexpr size_t kMaxPooled = 64;
constexpr size_t kMinPooledElements = 16384;

thread_local BufferPool* current = nullptr;

// The smallest pooled vector holding `n` elements, moved out of the pool; a new one if none.
template <typename T>
std::vector<T> take(std::vector<std::vector<T>>& free, size_t n) {
  auto best = free.end();
  if (n < kMinPooledElements) return {};
  for (auto it = free.begin(); it != free.end(); ++it) {
    const size_t c = it->capacity();
    if (c >= n && c <= 2 * n && (best == free.end() || c < best->capacity())) best = it;
  }
  if (best == free.end()) return {};
  std::vector<T> v = std::move(*best);
  free.erase(best);
  return v;
}

template <typename T>
void give(std::vector<std::vector<T>>& free, std::vector<T>& v) {
  if (v.capacity() < kMinPooledElements) return;
  if (free.size() == kMaxPooled) {  // drop the smallest if `v` is larger
    auto smallest = std::min_element(free.begin(), free.end(), [](const auto& a, const auto& b) {
      return a.capacity() < b.capacity();
    });
    if (smallest->capacity() >= v.capacity()) {
      v = std::vector<T>();
      return;
    }
    free.erase(smallest);
  }
  free.push_back(std::move(v));
  v = std::vector<T>();
}

// Sizes `v` to n elements: all zeros, or (kOverwritten) zeros only where the recycled vector
// held none (a pooled vector keeps its size, so resize writes nothing up to it).
template <typename T>
void fill(std::vector<T>& v, size_t n, Init init) {
  if (init == Init::kZeros) {
    v.assign(n, T{});
  } else {
    v.resize(n);
  }
}

}  // namespace

PoolScope::PoolScope(BufferPool& pool) : previous_(current) { current = &pool; }
PoolScope::~PoolScope() { current = previous_; }

HostTensor new_tensor(DType dtype, const Shape& shape, Init init) {
  if (current == nullptr) return HostTensor::zeros(dtype, shape);
  HostTensor t;
  t.dtype = dtype;
  t.shape = shape;
  const auto n = static_cast<size_t>(shape.elements());
  if (dtype == DType::kS32) {
    t.i = take(current->i, n);
    fill(t.i, n, init);
  } else {
    t.f = take(current->f, n);
    fill(t.f, n, init);
  }
  return t;
}

void recycle(HostTensor& t) {
  if (current != nullptr) {
    give(current->f, t.f);
    give(current->i, t.i);
  }
  t = HostTensor{};
}

}  // namespace tpusim::runtime::cpu
