// The tpusim compiler without running: HBM planning, fusion, and the programs it emits.
#include <algorithm>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "runtime/backend/tpusim/hbm_plan.h"
#include "runtime/backend/tpusim/lowering.h"
#include "runtime/graph/layers.h"
#include "runtime/models/zoo.h"
#include "sim/isa/validator.h"
#include "sim/memory/block.h"
#include "tests/runtime/program_counts.h"

namespace tpusim::runtime::tpusim_backend {
namespace tpusim_compiler_test {

const config::SliceSpec& v3_8() {
  static const auto spec = *config::load_slice("v3-8");
  return *spec;
}

// x -> a -> b -> c (outputs c): a is dead after b, so c can take a's buffer; reshape aliases.
TEST(HbmPlan, ReusesBuffersAfterTheirLastUseAndAliasesReshapes) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {1024});
  const Value a = b.unary(Op::kExp, x);
  const Value r = b.reshape(a, {32, 32});
  const Value c1 = b.unary(Op::kTanh, r);
  const Value c2 = b.unary(Op::kNeg, c1);
  b.output("y", c2);
  const HbmPlan plan = plan_hbm(b.graph(), 0);
  EXPECT_EQ(plan.address[static_cast<size_t>(r.id)],
            plan.address[static_cast<size_t>(a.id)]);  // alias
  EXPECT_EQ(plan.owner[static_cast<size_t>(r.id)], a.id);
  // c2 is computed after a/r's last reader (c1): it reuses a's buffer (first fit).
  EXPECT_EQ(plan.address[static_cast<size_t>(c2.id)], plan.address[static_cast<size_t>(a.id)]);
  EXPECT_NE(plan.address[static_cast<size_t>(c1.id)], plan.address[static_cast<size_t>(a.id)]);
  // x is dead once a exists, so c1 takes its buffer: never more than two live at once.
  EXPECT_EQ(plan.address[static_cast<size_t>(c1.id)], plan.address[static_cast<size_t>(x.id)]);
  EXPECT_EQ(plan.peak_bytes, 2u * 4096);
}

// A fragment's scratch is allocated beside the buffers live while it runs and freed after it:
// it raises the device's peak only where it does not fit what is free then.
TEST(Compiler, ScratchCountsWhereItsFragmentRuns) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {2048});  // 8 KiB
  const Value s = b.reduce(Op::kReduceSum, x, {0});    // a scalar: one 4 KiB page
  const Value t = s * 2.0f;
  b.output("t", t);
  PlanRequest request;
  request.materialized.assign(static_cast<size_t>(b.graph().size()), true);
  for (const Node& n : b.graph().nodes()) request.reads.push_back(n.inputs);
  // The constant 2 (a page for the whole step), x (two pages), s beside it; t takes x's first
  // page once s has read it.
  const uint64_t bare = plan_hbm(b.graph(), 0, &request).device_peak_bytes;
  ASSERT_EQ(bare, 4u * 4096);
  // 4 KiB of scratch while t runs fits in x's second page.
  request.temporaries.assign(static_cast<size_t>(b.graph().size()), 0);
  request.temporaries[static_cast<size_t>(t.id)] = 4096;
  EXPECT_EQ(plan_hbm(b.graph(), 0, &request).device_peak_bytes, bare);
  // 8 KiB does not: it goes above everything, raising the peak by all of it.
  request.temporaries[static_cast<size_t>(t.id)] = 8192;
  EXPECT_EQ(plan_hbm(b.graph(), 0, &request).device_peak_bytes, bare + 8192);
}

TEST(Compiler, FusesElementwiseChainsAndEmitsValidPrograms) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {64, 100});
  const Value y =
      b.unary(Op::kTanh, b.unary(Op::kExp, x) * 0.5f + 1.0f);  // exp, mul, add, tanh: one fragment
  b.output("y", b.reduce(Op::kReduceSum, y, {1}));
  StepOptions unfused_reduction;
  unfused_reduction.fuse_reductions = false;
  auto chain = compile_graph(b.graph(), v3_8(), 0, unfused_reduction);
  ASSERT_TRUE(chain.ok()) << chain.status();
  EXPECT_EQ(chain->fused_nodes, 4u);
  EXPECT_EQ(chain->fused_reductions, 0u);
  EXPECT_TRUE(sim::validate_program(*chain->program, v3_8()).ok());
  // The fused chain writes HBM once: the intermediates have no buffers.
  // At the peak: the two scalar constants' buffers (4 KiB each), x and tanh's value (28 KiB each);
  // the sums then take x's place.
  EXPECT_EQ(chain->plan.peak_bytes, 2u * 4096 + 2 * 28672);
  // By default the reduction takes the chain into its own fragment: tanh's value is summed in
  // VMEM, tile by tile, and never has a buffer either.
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->fused_nodes, 4u);
  EXPECT_EQ(step->fused_reductions, 1u);
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  EXPECT_EQ(step->plan.peak_bytes, 2u * 4096 + 28672 + 4096);  // the constants, x, the sums

  // A row too wide for the fused reduction's blocks in one VMEM tile slot (9 of 720 KB against
  // 6 MiB, where the exp alone takes 8) keeps the reduction apart rather than failing.
  for (const int64_t cols : {100000, 180000}) {
    GraphBuilder wide;
    const Value v = wide.infeed("v", DType::kF32, {2, cols});
    wide.output("s", wide.reduce(Op::kReduceSum, wide.unary(Op::kExp, v), {1}));
    auto compiled = compile_graph(wide.graph(), v3_8(), 0);
    ASSERT_TRUE(compiled.ok()) << cols << ": " << compiled.status();
    EXPECT_EQ(compiled->fused_reductions, cols == 100000 ? 1u : 0u) << cols;
  }
}

// Under mixed_bfloat16 the DMAs of bf16 buffers (activations, their gradients) are charged as a
// TPU's packed bf16; those of f32 ones (the variables, the infeeds, the updates) are not, and a
// float32 step has none.
TEST(Compiler, ChargesTheTransfersOfBf16BuffersAsPackedBf16) {
  auto packed_dmas = [](models::DTypePolicy policy, int* of_variables) {
    GraphBuilder b;
    EXPECT_TRUE(models::build_training_step(b, "mnist_cnn", 8, 0.1f, 1, policy).ok());
    auto step = compile_graph(b.graph(), v3_8(), 0);
    EXPECT_TRUE(step.ok()) << step.status();
    std::vector<std::pair<uint64_t, uint64_t>> variables;
    for (int id : b.graph().variables()) {
      const uint64_t at = step->plan.address[static_cast<size_t>(id)];
      variables.emplace_back(at,
                             at + 4 * static_cast<uint64_t>(b.graph().node(id).shape.elements()));
    }
    int packed = 0;
    *of_variables = 0;
    for (const isa::Instruction& in : step->program->cores(0).instructions()) {
      if (!in.has_dma() || !in.dma().packed_bf16()) continue;
      ++packed;
      const isa::Block& hbm =
          in.dma().direction() == isa::Dma::HBM_TO_VMEM ? in.dma().src() : in.dma().dst();
      for (const auto& [lo, hi] : variables)
        *of_variables += hbm.address() < hi && lo < sim::end_address(hbm);
    }
    return packed;
  };
  int of_variables = 0;
  EXPECT_EQ(packed_dmas(models::DTypePolicy::kFloat32, &of_variables), 0);
  EXPECT_GT(packed_dmas(models::DTypePolicy::kMixedBFloat16, &of_variables), 50);
  EXPECT_EQ(of_variables, 0);
}

// A bf16 buffer read through a widening cast (which aliases it: the cast changes no bit) is
// charged as bf16 by its readers, as XLA's fused convert reads bf16 from HBM: every DMA that
// loads the buffer, here a reduction's, is packed.
TEST(Compiler, ReadsOfABf16BufferThroughAWideningCastArePacked) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {512, 128});
  const Value h = b.cast(x * 2.0f, DType::kBF16);
  b.output("sum", b.reduce(Op::kReduceSum, b.cast(h, DType::kF32), {0}));
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  const uint64_t lo = step->plan.address[static_cast<size_t>(h.id)];
  const uint64_t hi = lo + 4 * 512 * 128;
  int loads = 0, packed = 0;
  for (const isa::Instruction& in : step->program->cores(0).instructions()) {
    if (!in.has_dma() || in.dma().direction() != isa::Dma::HBM_TO_VMEM) continue;
    const isa::Block& src = in.dma().src();
    if (src.address() >= hi || sim::end_address(src) <= lo) continue;
    ++loads;
    packed += in.dma().packed_bf16();
  }
  EXPECT_GT(loads, 0);
  EXPECT_EQ(packed, loads);
}

// A reduction over the leading axes of an input much larger than a VMEM tile is one pipelined
// fragment, as XLA's reduce fusion: its row tiles reduce into an accumulator in VMEM, and the
// sum is written to HBM once, with no partial sums through HBM.
TEST(Compiler, LongLeadingAxisReductionsWriteTheirSumOnce) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {32768, 64});  // 8 MiB: several tiles
  const Value s = b.reduce(Op::kReduceSum, x, {0});
  b.output("sum", s);
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(step->node_temporaries[static_cast<size_t>(s.id)], 0u);
  const uint64_t at = step->plan.address[static_cast<size_t>(s.id)];
  int stores = 0, loads = 0;
  for (const isa::Instruction& in : step->program->cores(0).instructions()) {
    if (!in.has_dma()) continue;
    if (in.dma().direction() == isa::Dma::VMEM_TO_HBM) stores += in.dma().dst().address() == at;
    if (in.dma().direction() == isa::Dma::HBM_TO_VMEM) ++loads;
  }
  EXPECT_EQ(stores, 1);
  EXPECT_GT(loads, 2);  // the input, a tile at a time
}

// Every instruction of the step names the graph op it computes (the per-op profile groups by
// it): one origin per node, named by its label, repeats numbered, gradients under "gradients/".
TEST(Compiler, TagsEveryInstructionWithItsGraphOp) {
  GraphBuilder b;
  ASSERT_TRUE(models::build_training_step(b, "mlp", 16, 0.1f, 1).ok());
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  const isa::CoreProgram& core = step->program->cores(0);
  std::set<std::string> labels;
  std::set<std::string> kinds;
  for (const isa::Origin& o : core.origins()) {
    EXPECT_TRUE(labels.insert(o.label()).second) << "repeated origin " << o.label();
    kinds.insert(o.op());
  }
  for (const char* kind : {"infeed", "matmul", "outfeed"}) EXPECT_EQ(kinds.count(kind), 1u) << kind;
  EXPECT_EQ(kinds.count("assign"), 0u);  // the updates are written in place
  EXPECT_TRUE(std::any_of(labels.begin(), labels.end(), [](const std::string& l) {
    return l.rfind("gradients/", 0) == 0 && l.find("_grad/") != std::string::npos;
  }));
  std::vector<bool> used(static_cast<size_t>(core.origins_size()), false);
  for (int i = 0; i < core.instructions_size(); ++i) {
    const isa::Instruction& in = core.instructions(i);
    if (in.has_loop() || in.has_halt()) {
      EXPECT_EQ(in.origin(), 0u) << i;
      continue;
    }
    ASSERT_GT(in.origin(), 0u) << "instruction " << i << " has no origin";
    ASSERT_LE(in.origin(), static_cast<uint32_t>(core.origins_size()));
    used[in.origin() - 1] = true;
  }
  // An op that emits nothing (a reshape, a variable) has no origin.
  EXPECT_TRUE(std::all_of(used.begin(), used.end(), [](bool u) { return u; }));
}

// An update value computed elementwise after every other read of its variable is written into
// the variable's buffer, as XLA's buffer assignment gives an elementwise fusion's output the
// buffer of an operand that dies there and aliases a training loop's updated variables with its
// inputs: mlp's SGD updates all are, and the step copies nothing at its end. A variable read
// after its new value is computed (an output of the old value, made later) keeps the copy.
TEST(Compiler, UpdatesAreWrittenIntoTheirVariablesInPlace) {
  GraphBuilder b;
  ASSERT_TRUE(models::build_training_step(b, "mlp", 16, 0.1f, 1).ok());
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  ASSERT_FALSE(b.graph().updates().empty());
  for (const auto& u : b.graph().updates()) {
    EXPECT_EQ(step->plan.in_place[static_cast<size_t>(u.value)], u.variable);
    EXPECT_EQ(step->plan.address[static_cast<size_t>(u.value)],
              step->plan.address[static_cast<size_t>(u.variable)]);
  }
  EXPECT_EQ(instructions_of(step->program->cores(0), "assign"), 0);

  GraphBuilder late;
  const Value x = late.infeed("x", DType::kF32, {64, 32});
  const Value w = late.variable("w", DType::kF32, {64, 32}, Initializer{});
  const Value next = w * 0.5f + x;
  late.update(w, next);
  late.output("old_twice", w * 2.0f);  // made after `next`: reads w after it is computed
  auto kept = compile_graph(late.graph(), v3_8(), 0);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->plan.in_place[static_cast<size_t>(next.id)], -1);
  EXPECT_NE(kept->plan.address[static_cast<size_t>(next.id)],
            kept->plan.address[static_cast<size_t>(w.id)]);
  EXPECT_GT(instructions_of(kept->program->cores(0), "assign"), 0);
}

// A bf16 infeed crosses the host link as bf16: its entries are half the bytes of an f32
// infeed's, land in VMEM as bf16 and are widened there to the f32 its HBM buffer holds (one
// CAST per entry), so every later fragment reads it as any f32 buffer, the graph's Cast to f32
// included.
TEST(Compiler, ABf16InfeedLandsAsBf16AndIsWidenedInVmem) {
  auto compiled = [](DType dtype) {
    GraphBuilder b;
    const Value x = b.infeed("x", dtype, {256, 300});
    const Value wide = dtype == DType::kF32 ? x : b.cast(x, DType::kF32);
    b.output("y", b.reduce(Op::kReduceSum, wide, {1}));
    auto step = compile_graph(b.graph(), v3_8(), 0);
    EXPECT_TRUE(step.ok()) << step.status();
    return *std::move(step);
  };
  const CompiledStep f32 = compiled(DType::kF32);
  const CompiledStep bf16 = compiled(DType::kBF16);
  ASSERT_EQ(bf16.infeeds.size(), 1u);
  const Transfer& t = bf16.infeeds[0];
  EXPECT_EQ(t.link_bytes, 2u);
  EXPECT_EQ(f32.infeeds[0].link_bytes, 4u);
  EXPECT_EQ(t.rows_per_entry, f32.infeeds[0].rows_per_entry);
  EXPECT_EQ(t.entry_bytes(), t.rows_per_entry * 300 * 2);
  EXPECT_TRUE(sim::validate_program(*bf16.program, v3_8()).ok());
  // Each entry: a bf16 dequeue and a CAST into an f32 block of its shape, outside the f32
  // staging block it then copies to HBM; the f32 infeed has no CAST.
  auto infeed_instructions = [](const CompiledStep& step, isa::Vector::Op op) {
    std::vector<isa::Instruction> found;
    for (const isa::Instruction& in : step.program->cores(0).instructions()) {
      if (in.has_infeed() || (in.has_vector() && in.vector().op() == op)) found.push_back(in);
    }
    return found;
  };
  const uint64_t entries = (256 + t.rows_per_entry - 1) / t.rows_per_entry;
  const auto widened = infeed_instructions(bf16, isa::Vector::CAST);
  ASSERT_EQ(widened.size(), 2 * entries);
  // The CAST waits for its entry to land (the dequeue's signal, counted so far), and the store
  // to HBM for the CAST.
  auto waits_for = [](const isa::Instruction& waiter, const isa::Instruction& signaller,
                      uint64_t count) {
    for (const isa::Wait& w : waiter.wait()) {
      for (uint32_t flag : signaller.signal()) {
        if (w.flag() == flag && w.value() == count) return true;
      }
    }
    return false;
  };
  const auto& code = bf16.program->cores(0).instructions();
  for (int i = 0, e = 0; i < code.size(); ++i) {
    if (!code[i].has_infeed()) continue;
    ++e;
    ASSERT_LT(i + 2, code.size());
    EXPECT_TRUE(code[i + 1].has_vector() && waits_for(code[i + 1], code[i], e)) << "entry " << e;
    EXPECT_TRUE(code[i + 2].has_dma() && waits_for(code[i + 2], code[i + 1], e)) << "entry " << e;
  }
  for (size_t e = 0; e < entries; ++e) {
    const isa::Block& landed = widened[2 * e].infeed().dst();
    const isa::Vector& cast = widened[2 * e + 1].vector();
    EXPECT_EQ(landed.dtype(), isa::BF16);
    EXPECT_EQ(cast.a().address(), landed.address());
    EXPECT_EQ(cast.dst().dtype(), isa::F32);
    EXPECT_EQ(cast.dst().rows(), landed.rows());
    EXPECT_GE(landed.address(), uint64_t{cast.dst().rows()} * 300 * 4);  // no overlap
  }
  EXPECT_EQ(infeed_instructions(f32, isa::Vector::CAST).size(), entries);
  // The graph's Cast to f32 changes no bit of the widened buffer: it aliases it and emits
  // nothing, so the bf16 step is the f32 one plus a CAST per entry.
  EXPECT_EQ(bf16.program->cores(0).instructions_size(),
            f32.program->cores(0).instructions_size() + static_cast<int>(entries));
  for (const isa::Origin& o : bf16.program->cores(0).origins()) EXPECT_NE(o.op(), "cast");
}

TEST(Compiler, EveryZooModelCompiles) {
  for (const auto& m : models::model_infos()) {
    GraphBuilder b;
    ASSERT_TRUE(models::build_training_step(b, m.name, 16, 0.1f, 1).ok()) << m.name;
    auto step = compile_graph(b.graph(), v3_8(), 0);
    ASSERT_TRUE(step.ok()) << m.name << ": " << step.status();
    EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok())
        << m.name << ": " << sim::validate_program(*step->program, v3_8());
    // Images and labels, or BERT's seven pretraining features.
    EXPECT_EQ(step->infeeds.size(), m.input == models::ModelInfo::Input::kTokens ? 7u : 2u)
        << m.name;
    EXPECT_EQ(step->outputs.size(), 1u) << m.name;
  }
}

// The elements the program's vector transposes move.
uint64_t transposed_elements(const isa::Program& program) {
  uint64_t n = 0;
  for (const auto& instr : program.cores(0).instructions()) {
    if (instr.has_vector() && instr.vector().op() == isa::Vector::TRANSPOSE)
      n += uint64_t{instr.vector().a().rows()} * instr.vector().a().cols();
  }
  return n;
}

// A matmul reads an operand that is a transpose of its last two axes as the transpose's input
// lies, and the vector unit transposes each slice the MXUs take in VMEM (XLA's TransposeFolding):
// the transpose is never materialised. A^T W with W 16 wide is one column tile, so each element of
// A is transposed once; W B^T with B [64, 256] transposes each of B's elements once per row tile
// of the product.
TEST(Compiler, TransposedOperandsAreTransposedInVmemNotMaterialised) {
  GraphBuilder b;
  const Value a = b.infeed("a", DType::kF32, {2048, 512});
  const Value w = b.infeed("w", DType::kF32, {2048, 16});
  b.output("y", b.matmul(b.transpose(a, {1, 0}), w));
  EXPECT_EQ(matmul_operand_view(b.graph(), b.graph().size() - 1, 0).source, a.id);
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  EXPECT_EQ(transposed_elements(*step->program), 2048u * 512);
  EXPECT_EQ(step->instructions_per_op.count("transpose"), 0u);

  GraphBuilder rhs;
  const Value x = rhs.infeed("x", DType::kF32, {128, 256});
  const Value y = rhs.infeed("y", DType::kF32, {64, 256});
  rhs.output("z", rhs.matmul(x, rhs.transpose(y, {1, 0})));
  EXPECT_EQ(matmul_operand_view(rhs.graph(), rhs.graph().size() - 1, 1).source, y.id);
  auto folded = compile_graph(rhs.graph(), v3_8(), 0);
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_TRUE(sim::validate_program(*folded->program, v3_8()).ok());
  EXPECT_EQ(transposed_elements(*folded->program), 64u * 256);
  EXPECT_EQ(folded->instructions_per_op.count("transpose"), 0u);
}

// Attention's reshapes: splitting [128, 28, 64] into 4 heads is a [128, 28, 4, 16] -> [128, 4,
// 28, 16] transpose, one fragment: its 1.8 MiB in and out fit one VMEM tile, so one DMA in, one
// vector copy per (head, token) moving the 16 values of all 128 entries, one DMA out (before, a
// fragment of its own per entry and head: 1,024 DMAs, each waiting for the last). The scores'
// batched matmul is one fragment too: each of the 512 entries, too narrow to give both MXUs a
// column tile of its own, loads its weights into both and streams half its rows through each.
TEST(Compiler, AttentionsTransposesAndBatchedMatmulsAreOneFragmentEach) {
  GraphBuilder b;
  const Value x = b.infeed("x", DType::kF32, {128, 28, 4, 16});
  b.output("heads", b.transpose(x, {0, 2, 1, 3}));
  const Value q = b.infeed("q", DType::kF32, {512, 28, 16});
  const Value k = b.infeed("k", DType::kF32, {512, 16, 28});
  b.output("scores", b.matmul(q, k));
  const Value m = b.infeed("m", DType::kF32, {64, 28, 16});
  b.output("m_t", b.transpose(m, {0, 2, 1}));
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok());
  const isa::CoreProgram& core = step->program->cores(0);
  const UnitCounts transposes = units_of(core, "transpose");
  EXPECT_EQ(transposes.dma, 2 + 2);           // in and out, for each transpose
  EXPECT_EQ(transposes.vector, 4 * 28 + 64);  // copies for the heads, a transpose per matrix
  const UnitCounts matmul = units_of(core, "matmul");
  EXPECT_EQ(matmul.dma, 3);            // q and k in, the scores out
  EXPECT_EQ(matmul.mxu, 512 * 2 * 2);  // a load_weights and a matmul on each MXU
  EXPECT_EQ(matmul.vector, 0);
}

}  // namespace tpusim_compiler_test
}  // namespace tpusim::runtime::tpusim_backend

namespace tpusim::runtime::tpusim_backend {
namespace tpusim_compiler_test {

// BERT-Large's word embeddings: 4 x 512 ids into the 30,522 x 1,024 f32 table (125 MB, eight
// times VMEM), and the table's gradient. The gather is 2 tiles of indices (1,504 rows of 4 KiB
// fill a 6 MiB tile slot, then 544), each 3 instructions: load the tile's indices, one indexed
// DMA of its rows, store them: 6 in all. The gradient, a scatter_add, zeroes the 30,522 rows in
// 21 tiles of a fill and a store (42), loads its 2,048 update rows and indices in 3 tiles (6)
// and reads, adds and writes back one row at a time (3 x 2,048): 6,192. No DMA moves more than a
// tile's rows through VMEM.
TEST(Compiler, GathersBertLargesWordEmbeddingsByIndexedDmas) {
  GraphBuilder b;
  const Value ids = b.infeed("ids", DType::kS32, {4, 512});
  const Value table = b.variable("word_embeddings", DType::kF32, {30522, 1024},
                                 Initializer{InitKind::kTruncatedNormal, 0, 0.02f, 1});
  const Value rows = b.gather(table, ids);
  b.output("loss", b.reduce(Op::kReduceSum, rows, {0, 1, 2}));
  b.output("grad", b.scatter_add(rows, ids, 30522));
  ASSERT_TRUE(b.status().ok()) << b.status();
  auto step = compile_graph(b.graph(), v3_8(), 0);
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_TRUE(sim::validate_program(*step->program, v3_8()).ok())
      << sim::validate_program(*step->program, v3_8());
  const isa::CoreProgram& core = step->program->cores(0);
  EXPECT_EQ(instructions_of(core, "gather"), 6);
  EXPECT_EQ(units_of(core, "gather").dma, 6);
  EXPECT_EQ(instructions_of(core, "scatter_add"), 6192);
  EXPECT_EQ(units_of(core, "scatter_add").vector, 21 + 2048);  // fills, adds
  int indexed = 0;
  for (const isa::Instruction& in : core.instructions()) {
    if (!in.has_dma()) continue;
    const isa::Block& vmem =
        in.dma().direction() == isa::Dma::HBM_TO_VMEM ? in.dma().dst() : in.dma().src();
    EXPECT_LE(sim::end_address(vmem), v3_8().chip.core.vmem_bytes);
    EXPECT_LE(vmem.rows(), 1512u);
    indexed += in.dma().has_index();
  }
  EXPECT_EQ(indexed, 2 + 2 * 2048);
}

}  // namespace tpusim_compiler_test
}  // namespace tpusim::runtime::tpusim_backend
