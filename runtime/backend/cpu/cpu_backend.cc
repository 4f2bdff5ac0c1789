#include "runtime/backend/cpu/cpu_backend.h"

#include <mutex>
#include <optional>

#include "common/strings.h"
#include "runtime/backend/cpu/buffers.h"
#include "runtime/backend/cpu/gemm.h"
#include "runtime/backend/cpu/kernels.h"
#include "runtime/backend/cpu/plan.h"

namespace tpusim::runtime {
namespace {

class CpuExecutable final : public Executable {
 public:
  CpuExecutable(Graph graph, bool mxu, bool f32_reductions, uint32_t replicas)
      : graph_(std::move(graph)),
        mxu_(mxu),
        f32_reductions_(f32_reductions),
        replicas_(replicas),
        plan_(cpu::plan_execution(graph_)) {}
  const Graph& graph() const override { return graph_; }
  uint32_t replicas() const override { return replicas_; }
  bool mxu() const { return mxu_; }
  bool f32_reductions() const { return f32_reductions_; }
  const cpu::ExecutionPlan& plan() const { return plan_; }

 private:
  Graph graph_;
  bool mxu_;
  bool f32_reductions_;
  uint32_t replicas_;
  cpu::ExecutionPlan plan_;
};

HostTensor evaluate(const Node& n, const cpu::NodePlan& plan, const cpu::Inputs& in,
                    const cpu::KernelContext& ctx) {
  if (is_binary_elementwise(n.op)) return cpu::elementwise_binary(n, in, plan.binary);
  if (is_unary_elementwise(n.op) || n.op == Op::kStopGradient || n.op == Op::kCrossReplicaSum) {
    return cpu::elementwise_unary(n, in);
  }
  switch (n.op) {
    case Op::kSelect:
      return cpu::select(n, in);
    case Op::kCast:
      return cpu::cast(n, in);
    case Op::kReduceSum:
    case Op::kReduceMax:
      return cpu::reduce(n, in, ctx);
    case Op::kArgMax:
      return cpu::argmax(n, in);
    case Op::kReshape:
      return cpu::reshape(n, in);
    case Op::kTranspose:
      return cpu::transpose(n, in);
    case Op::kBroadcast:
      return cpu::broadcast(n, in);
    case Op::kConcat:
      return cpu::concat(n, in);
    case Op::kSlice:
      return cpu::slice(n, in);
    case Op::kPad:
      return cpu::pad(n, in);
    case Op::kMatMul:
      return cpu::matmul(n, in, ctx, plan.matmul);
    case Op::kExtractPatches:
      return cpu::extract_patches(n, in);
    case Op::kPatchesToImage:
      return cpu::patches_to_image(n, in);
    case Op::kOneHot:
      return cpu::one_hot(n, in);
    case Op::kGather:
      return cpu::gather(n, in);
    case Op::kScatterAdd:
      return cpu::scatter_add(n, in);
    case Op::kRngUniform:
      return cpu::rng_uniform(n, ctx);
    case Op::kConstant:
      return n.attrs.value;
    case Op::kVariable:
    case Op::kInfeed:
      break;  // supplied by run()
    default:  // the elementwise ops, handled above
      break;
  }
  return HostTensor{};
}

class CpuBackend final : public Backend {
 public:
  const BackendDeclaration& declaration() const override { return cpu_backend_declaration(); }

  absl::StatusOr<std::unique_ptr<Executable>> compile(const Graph& graph,
                                                      const CompileOptions& options) override {
    if (absl::Status st = check_backend_options(declaration(), options); !st.ok()) return st;
    return std::make_unique<CpuExecutable>(graph, options.precision == Precision::kMxu,
                                           options.f32_reductions, options.replicas);
  }

  // The replicas run in lockstep, node by node, each on its own copy of the variables (replica 0
  // on `variables` itself), so that cross_replica_sum sees every replica's value.
  absl::StatusOr<LoopResult> run_loop(Executable& executable, Variables& variables,
                                      const std::vector<LoopStep>& steps,
                                      uint64_t first_step) override {
    auto& exe = static_cast<CpuExecutable&>(executable);
    if (absl::Status st = check_loop(exe, variables, steps, first_step); !st.ok()) return st;
    cpu::fix_gemm_blocking();
    // The pool serves one loop at a time; a loop run beside it allocates as it goes.
    std::unique_lock<std::mutex> pool_lock(pool_mutex_, std::try_to_lock);
    std::optional<cpu::PoolScope> pool;
    if (pool_lock.owns_lock()) pool.emplace(pool_);
    std::vector<Variables> others(exe.replicas() - 1, variables);
    std::vector<Variables*> vars{&variables};
    for (Variables& v : others) vars.push_back(&v);
    LoopResult result;
    for (size_t s = 0; s < steps.size(); ++s) {
      result.outputs.push_back(step(exe, vars, steps[s].replicas, first_step + s));
    }
    return result;
  }

 private:
  cpu::BufferPool pool_;  // the kernels' recycled storage, kept between loops
  std::mutex pool_mutex_;

  // A step's values, per replica and node. A variable and an f32 infeed are read where they are
  // (`reads`), not copied: the step's updates are written after its last node.
  struct StepValues {
    std::vector<std::vector<HostTensor>> owned;         // [replica][node]: what the step made
    std::vector<std::vector<const HostTensor*>> reads;  // [replica][node]: where each is read
    StepValues(size_t replicas, size_t nodes)
        : owned(replicas, std::vector<HostTensor>(nodes)),
          reads(replicas, std::vector<const HostTensor*>(nodes, nullptr)) {}
    bool owns(size_t r, size_t id) const { return reads[r][id] == &owned[r][id]; }
    void set(size_t r, size_t id, HostTensor t) {
      owned[r][id] = std::move(t);
      reads[r][id] = &owned[r][id];
    }
  };

  // Node `i` of replica `r`.
  static void run_node(const CpuExecutable& exe, int i, size_t r, const Variables& vars,
                       const Feeds& feeds, const cpu::KernelContext& ctx, StepValues& v) {
    const Node& n = exe.graph().node(i);
    const cpu::NodePlan& p = exe.plan().nodes[static_cast<size_t>(i)];
    const auto at = static_cast<size_t>(i);
    if (n.op == Op::kVariable) {
      v.reads[r][at] = &vars.at(n.attrs.name);
    } else if (n.op == Op::kInfeed) {
      v.reads[r][at] = &infeed_value(n, feeds.at(n.attrs.name), v.owned[r][at]);
    } else if (const auto input = static_cast<size_t>(p.inputs.empty() ? 0 : p.inputs[0]);
               n.op == Op::kReshape && exe.plan().last_use[input] == i && v.owns(r, input)) {
      // The input dies here: its values become the output's, uncopied.
      HostTensor t = std::move(v.owned[r][input]);
      t.shape = n.shape;
      v.set(r, at, std::move(t));
    } else {
      cpu::Inputs in;
      for (int id : p.inputs) in.push_back(v.reads[r][static_cast<size_t>(id)]);
      v.set(r, at, evaluate(n, p, in, ctx));
    }
  }

  static std::vector<Outputs> step(const CpuExecutable& exe, const std::vector<Variables*>& vars,
                                   const std::vector<Feeds>& feeds, uint64_t step_number) {
    const Graph& g = exe.graph();
    const size_t replicas = vars.size();
    cpu::KernelContext ctx{exe.mxu(), step_number, exe.f32_reductions()};
    StepValues v(replicas, static_cast<size_t>(g.size()));
    const cpu::ExecutionPlan& plan = exe.plan();
    for (int i = 0; i < g.size(); ++i) {
      const cpu::NodePlan& p = plan.nodes[static_cast<size_t>(i)];
      if (p.folded || p.dead) continue;
      if (g.node(i).op == Op::kCrossReplicaSum && replicas > 1) {
        std::vector<const HostTensor*> parts;
        for (size_t r = 0; r < replicas; ++r)
          parts.push_back(v.reads[r][static_cast<size_t>(p.inputs[0])]);
        const HostTensor sum = cpu::ring_sum(parts);
        for (size_t r = 0; r < replicas; ++r) v.set(r, static_cast<size_t>(i), sum);
      } else {
        for (size_t r = 0; r < replicas; ++r) run_node(exe, i, r, *vars[r], feeds[r], ctx, v);
      }
      for (int id : p.inputs) {
        if (plan.last_use[static_cast<size_t>(id)] != i) continue;
        for (size_t r = 0; r < replicas; ++r) cpu::recycle(v.owned[r][static_cast<size_t>(id)]);
      }
    }
    std::vector<Outputs> outputs(replicas);
    for (size_t r = 0; r < replicas; ++r) {
      for (const auto& o : g.outputs())
        outputs[r][o.name] = *v.reads[r][static_cast<size_t>(o.node)];
      write_updates(g, v.reads[r], vars[r]);
    }
    return outputs;
  }

  // The step's new variable values, written in the graph's order (a variable updated twice keeps
  // the last). An update to a variable's old value (read in place) is copied before any variable
  // changes; the others are copied into the variables' own storage.
  static void write_updates(const Graph& g, const std::vector<const HostTensor*>& reads,
                            Variables* vars) {
    std::vector<HostTensor> old_values(g.updates().size());
    for (size_t k = 0; k < g.updates().size(); ++k) {
      const int value = g.updates()[k].value;
      if (g.node(value).op == Op::kVariable) old_values[k] = *reads[static_cast<size_t>(value)];
    }
    for (size_t k = 0; k < g.updates().size(); ++k) {
      const VariableUpdate& u = g.updates()[k];
      HostTensor& var = (*vars)[g.node(u.variable).attrs.name];
      if (g.node(u.value).op == Op::kVariable) {
        var = std::move(old_values[k]);
      } else {
        var = *reads[static_cast<size_t>(u.value)];
      }
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

const BackendDeclaration& cpu_backend_declaration() {
  static const BackendDeclaration declaration = [] {
    BackendDeclaration d;
    d.name = "cpu";
    d.description = "Eigen on the host: the numerics reference (fp32, or mxu: bf16 matmul inputs)";
    d.supports.precisions = {Precision::kFp32, Precision::kMxu};
    d.supports.dtype_policies = {DTypePolicy::kFloat32, DTypePolicy::kMixedBFloat16};
    d.supports.allreduce_algorithms = {
        AllReduceAlgorithm::kRing};  // replica 0's value plus each other's, in order
    d.numerics_reference = true;
    d.availability = [] { return BackendAvailability{true, true, ""}; };
    d.make = [](const BackendArgs&) -> absl::StatusOr<std::unique_ptr<Backend>> {
      return make_cpu_backend();
    };
    return d;
  }();
  return declaration;
}

void reference_matmul(const float* a, const float* b, float* out, int64_t rows, int64_t K,
                      int64_t N) {
  cpu::fix_gemm_blocking();
  cpu::gemm(cpu::LhsSource::of(a), false, b, false, out, rows, K, N);
}

}  // namespace tpusim::runtime
