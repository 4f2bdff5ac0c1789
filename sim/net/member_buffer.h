#pragma once
// A member's src or dst as a collective sees it: the bytes of one buffer, from offset 0, laid over
// one or more ranges of its chip's HBM. A plain collective's buffer is one range at its src or dst;
// a combined all-reduce's (Collective.parts) is its parts' buffers end to end, so the collective
// moves and sums it as one buffer and only its HBM accesses split at the parts' edges.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "sim/isa/isa.pb.h"

namespace tpusim::sim {

class MemberBuffer {
 public:
  MemberBuffer() = default;

  enum class Side { kSrc, kDst };

  // The member's src or dst of `c`.
  static MemberBuffer of(const isa::Collective& c, Side side) {
    const bool dst = side == Side::kDst;
    MemberBuffer b;
    if (c.parts().empty()) {
      const uint64_t address = dst ? c.dst() : c.src();
      // One range: the validator has checked the collective's extent against HBM.
      b.pieces_.push_back({0, address, std::numeric_limits<uint64_t>::max() - address});
      return b;
    }
    uint64_t offset = 0;
    for (const isa::CollectivePart& p : c.parts()) {
      const uint64_t bytes = p.elements() * 4;
      b.pieces_.push_back({offset, dst ? p.dst() : p.src(), bytes});
      offset += bytes;
    }
    return b;
  }

  // Calls `f(address, bytes)` for each HBM range of buffer bytes [offset, offset + bytes), in
  // order. Bytes past the buffer's end (which the validator rules out) are left out.
  template <typename F>
  void for_each(uint64_t offset, uint64_t bytes, F&& f) const {
    auto it = std::upper_bound(pieces_.begin(), pieces_.end(), offset,
                               [](uint64_t at, const Piece& p) { return at < p.offset; });
    if (it != pieces_.begin()) --it;
    const uint64_t end = offset + bytes;
    for (; it != pieces_.end() && offset < end; ++it) {
      if (it->offset + it->bytes <= offset) continue;
      const uint64_t n = std::min(end, it->offset + it->bytes) - offset;
      f(it->address + (offset - it->offset), n);
      offset += n;
    }
  }

 private:
  struct Piece {
    uint64_t offset = 0;   // in the buffer
    uint64_t address = 0;  // in HBM
    uint64_t bytes = 0;
  };
  std::vector<Piece> pieces_;  // by offset, end to end
};

}  // namespace tpusim::sim
