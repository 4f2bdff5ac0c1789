#pragma once
// The values a collective leaves in each member's dst, computed the way its plan moves them
// (ring_plan.h): f32 additions in ring order, one segment at a time, so every member of an
// all-reduce ends with bitwise the same values and a host sum in the same order matches exactly.

#include <cstdint>
#include <vector>

#include "sim/isa/isa.pb.h"
#include "sim/net/ring_plan.h"

namespace tpusim::sim {

// `src[i]`: the src buffer (c.elements() floats) of members[i]; returns each member's dst.
// PERMUTE: `peers[i]` is members[i]'s peer; a member no one sends to gets zeros.
std::vector<std::vector<float>> collective_results(const isa::Collective& c,
                                                   const std::vector<CoreId>& members,
                                                   const CollectivePlan& plan,
                                                   const std::vector<std::vector<float>>& src,
                                                   const std::vector<CoreId>& peers = {});

}  // namespace tpusim::sim
