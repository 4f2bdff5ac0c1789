#pragma once
// Runs one collective on a System for the collective tests: every member's src filled with
// values of its own (unless timing only), its dst read back.

#include <algorithm>
#include <cstdint>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "sim/isa/builder.h"
#include "sim/numerics/random.h"
#include "sim/system.h"

namespace tpusim::sim::testing {

inline constexpr uint64_t kSrc = 0x1000;
inline constexpr uint64_t kDst = 0x100000;

// The chip whose HBM holds core `core`'s buffers.
inline ChipId chip_of(const System& s, uint32_t core) { return s.core_map().chip_of(CoreId{core}); }

// Where core `core`'s buffers live in its chip's HBM: each core of a chip has its own half.
inline uint64_t base_of(const System& s, uint32_t core) {
  return hbm_share(s.slice(), CoreId{core}).base;
}

inline std::vector<float> values_of(uint32_t core, uint64_t n) {
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = counter_uniform(3, core, i) * 2 - 1;
  return v;
}

// The host's sum of segment s of k over a ring, in the ring's order from member s+1 to s.
inline std::vector<float> ring_sum(const std::vector<uint32_t>& ring, uint64_t n, uint64_t begin,
                                   uint64_t size, uint32_t s) {
  const size_t k = ring.size();
  std::vector<float> acc(size);
  for (size_t r = 1; r <= k; ++r) {
    const std::vector<float> v = values_of(ring[(s + r) % k], n);
    for (uint64_t i = 0; i < size; ++i) acc[i] = r == 1 ? v[begin + i] : acc[i] + v[begin + i];
  }
  return acc;
}

// An all-reduce over a ring, by the host: every segment summed in ring order.
inline std::vector<float> ring_all_reduce(const std::vector<uint32_t>& ring, uint64_t n,
                                          uint64_t offset = 0, uint64_t count = 0) {
  if (count == 0) count = n;
  const uint64_t k = ring.size();
  std::vector<float> out(count);
  for (uint32_t s = 0; s < k; ++s) {
    const uint64_t begin = s * (count / k) + std::min<uint64_t>(s, count % k);
    const uint64_t size = count / k + (s < count % k ? 1 : 0);
    const auto seg = ring_sum(ring, n, offset + begin, size, s);
    std::copy(seg.begin(), seg.end(), out.begin() + static_cast<long>(begin));
  }
  return out;
}

struct Result {
  RunResult run;
  std::map<uint32_t, std::vector<float>> dst;
};

// Runs one collective of `n` elements on `group` (empty: every core) as part of `p` (whose
// streams, if any, are for other cores); returns each member's dst.
inline Result run_collective(System& s, isa::Collective::Kind kind,
                             isa::Collective::Algorithm algorithm, uint64_t n,
                             std::vector<uint32_t> group, uint64_t chunk = 0,
                             std::map<uint32_t, uint32_t> peers = {}, isa::Program p = {}) {
  using C = isa::Collective;
  std::vector<uint32_t> members = group;
  if (members.empty()) {
    for (uint32_t c = 0; c < s.slice().cores; ++c) members.push_back(c);
  }
  const bool values = !s.options().timing_only;
  for (uint32_t core : members) {
    if (values) {
      const std::vector<float> v = values_of(core, n);
      EXPECT_TRUE(s.write_hbm(chip_of(s, core), base_of(s, core) + kSrc, v.data(), n * 4).ok());
    }
    CoreBuilder b(&p, core);
    isa::Collective* c =
        b.collective(kind, algorithm, base_of(s, core) + kSrc, base_of(s, core) + kDst, n)
            .instruction()
            .mutable_collective();
    for (uint32_t g : group) c->add_group(g);
    c->set_chunk_bytes(chunk);
    if (kind == C::PERMUTE) c->set_peer(peers.at(core));
    b.halt();
  }
  auto run = s.run(p);
  EXPECT_TRUE(run.ok()) << run.status();
  Result r{run.ok() ? *run : RunResult{}, {}};
  const uint64_t k = members.size();
  const uint64_t out = kind == C::REDUCE_SCATTER ? n / k : kind == C::ALL_GATHER ? n * k : n;
  for (uint32_t core : members) {
    if (!values) break;
    std::vector<float> d(out);
    EXPECT_TRUE(s.read_hbm(chip_of(s, core), base_of(s, core) + kDst, d.data(), out * 4).ok());
    r.dst[core] = std::move(d);
  }
  return r;
}

}  // namespace tpusim::sim::testing
