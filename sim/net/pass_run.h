#pragma once
// The chunk schedule's bookkeeping of one ring pass in flight (chunk_schedule.h): who sends to
// whom, how its segments split into chunks and where each chunk lies in a member's buffer, and
// the one kind of event the schedule takes in time order, a chunk at a member. Plain C++.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/net/ring_plan.h"

namespace tpusim::sim {

// A chunk at a member of a pass run: to send on (step < steps), or landed at the end of its
// chain (step == steps). Times are fractional core cycles.
struct ChunkEvent {
  double time = 0;
  uint64_t order = 0;   // ties: in the order made, so runs are reproducible
  uint32_t run = 0;     // PassRun index
  uint32_t member = 0;  // ring index of the member that has the chunk
  uint32_t step = 0;    // steps == the pass's steps: the chunk has landed
  uint32_t segment = 0;
  uint32_t chunk = 0;
  bool add_waiting = false;  // landed, to be added to the member's part once that is final
  bool operator>(const ChunkEvent& o) const {
    return time != o.time ? time > o.time : order > o.order;
  }
};

// One ring pass of a started collective (or a PERMUTE's one step), with each member's progress
// through it. Indices named "member" are ring indices into `cores`.
struct PassRun {
  size_t instance = 0;
  const RingPass* pass = nullptr;  // null for a PERMUTE
  std::vector<CoreId> cores;       // ring order (PERMUTE: the members)
  std::vector<uint32_t> next;      // ring index each member sends to
  std::vector<uint32_t> slot;      // ring index -> the member's index in the collective's cores
  uint32_t steps = 0;
  uint32_t rs_steps = 0;  // the steps that reduce (a chunk received then is added)
  uint32_t phase = 0;
  bool gather_only = false;   // an ALL_GATHER: a member's src is its own segment alone
  bool keeps_finals = false;  // a later phase waits for what this pass makes final
  uint64_t chunk_size = 0;    // bytes
  uint64_t elements = 0;      // f32 elements of the collective (a PERMUTE's one segment)
  // Per ring index: the earlier phase whose results are the member's own data here (-1: none,
  // the member's src).
  std::vector<int> after;
  std::vector<uint64_t> due;    // per ring index: chunks still to land in the final step
  std::vector<double> landed;   // per ring index: when the last of them landed
  std::vector<double> written;  // per ring index: when its last HBM write of the pass ends
  // Per ring index: the route to the member it sends to, looked up at its first chunk.
  std::vector<const std::vector<uint32_t>*> routes;

  uint64_t segment_elements(uint32_t segment) const {
    return pass == nullptr ? elements : pass->segment_size(segment);
  }
  uint64_t chunks(uint32_t segment) const {
    const uint64_t bytes = segment_elements(segment) * 4;
    return (bytes + chunk_size - 1) / chunk_size;
  }
  // Bytes of chunk `chunk` of the segment (the last one may be short).
  double chunk_bytes(uint32_t segment, uint32_t chunk) const {
    const uint64_t bytes = segment_elements(segment) * 4;
    return static_cast<double>(std::min(chunk_size, bytes - uint64_t{chunk} * chunk_size));
  }
  // Where the chunk starts in a member's buffer, in bytes.
  uint64_t chunk_offset(uint32_t segment, uint32_t chunk) const {
    const uint64_t region = pass != nullptr ? (pass->offset + pass->segment_begin(segment)) * 4 : 0;
    return region + uint64_t{chunk} * chunk_size;
  }
  // The segment the member sends first.
  uint32_t first_segment(uint32_t member) const {
    return pass != nullptr ? pass->segment_sent(member, 0) : 0;
  }
};

}  // namespace tpusim::sim
