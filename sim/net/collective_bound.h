#pragma once
// The bandwidth-optimal time of an all-reduce of n bytes with each algorithm on a topology
// (docs/references.md, "Collective lower bounds"): for a ring of p members whose slowest edge has
// one-way bandwidth B and whose edges take a on average (each edge's route latencies added; a ring
// through a chip's two cores mixes the on-chip link with ICI hops, and a chunk crosses 2(p-1)
// consecutive edges),
//   ring        T = 2(p-1) a + 2(p-1)/p * n/B
//   bidir_ring  T = 2(p-1) a +  (p-1)/p * n/B    (half the data each way round)
//   torus2d     T = 2(px-1) ax + 2(py-1) ay + 2(px-1)/px * n/Bx + 2(py-1)/py * (n/px)/By
// over the core grid's rows (X) and columns (Y), and
//   torus       T = sum_d 2(p_d-1) a_d + max_d c_d sum_r 2(p_d-1)/p_d * n/2D / P(r, d) / B_d
// over its D dimensions d of more than one core (X with the chips' cores, Y, Z): each way round,
// D parts of n/2D go through the dimensions in the orders r, r+1, ..., and P(r, d) is the
// product of the sizes of the dimensions before d in order r (what they divided the part by);
// along Y and Z, c = cores per chip lines share each link, so their term is c times as big.
// The bandwidth terms are a floor no schedule can beat; a pipelined schedule may hide part of
// the latency terms.

#include <cstdint>

#include "sim/isa/isa.pb.h"
#include "sim/net/ring_plan.h"
#include "sim/net/topology.h"

namespace tpusim::sim {

struct CollectiveBound {
  double seconds = 0;
  double latency_seconds = 0;
  double bandwidth_seconds = 0;  // the floor: what the links can carry at best
  uint32_t members = 0;
};

CollectiveBound all_reduce_bound(const Topology& topology, isa::Collective::Algorithm algorithm,
                                 double bytes);

// The hard floor of a collective: the time its busiest link needs for the bytes the plan puts on
// it (every step of every pass, along each edge's route), whatever the schedule. The formulas
// above charge every edge the slowest link's bandwidth and run the 2D torus's phases one after
// another; with a chip's faster on-chip link in a ring, members move through the phases at
// different paces and the phases overlap, so a schedule can beat a formula but never this.
double link_floor_seconds(const Topology& topology, const CollectivePlan& plan,
                          uint64_t element_bytes = 4);

}  // namespace tpusim::sim
