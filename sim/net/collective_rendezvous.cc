#include "sim/net/collective_rendezvous.h"

#include <algorithm>

#include "common/strings.h"
#include "sim/isa/ops.h"
#include "sim/net/ring_plan.h"

namespace tpusim::sim {
namespace {

const char* op_name_of(const isa::Collective& c) { return collective_kind_name(c.kind()); }

// The cores' numbers, for messages.
std::vector<uint32_t> numbers(std::vector<CoreId>::const_iterator begin,
                              std::vector<CoreId>::const_iterator end) {
  std::vector<uint32_t> out;
  for (auto it = begin; it != end; ++it) out.push_back(index(*it));
  return out;
}

}  // namespace

std::string core_list(const std::vector<CoreId>& cores) {
  if (cores.size() <= 8) return str_join(numbers(cores.begin(), cores.end()), ", ");
  return str_cat(str_join(numbers(cores.begin(), cores.begin() + 8), ", "), " and ",
                 cores.size() - 8, " more");
}

CollectiveRendezvous::CollectiveRendezvous(const Topology& topology, uint32_t cores)
    : topology_(topology), issued_(cores, 0), latest_(cores, kNone) {}

void CollectiveRendezvous::begin_run() {
  std::fill(issued_.begin(), issued_.end(), 0);
  std::fill(latest_.begin(), latest_.end(), kNone);
  groups_.clear();
  open_.clear();
}

const CollectiveGroup* CollectiveRendezvous::arrive(CoreId core, const isa::Collective& c,
                                                    int instruction, bool functional,
                                                    std::string* error) {
  const std::vector<CoreId> cores = collective_members(c, topology_);
  const auto key = std::make_pair(issued_[index(core)]++, cores);
  auto it = open_.find(key);
  if (it == open_.end()) {
    CollectiveGroup g;
    g.c = c;
    g.cores = cores;
    g.number = key.first;
    g.first_issue = str_cat("core ", index(core), " instruction ", instruction);
    groups_.push_back(std::move(g));
    it = open_.emplace(key, groups_.size() - 1).first;
  }
  const size_t id = it->second;
  CollectiveGroup& g = groups_[id];
  const isa::Collective& first = g.c;
  if (c.kind() != first.kind() || c.algorithm() != first.algorithm() ||
      c.elements() != first.elements() || c.chunk_bytes() != first.chunk_bytes()) {
    *error = str_cat("core ", index(core), " instruction ", instruction, " (", op_name_of(c), ", ",
                     c.elements(), " elements, ", collective_algorithm_name(c.algorithm()),
                     ") does not match its group's collective #", g.number, " as ", g.first_issue,
                     " issued it (", op_name_of(first), ", ", first.elements(), " elements, ",
                     collective_algorithm_name(first.algorithm()), ")");
    return nullptr;
  }
  latest_[index(core)] = id;
  g.arrived.push_back(core);
  const auto pos =
      static_cast<size_t>(std::find(g.cores.begin(), g.cores.end(), core) - g.cores.begin());
  g.peers.resize(g.cores.size());
  g.src.resize(g.cores.size());
  g.dst.resize(g.cores.size());
  g.peers[pos] = CoreId{c.peer()};
  g.src[pos] = MemberBuffer::of(c, MemberBuffer::Side::kSrc);
  g.dst[pos] = MemberBuffer::of(c, MemberBuffer::Side::kDst);
  g.functional = g.functional && functional;
  if (!g.complete()) return nullptr;
  open_.erase(it);
  return &g;
}

std::string CollectiveRendezvous::waiting_for(CoreId core) const {
  const size_t latest = latest_[index(core)];
  if (latest == kNone) return "";
  const CollectiveGroup& g = groups_[latest];
  if (g.complete()) return "";  // started
  std::vector<CoreId> arrived = g.arrived;
  std::sort(arrived.begin(), arrived.end());
  std::vector<CoreId> missing;
  for (CoreId m : g.cores) {
    if (!std::binary_search(arrived.begin(), arrived.end(), m)) missing.push_back(m);
  }
  return str_cat("waits for core(s) ", core_list(missing), " to issue collective #", g.number, " (",
                 op_name_of(g.c), " over ", g.cores.size(), " cores)");
}

std::string duplicate_peers(const CollectiveGroup& g) {
  if (g.c.kind() != isa::Collective::PERMUTE) return "";
  std::vector<CoreId> sorted = g.peers;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()) return "";
  return str_cat("collective #", g.number, " (permute over cores ", core_list(g.cores),
                 ", first issued by ", g.first_issue, "): peers ",
                 str_join(numbers(g.peers.begin(), g.peers.end()), ", "),
                 " send two members' data to one core");
}

}  // namespace tpusim::sim
