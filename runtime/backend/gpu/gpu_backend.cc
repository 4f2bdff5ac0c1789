// The gpu backend's host side: compiles a graph into one NodePlan per node (and uploads its
// constants), then runs device loops the way the cpu backend does: replicas in lockstep, node
// by node, each value dropped after its last use, cross_replica_sum in ring order. Everything
// runs on the legacy default stream, so kernels, GEMMs and copies are ordered without events.
#include "runtime/backend/gpu/gpu_backend.h"

#include <cuda_runtime_api.h>

#include "common/strings.h"
#include "runtime/backend/gpu/cuda_status.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/gemm.h"
#include "runtime/backend/gpu/kernels.h"
#include "runtime/backend/gpu/node_plan.h"
#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime {
namespace {

using gpu::Buffer;
using gpu::DeviceBuffer;

// Every value is 4 bytes an element on the device (f32, bf16 held as f32, s32).
size_t value_bytes(const Shape& shape) { return static_cast<size_t>(shape.elements()) * 4; }

absl::StatusOr<Buffer> upload(const HostTensor& t, const std::string& what) {
  const size_t held = t.dtype == DType::kS32 ? t.i.size() : t.f.size();
  if (held != static_cast<size_t>(t.elements())) {
    return absl::InvalidArgumentError(
        str_cat(what, " is ", dtype_name(t.dtype), t.shape.str(), " but holds ", held, " values"));
  }
  auto buffer = DeviceBuffer::allocate(value_bytes(t.shape));
  if (!buffer.ok()) return buffer.status();
  if (held == 0) return buffer;
  const void* host = t.dtype == DType::kS32 ? static_cast<const void*>(t.i.data())
                                            : static_cast<const void*>(t.f.data());
  if (absl::Status st = gpu::cuda_status(
          cudaMemcpy((*buffer)->data(), host, (*buffer)->bytes(), cudaMemcpyHostToDevice),
          str_cat("copying ", what, " to the device"));
      !st.ok()) {
    return st;
  }
  return buffer;
}

absl::StatusOr<HostTensor> download(const Buffer& buffer, DType dtype, const Shape& shape,
                                    const std::string& what) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  if (shape.elements() == 0) return t;
  void* host =
      dtype == DType::kS32 ? static_cast<void*>(t.i.data()) : static_cast<void*>(t.f.data());
  if (absl::Status st = gpu::cuda_status(
          cudaMemcpy(host, buffer->data(), value_bytes(shape), cudaMemcpyDeviceToHost),
          str_cat("copying ", what, " from the device"));
      !st.ok()) {
    return st;
  }
  return t;
}

class GpuExecutable final : public Executable {
 public:
  GpuExecutable(Graph graph, uint32_t replicas, std::vector<gpu::NodePlan> plans,
                std::vector<Buffer> constants)
      : graph_(std::move(graph)),
        replicas_(replicas),
        plans_(std::move(plans)),
        constants_(std::move(constants)),
        last_use_(last_uses(graph_)) {}
  const Graph& graph() const override { return graph_; }
  uint32_t replicas() const override { return replicas_; }
  const gpu::NodePlan& plan(int id) const { return plans_[static_cast<size_t>(id)]; }
  const Buffer& constant(int id) const { return constants_[static_cast<size_t>(id)]; }
  int last_use(int id) const { return last_use_[static_cast<size_t>(id)]; }

 private:
  Graph graph_;
  uint32_t replicas_;
  std::vector<gpu::NodePlan> plans_;
  std::vector<Buffer> constants_;  // per node; set for kConstant nodes
  std::vector<int> last_use_;
};

using DeviceVariables = std::map<std::string, Buffer>;  // one replica's variables

// "gpu backend: <where>: <what failed>", keeping the failure's code.
absl::Status failed_at(const std::string& where, const absl::Status& st) {
  return absl::Status(st.code(), str_cat("gpu backend: ", where, ": ", st.message()));
}

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(std::unique_ptr<gpu::Cublas> cublas) : cublas_(std::move(cublas)) {}
  const BackendDeclaration& declaration() const override { return gpu_backend_declaration(); }

  absl::StatusOr<std::unique_ptr<Executable>> compile(const Graph& graph,
                                                      const CompileOptions& options) override {
    if (absl::Status st = check_backend_options(declaration(), options); !st.ok()) return st;
    std::vector<gpu::NodePlan> plans;
    std::vector<Buffer> constants(static_cast<size_t>(graph.size()));
    for (int i = 0; i < graph.size(); ++i) {
      auto plan = gpu::plan_node(graph, i, options.precision == "mxu");
      if (!plan.ok()) return plan.status();
      plans.push_back(*std::move(plan));
      if (graph.node(i).op != Op::kConstant) continue;
      auto buffer = upload(graph.node(i).attrs.value, "the constant");
      if (!buffer.ok()) return failed_at(gpu::describe_node(graph, i), buffer.status());
      constants[static_cast<size_t>(i)] = *std::move(buffer);
    }
    return std::make_unique<GpuExecutable>(graph, options.replicas, std::move(plans),
                                           std::move(constants));
  }

  // Every replica starts from `variables` (one upload, shared until a replica updates it); at
  // the end `variables` takes replica 0's updated values. On an error `variables` is unchanged.
  absl::StatusOr<LoopResult> run_loop(Executable& executable, Variables& variables,
                                      const std::vector<LoopStep>& steps,
                                      uint64_t first_step) override {
    auto& exe = static_cast<GpuExecutable&>(executable);
    if (absl::Status st = check_loop(exe, variables, steps, first_step); !st.ok()) return st;
    const Graph& g = exe.graph();
    DeviceVariables initial;
    for (int id : g.variables()) {
      const std::string& name = g.node(id).attrs.name;
      auto buffer = upload(variables.at(name), str_cat("variable '", name, "'"));
      if (!buffer.ok()) return failed_at("loading the variables", buffer.status());
      initial[name] = *std::move(buffer);
    }
    std::vector<DeviceVariables> vars(exe.replicas(), initial);
    LoopResult result;
    for (size_t s = 0; s < steps.size(); ++s) {
      auto outputs = step(exe, vars, steps[s].replicas, first_step + s);
      if (!outputs.ok()) return outputs.status();
      result.outputs.push_back(*std::move(outputs));
    }
    Variables updated;
    for (const auto& u : g.updates()) {
      const Node& v = g.node(u.variable);
      auto t = download(vars[0].at(v.attrs.name), v.dtype, v.shape,
                        str_cat("variable '", v.attrs.name, "'"));
      if (!t.ok()) return failed_at("reading back the variables", t.status());
      updated[v.attrs.name] = *std::move(t);
    }
    // A graph with nothing to read back still reports a kernel that faulted.
    if (absl::Status st = gpu::cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        !st.ok()) {
      return failed_at("finishing the loop", st);
    }
    for (auto& [name, value] : updated) variables[name] = std::move(value);
    return result;
  }

 private:
  using Values = std::vector<std::vector<Buffer>>;  // [replica][node]

  absl::StatusOr<std::vector<Outputs>> step(const GpuExecutable& exe,
                                            std::vector<DeviceVariables>& vars,
                                            const std::vector<Feeds>& feeds, uint64_t step_number) {
    const Graph& g = exe.graph();
    const size_t replicas = vars.size();
    Values values(replicas, std::vector<Buffer>(static_cast<size_t>(g.size())));
    for (int i = 0; i < g.size(); ++i) {
      if (absl::Status st = run_node(exe, i, vars, feeds, step_number, values); !st.ok())
        return failed_at(str_cat("step ", step_number, ", ", gpu::describe_node(g, i)), st);
      for (int id : g.node(i).inputs) {
        if (exe.last_use(id) != i) continue;
        for (size_t r = 0; r < replicas; ++r) values[r][static_cast<size_t>(id)].reset();
      }
    }
    std::vector<Outputs> outputs(replicas);
    for (size_t r = 0; r < replicas; ++r) {
      for (const auto& o : g.outputs()) {
        const Node& n = g.node(o.node);
        auto t = download(values[r][static_cast<size_t>(o.node)], n.dtype, n.shape,
                          str_cat("output '", o.name, "'"));
        // Kernels run asynchronously: one that faulted during the step is reported here.
        if (!t.ok()) return failed_at(str_cat("step ", step_number), t.status());
        outputs[r][o.name] = *std::move(t);
      }
      for (const auto& u : g.updates())
        vars[r][g.node(u.variable).attrs.name] = values[r][static_cast<size_t>(u.value)];
    }
    return outputs;
  }

  // Computes node `id` for every replica into `values`.
  absl::Status run_node(const GpuExecutable& exe, int id, std::vector<DeviceVariables>& vars,
                        const std::vector<Feeds>& feeds, uint64_t step_number, Values& values) {
    const Node& n = exe.graph().node(id);
    const gpu::NodePlan& plan = exe.plan(id);
    const auto at = static_cast<size_t>(id);
    const size_t replicas = values.size();
    auto input = [&](size_t r, size_t i) -> const Buffer& {
      return values[r][static_cast<size_t>(n.inputs[i])];
    };
    if (plan.work == gpu::NodeWork::kCrossReplicaSum && replicas > 1)
      return ring_sum(n, id, values);
    for (size_t r = 0; r < replicas; ++r) {
      switch (plan.work) {
        case gpu::NodeWork::kSource: {
          if (n.op == Op::kConstant) {
            values[r][at] = exe.constant(id);
          } else if (n.op == Op::kVariable) {
            values[r][at] = vars[r].at(n.attrs.name);
          } else {
            HostTensor rounded;
            auto buffer = upload(infeed_value(n, feeds[r].at(n.attrs.name), rounded),
                                 str_cat("infeed '", n.attrs.name, "'"));
            if (!buffer.ok()) return buffer.status();
            values[r][at] = *std::move(buffer);
          }
          break;
        }
        case gpu::NodeWork::kAlias:
        case gpu::NodeWork::kCrossReplicaSum:  // one replica: the sum is its own value
          values[r][at] = input(r, 0);
          break;
        case gpu::NodeWork::kMatMul: {
          auto out = DeviceBuffer::allocate(value_bytes(n.shape));
          if (!out.ok()) return out.status();
          if (absl::Status st =
                  cublas_->matmul(plan.matmul, static_cast<const float*>(input(r, 0)->data()),
                                  static_cast<const float*>(input(r, 1)->data()),
                                  static_cast<float*>((*out)->data()));
              !st.ok()) {
            return st;
          }
          values[r][at] = *std::move(out);
          break;
        }
        case gpu::NodeWork::kElements: {
          auto out = DeviceBuffer::allocate(value_bytes(n.shape));
          if (!out.ok()) return out.status();
          if (plan.zero_output) {
            if (absl::Status st = gpu::cuda_status(
                    cudaMemsetAsync((*out)->data(), 0, (*out)->bytes()), "cudaMemsetAsync");
                !st.ok()) {
              return st;
            }
          }
          for (const gpu::ElementLaunch& l : plan.launches) {
            gpu::ElementPlan p = l.plan;
            p.step = step_number;
            const void* operand[3] = {nullptr, nullptr, nullptr};
            for (size_t k = 0; k < l.operands.size() && k < 3; ++k)
              operand[k] = input(r, static_cast<size_t>(l.operands[k]))->data();
            if (absl::Status st = gpu::cuda_status(
                    gpu::launch_elements(p, operand[0], operand[1], operand[2], (*out)->data()),
                    "launching its kernel");
                !st.ok()) {
              return st;
            }
          }
          values[r][at] = *std::move(out);
          break;
        }
      }
    }
    return absl::OkStatus();
  }

  // cross_replica_sum over several replicas: one buffer, the same for every replica.
  static absl::Status ring_sum(const Node& n, int id, Values& values) {
    const size_t replicas = values.size();
    std::vector<const void*> parts;
    for (size_t r = 0; r < replicas; ++r)
      parts.push_back(values[r][static_cast<size_t>(n.inputs[0])]->data());
    auto table = DeviceBuffer::allocate(parts.size() * sizeof(void*));
    if (!table.ok()) return table.status();
    if (absl::Status st = gpu::cuda_status(
            cudaMemcpy((*table)->data(), parts.data(), (*table)->bytes(), cudaMemcpyHostToDevice),
            "copying the replicas' addresses");
        !st.ok()) {
      return st;
    }
    auto out = DeviceBuffer::allocate(value_bytes(n.shape));
    if (!out.ok()) return out.status();
    if (absl::Status st = gpu::cuda_status(
            gpu::launch_ring_sum(static_cast<const void* const*>((*table)->data()), replicas,
                                 static_cast<uint64_t>(n.shape.elements()), n.dtype == DType::kS32,
                                 (*out)->data()),
            "launching the ring sum");
        !st.ok()) {
      return st;
    }
    for (size_t r = 0; r < replicas; ++r) values[r][static_cast<size_t>(id)] = *out;
    return absl::OkStatus();
  }

  std::unique_ptr<gpu::Cublas> cublas_;
};

absl::Status unavailable(const std::string& why) {
  return absl::UnavailableError(str_cat("gpu backend unavailable: ", why));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> make_gpu_backend() {
  const gpu::CudaProbe probe = gpu::probe_cuda();
  if (!probe.reason.empty()) return unavailable(probe.reason);
  if (probe.devices.empty()) return unavailable("the CUDA runtime reports no device");
  if (absl::Status st = gpu::cuda_status(cudaSetDevice(0), "cudaSetDevice(0)"); !st.ok())
    return unavailable(std::string(st.message()));
  auto cublas = gpu::Cublas::create();
  if (!cublas.ok()) return unavailable(std::string(cublas.status().message()));
  return std::unique_ptr<Backend>(std::make_unique<GpuBackend>(*std::move(cublas)));
}

}  // namespace tpusim::runtime
