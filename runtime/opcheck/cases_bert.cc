// BERT's ops and layers (google-research/bert, modeling.py): the embedding lookup (gather) and
// its gradient (scatter_add), gelu, embedding and layer normalisation with gamma and beta, in
// f32 and in bf16. Gather copies rows and scatter_add sums them in index order in f32, on every
// backend: those cases are exact (0 ulp from the reference).
#include "runtime/graph/layers.h"
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
  cases.push_back(exact({"embedding",
                         "[2, 7] ids, vocab 16, dim 8",
                         {{"ids", DType::kS32, {2, 7}, 0, 16}},
                         [](GraphBuilder& b, const std::vector<Value>& in) {
                           return layers::embedding(b, in[0], 16, 8, 5, "word_embeddings");
                         }}));
  return cases;
}

std::vector<OpCase> layer_cases() {
  std::vector<OpCase> cases;
  cases.push_back(
      {"gelu",
       "[6, 33]",
       {{"x", DType::kF32, {6, 33}, -4, 4}},
       [](GraphBuilder&, const std::vector<Value>& in) { return layers::gelu(in[0]); }});
  cases.push_back({"layer_norm",
                   "[2, 5, 16] gamma, beta",
                   {{"x", DType::kF32, {2, 5, 16}, -2, 2}},
                   [](GraphBuilder& b, const std::vector<Value>& in) {
                     return layers::layer_normalization(b, in[0]);
                   },
                   true,
                   16});
  return cases;
}

// In bf16, as a mixed_bfloat16 model computes: the table an f32 variable read as bf16, gelu's
// every op rounded to bf16, layer normalisation in f32 with f32 gamma and beta.
std::vector<OpCase> bf16_layer_cases() {
  std::vector<OpCase> cases;
  OpCase lookup = exact({"embedding bf16",
                         "[2, 7] ids, vocab 16, dim 8",
                         {{"ids", DType::kS32, {2, 7}, 0, 16}},
                         [](GraphBuilder& b, const std::vector<Value>& in) {
                           GraphBuilder::BFloat16Scope scope(b);
                           return layers::embedding(b, in[0], 16, 8, 5, "word_embeddings");
                         }});
  lookup.bf16 = true;
  cases.push_back(lookup);
  OpCase gelu{"gelu bf16",
              "[6, 33]",
              {{"x", DType::kF32, {6, 33}, -4, 4}},
              [](GraphBuilder& b, const std::vector<Value>& in) {
                return layers::gelu(b.cast(in[0], DType::kBF16));
              }};
  gelu.bf16 = true;
  cases.push_back(gelu);
  OpCase norm{"layer_norm bf16",
              "[2, 5, 16] gamma, beta (in f32)",
              {{"x", DType::kF32, {2, 5, 16}, -2, 2}},
              [](GraphBuilder& b, const std::vector<Value>& in) {
                return layers::layer_normalization(b, b.cast(in[0], DType::kBF16));
              },
              true,
              16};
  norm.bf16 = true;
  norm.f32_variables = true;
  cases.push_back(norm);
  return cases;
}

}  // namespace

std::vector<OpCase> bert_cases() {
  std::vector<OpCase> cases;
  for (auto family : {lookup_cases, layer_cases, bf16_layer_cases}) {
    for (OpCase& c : family()) cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace tpusim::runtime::opcheck
