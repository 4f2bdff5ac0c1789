#include "sim/net/collective_numerics.h"

#include <unordered_map>

#include <Eigen/Core>

namespace tpusim::sim {
namespace {

using Segment = Eigen::Map<Eigen::VectorXf>;

Segment segment(std::vector<float>& buffer, uint64_t begin, uint64_t size) {
  return Segment(buffer.data() + begin, static_cast<Eigen::Index>(size));
}

// One ring pass over the members' working buffers.
void run_pass(const RingPass& pass, std::vector<std::vector<float>*>& work) {
  const uint32_t k = pass.size();
  if (k < 2) return;
  for (uint32_t s = 0; s < k; ++s) {
    const uint64_t begin = pass.offset + pass.segment_begin(s);
    const uint64_t size = pass.segment_size(s);
    if (size == 0) continue;
    if (pass.reduce_scatter) {
      // Member s+1 starts the sum; each next member adds its own; member s adds last and keeps it.
      Eigen::VectorXf acc = segment(*work[(s + 1) % k], begin, size);
      for (uint32_t r = 2; r <= k; ++r) acc += segment(*work[(s + r) % k], begin, size);
      segment(*work[s], begin, size) = acc;
    }
    if (pass.all_gather) {
      for (uint32_t m = 0; m < k; ++m) {
        if (m != s) segment(*work[m], begin, size) = segment(*work[s], begin, size);
      }
    }
  }
}

}  // namespace

std::vector<std::vector<float>> collective_results(const isa::Collective& c,
                                                   const std::vector<CoreId>& members,
                                                   const CollectivePlan& plan,
                                                   const std::vector<std::vector<float>>& src,
                                                   const std::vector<CoreId>& peers) {
  const size_t k = members.size();
  const uint64_t n = c.elements();
  std::unordered_map<CoreId, size_t> position;  // core -> its index in members
  for (size_t i = 0; i < k; ++i) position[members[i]] = i;
  if (c.kind() == isa::Collective::PERMUTE) {
    std::vector<std::vector<float>> dst(k, std::vector<float>(n, 0.0f));
    for (size_t i = 0; i < k; ++i) dst[position.at(peers[i])] = src[i];
    return dst;
  }
  std::vector<std::vector<float>> work(k);
  for (size_t i = 0; i < k; ++i) {
    if (c.kind() == isa::Collective::ALL_GATHER) {
      work[i].assign(n * k, 0.0f);
      std::copy(src[i].begin(), src[i].end(), work[i].begin() + static_cast<long>(n * i));
    } else {
      work[i] = src[i];
    }
  }
  for (const auto& phase : plan) {
    for (const RingPass& pass : phase) {
      std::vector<std::vector<float>*> ring;
      for (CoreId core : pass.members) ring.push_back(&work[position.at(core)]);
      run_pass(pass, ring);
    }
  }
  if (c.kind() == isa::Collective::REDUCE_SCATTER) {
    const RingPass& pass = plan.front().front();
    for (size_t i = 0; i < k; ++i) {
      const auto s = static_cast<uint32_t>(i);
      const auto begin = static_cast<long>(pass.segment_begin(s));
      work[i] =
          std::vector<float>(work[i].begin() + begin,
                             work[i].begin() + begin + static_cast<long>(pass.segment_size(s)));
    }
  }
  return work;
}

}  // namespace tpusim::sim
