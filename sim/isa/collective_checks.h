#pragma once
// The rules a collective instruction keeps, checked by the program validator (validator.h) for
// each one: a known kind and an algorithm that applies to it; its group (cores of the slice,
// none twice, every member with an instruction stream, the issuing core among them; torus
// algorithms over the whole slice); sizes that split over the members; its HBM buffers, or a
// combined all-reduce's parts, inside HBM, 4-byte aligned, and no part's dst over another's.

#include <cstdint>
#include <functional>
#include <set>
#include <string>

#include "configs/slice_spec.h"
#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

struct CollectiveCheck {
  const config::SliceSpec& slice;
  const std::set<uint32_t>& program_cores;              // the cores the program has a stream for
  uint32_t core;                                        // the core issuing the collective
  std::function<void(const std::string& reason)> fail;  // called once per broken rule
};

void check_collective(const CollectiveCheck& at, const isa::Collective& c);

}  // namespace tpusim::sim
