// The rules of a collective instruction (collective_checks.h).
#include "sim/isa/collective_checks.h"

#include <algorithm>
#include <vector>

#include "common/strings.h"
#include "sim/core_map.h"
#include "sim/isa/ops.h"

namespace tpusim::sim {
namespace {

// A dense f32 buffer of `elements` in HBM.
void check_hbm_buffer(const CollectiveCheck& at, const char* what, uint64_t address,
                      uint64_t elements) {
  if (address % 4 != 0) at.fail(str_cat(what, " address ", address, " is not 4-byte aligned"));
  const uint64_t capacity = hbm_address_space(at.slice);
  if (elements > capacity / 4 || address + elements * 4 > capacity) {
    at.fail(str_cat(what, " [", address, ", ", address + elements * 4, ") overflows HBM of ",
                    capacity, " bytes"));
  }
}

// A part's dst may be its own src (in place) but may not overlap another part's src or dst:
// the ring writes a part's sums while it still reads the other parts.
void check_parts_apart(const CollectiveCheck& at, const isa::Collective& c) {
  struct Range {
    uint64_t begin, end;
    int part;
    bool dst;
  };
  std::vector<Range> ranges;
  for (int i = 0; i < c.parts_size(); ++i) {
    const isa::CollectivePart& p = c.parts(i);
    const uint64_t bytes = p.elements() * 4;
    ranges.push_back({p.src(), p.src() + bytes, i, false});
    ranges.push_back({p.dst(), p.dst() + bytes, i, true});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t a = 0; a < ranges.size(); ++a) {
    for (size_t b = a + 1; b < ranges.size() && ranges[b].begin < ranges[a].end; ++b) {
      const Range& x = ranges[a];
      const Range& y = ranges[b];
      if (x.part == y.part || (!x.dst && !y.dst)) continue;  // in place, or two reads
      const Range& dst = x.dst ? x : y;
      const Range& other = x.dst ? y : x;
      at.fail(str_cat("part ", dst.part, " dst [", dst.begin, ", ", dst.end, ") overlaps part ",
                      other.part, (other.dst ? " dst [" : " src ["), other.begin, ", ", other.end,
                      ")"));
      return;
    }
  }
}

// A combined all-reduce: its parts are its buffers, end to end.
void check_parts(const CollectiveCheck& at, const isa::Collective& c) {
  if (c.kind() != isa::Collective::ALL_REDUCE) {
    at.fail(
        str_cat(collective_kind_name(c.kind()), " has parts: only an all_reduce combines buffers"));
    return;
  }
  if (c.src() != 0 || c.dst() != 0)
    at.fail("has parts and a src or dst: a combined all_reduce's buffers are its parts");
  uint64_t total = 0;
  for (int i = 0; i < c.parts_size(); ++i) {
    const isa::CollectivePart& p = c.parts(i);
    if (p.elements() == 0) at.fail(str_cat("part ", i, " moves 0 elements"));
    check_hbm_buffer(at, str_cat("part ", i, " src").c_str(), p.src(), p.elements());
    check_hbm_buffer(at, str_cat("part ", i, " dst").c_str(), p.dst(), p.elements());
    total += p.elements();
  }
  if (total != c.elements()) {
    at.fail(str_cat("elements ", c.elements(), " is not the sum of its parts' (", total, ")"));
  }
  check_parts_apart(at, c);
}

}  // namespace

void check_collective(const CollectiveCheck& at, const isa::Collective& c) {
  using C = isa::Collective;
  if (c.kind() == C::KIND_UNSPECIFIED || !C::Kind_IsValid(c.kind())) {
    at.fail("has no kind (all_reduce, reduce_scatter, all_gather or permute)");
    return;
  }
  if (!C::Algorithm_IsValid(c.algorithm())) {
    at.fail(str_cat("has unknown algorithm ", static_cast<int>(c.algorithm())));
    return;
  }
  const bool ring_only = c.kind() == C::REDUCE_SCATTER || c.kind() == C::ALL_GATHER;
  if ((ring_only && c.algorithm() != C::RING && c.algorithm() != C::ALGORITHM_UNSPECIFIED) ||
      (c.kind() == C::PERMUTE && c.algorithm() != C::ALGORITHM_UNSPECIFIED)) {
    at.fail(str_cat("algorithm ", collective_algorithm_name(c.algorithm()), " does not apply to ",
                    collective_kind_name(c.kind()),
                    ring_only ? " (ring only)" : " (it sends directly)"));
  }
  if (c.elements() == 0) at.fail("moves 0 elements");
  if (c.chunk_bytes() % 4 != 0)
    at.fail(str_cat("chunk_bytes ", c.chunk_bytes(), " is not a whole number of f32"));
  // The members: the group, or every core of the slice (without building that list: a pod's
  // program has thousands of streams, each with collectives over all of them).
  const bool whole_slice = c.group().empty();
  if (!whole_slice && (c.algorithm() == C::TORUS_2D || c.algorithm() == C::TORUS)) {
    at.fail(str_cat(collective_algorithm_name(c.algorithm()),
                    " runs over every core of the slice: leave the group empty"));
  }
  std::vector<bool> in_group(whole_slice ? 0 : at.slice.cores, false);
  for (uint32_t m : c.group()) {
    if (m >= at.slice.cores) {
      at.fail(str_cat("group member ", m, " is not a core of ", at.slice.name, " (0..",
                      at.slice.cores - 1, ")"));
      return;
    }
    if (in_group[m]) at.fail(str_cat("group names core ", m, " twice"));
    in_group[m] = true;
  }
  auto is_member = [&](uint32_t m) { return whole_slice ? m < at.slice.cores : in_group[m]; };
  // Every member needs a stream: the first without one (none lacks one when every core of
  // the slice has a stream, as in a pod's program).
  if (at.program_cores.size() < at.slice.cores) {
    for (uint32_t m = 0; m < at.slice.cores; ++m) {
      if (is_member(m) && at.program_cores.count(m) == 0) {
        at.fail(str_cat("group member core ", m,
                        " has no instruction stream in this program: the collective could "
                        "never start"));
        return;
      }
    }
  }
  if (!is_member(at.core))
    at.fail(str_cat("core ", at.core, " is not in its own collective's group"));
  const uint64_t k = whole_slice ? at.slice.cores : static_cast<uint64_t>(c.group_size());
  const uint64_t n = c.elements();
  if (ring_only && n % k != 0) {
    at.fail(str_cat(collective_kind_name(c.kind()), " of ", n,
                    " elements does not split evenly over ", k, " members"));
    return;
  }
  if (c.kind() == C::PERMUTE &&
      (c.peer() >= at.slice.cores || !is_member(c.peer()) || c.peer() == at.core)) {
    at.fail(str_cat("peer ", c.peer(), " must be another member of the group"));
  }
  if (!c.parts().empty()) {
    check_parts(at, c);
    return;
  }
  check_hbm_buffer(at, "src", c.src(), n);
  const uint64_t dst = c.kind() == C::REDUCE_SCATTER ? n / k
                       : c.kind() == C::ALL_GATHER   ? n * k
                                                     : n;
  check_hbm_buffer(at, "dst", c.dst(), dst);
}

}  // namespace tpusim::sim
