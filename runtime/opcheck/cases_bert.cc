// BERT's ops (google-research/bert, modeling.py): the embedding lookup (gather) and its gradient
// (scatter_add). Gather copies rows and scatter_add sums them in index order in f32, on every
// backend: those cases are exact (0 ulp from the reference).
#include "runtime/opcheck/cases.h"

namespace tpusim::runtime::opcheck {
namespace {

OpCase exact(OpCase c) {
  c.exact = true;
  return c;
}

// The row lookups. 15 indices into 10 rows repeat some row (so the gradient, a scatter_add,
// sums several cotangent rows into one); indices in [-3, 10) into 7 rows are clamped at both
// ends (graph.h, kGather).
std::vector<OpCase> lookup_cases() {
  std::vector<OpCase> cases;
  cases.push_back(exact(
      {"gather",
       "[10, 6] table, [3, 5] ids (repeated)",
       {{"table", DType::kF32, {10, 6}}, {"ids", DType::kS32, {3, 5}, 0, 10}},
       [](GraphBuilder& b, const std::vector<Value>& in) { return b.gather(in[0], in[1]); }}));
  cases.push_back(exact(
      {"gather",
       "[7, 130] table, [4, 9] ids in [-3, 10) (clamped)",
       {{"table", DType::kF32, {7, 130}}, {"ids", DType::kS32, {4, 9}, -3, 10}},
       [](GraphBuilder& b, const std::vector<Value>& in) { return b.gather(in[0], in[1]); }}));
  // Forward a scatter_add (12 updates into 6 rows: repeats), backward its adjoint, a gather.
  cases.push_back(exact({"scatter_add",
                         "[4, 3, 5] updates, [4, 3] ids, 6 rows",
                         {{"updates", DType::kF32, {4, 3, 5}}, {"ids", DType::kS32, {4, 3}, 0, 6}},
                         [](GraphBuilder& b, const std::vector<Value>& in) {
                           return b.scatter_add(in[0], in[1], 6);
                         }}));
  return cases;
}

}  // namespace

std::vector<OpCase> bert_cases() {
  std::vector<OpCase> cases;
  for (auto family : {lookup_cases}) {
    for (OpCase& c : family()) cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace tpusim::runtime::opcheck
