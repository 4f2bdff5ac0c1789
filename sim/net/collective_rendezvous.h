#pragma once
// Where the members of a collective meet (plain C++, no simulated time). Each core numbers the
// collectives it issues in a run; the k-th collective a core issues over a group of cores is the
// same collective as the k-th its peers issue over the same group. The rendezvous gathers what
// every member issued (its buffers, its PERMUTE peer) and says when the collective may start:
// once the last member has issued it. Until then it says who the waiting members wait for.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/isa/isa.pb.h"
#include "sim/net/member_buffer.h"
#include "sim/net/topology.h"

namespace tpusim::sim {

// One collective as its members issued it.
struct CollectiveGroup {
  isa::Collective c;                   // as its first member issued it
  std::vector<CoreId> cores;           // members in ring order
  std::vector<CoreId> peers;           // PERMUTE: per member (index as in `cores`)
  std::vector<MemberBuffer> src, dst;  // per member: its own buffers in its HBM
  std::vector<CoreId> arrived;         // the members that have issued it, in that order
  uint64_t number = 0;                 // the members' count of collectives before this one
  bool functional = true;              // every member computes values (not timing only)
  std::string first_issue;             // "core C instruction I", for messages

  bool complete() const { return arrived.size() == cores.size(); }
};

class CollectiveRendezvous {
 public:
  CollectiveRendezvous(const Topology& topology, uint32_t cores);

  // Every core's count of collectives back to 0, every group forgotten: a new run.
  void begin_run();

  // Core `core` issues `c`, instruction `index` of its stream. Returns the group once every
  // member has issued it (it may start now), null while some have not. When `c` does not match
  // what the group's first member issued, sets `*error` and returns null. The group stays valid
  // until begin_run.
  const CollectiveGroup* arrive(CoreId core, const isa::Collective& c, int index, bool functional,
                                std::string* error);

  // What the core waits for while the rest of its group has not issued its collective ("" once
  // it started), for deadlock messages: formatted only when asked, since a pod's collective has
  // thousands of members arriving one by one.
  std::string waiting_for(CoreId core) const;

 private:
  static constexpr size_t kNone = ~size_t{0};

  const Topology& topology_;
  std::vector<uint64_t> issued_;        // per core: collectives issued this run
  std::vector<size_t> latest_;          // per core: its latest group in groups_ (kNone: none)
  std::deque<CollectiveGroup> groups_;  // a deque: started groups are referenced
  std::map<std::pair<uint64_t, std::vector<CoreId>>, size_t> open_;  // not yet complete
};

// A PERMUTE whose peers send two members' data to one core: the message that stops the run
// ("" for any other group).
std::string duplicate_peers(const CollectiveGroup& group);

// Up to 8 cores, then how many more ("0, 1, 2 and 5 more").
std::string core_list(const std::vector<CoreId>& cores);

}  // namespace tpusim::sim
