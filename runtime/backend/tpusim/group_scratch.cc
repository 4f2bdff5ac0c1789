#include "runtime/backend/tpusim/group_scratch.h"

#include <algorithm>
#include <map>

namespace tpusim::runtime::tpusim_backend {
namespace {

// Free blocks, the lowest handed out first, and how many were ever used.
class BlockPool {
 public:
  int take() {
    if (free_.empty()) return static_cast<int>(used_++);
    const auto lowest = std::min_element(free_.begin(), free_.end());
    const int block = *lowest;
    free_.erase(lowest);
    return block;
  }
  void give_back(int block) {
    if (block != GroupScratch::kNone) free_.push_back(block);
  }
  uint32_t used() const { return used_; }

 private:
  std::vector<int> free_;
  uint32_t used_ = 0;
};

}  // namespace

GroupScratch plan_group_scratch(const Graph& graph, const std::vector<int>& members,
                                const std::vector<int>& kept,
                                const std::function<bool(int member, size_t input)>& needs_block,
                                bool last_to_output) {
  const size_t count = members.size();
  std::map<int, size_t> index;  // member -> its position
  for (size_t i = 0; i < count; ++i) index[members[i]] = i;
  // The position of the last member reading each member; count for kept ones (never freed).
  std::vector<size_t> last_read(count, 0);
  for (size_t i = 0; i < count; ++i) {
    for (int in : graph.node(members[i]).inputs) {
      if (const auto at = index.find(in); at != index.end())
        last_read[at->second] = std::max(last_read[at->second], i);
    }
  }
  for (int k : kept) {
    if (const auto at = index.find(k); at != index.end()) last_read[at->second] = count;
  }
  GroupScratch plan;
  plan.result.assign(count, GroupScratch::kNone);
  plan.operand.assign(count, {GroupScratch::kNone, GroupScratch::kNone, GroupScratch::kNone});
  plan.temporary.assign(count, GroupScratch::kNone);
  BlockPool pool;
  for (size_t i = 0; i < count; ++i) {
    const Node& n = graph.node(members[i]);
    const bool last = i + 1 == count;
    for (size_t k = 0; k < n.inputs.size() && k < 3; ++k) {
      if (index.count(n.inputs[k]) == 0 && needs_block(members[i], k))
        plan.operand[i][k] = pool.take();
    }
    if (n.op == Op::kSigmoid) plan.temporary[i] = pool.take();
    // The result's block is taken before the inputs' are given back, so it never aliases one.
    if (!(last && last_to_output && n.dtype != DType::kBF16)) plan.result[i] = pool.take();
    for (int block : plan.operand[i]) pool.give_back(block);
    pool.give_back(plan.temporary[i]);
    for (size_t j = 0; j < i; ++j) {
      if (last_read[j] == i) pool.give_back(plan.result[j]);
    }
    // A value nothing reads (the last member's, or one only the caller's output takes after a
    // rounding) is given back at the end of its own op unless kept.
    if (last_read[i] == 0 && !last) pool.give_back(plan.result[i]);
  }
  plan.blocks = pool.used();
  return plan;
}

}  // namespace tpusim::runtime::tpusim_backend
