// The gpu backend's host side: compiles a graph into one NodePlan per node (and uploads its
// constants), then runs device loops the way the cpu backend does: node by node, each value
// dropped after its last use, cross_replica_sum in ring order. A step's replicas run together:
// each node is one set of launches (or GEMM calls) for all of them (kernels.h's replica
// layout), and a value computed from shared values alone (constants, variables no replica has
// updated, a cross_replica_sum's result and what follows from it) is computed once and shared.
// Everything runs on the legacy default stream, so kernels, GEMMs and copies are ordered
// without events, but the next step's infeed copies (infeed_prefetch.h), which run beside a
// step on a stream of their own and are waited for by event where the next step reads them.
#include "runtime/backend/gpu/gpu_backend.h"

#include <deque>
#include <map>

#include <cuda_runtime_api.h>

#include "common/strings.h"
#include "runtime/backend/gpu/cuda_status.h"
#include "runtime/backend/gpu/device_buffer.h"
#include "runtime/backend/gpu/gemm.h"
#include "runtime/backend/gpu/infeed_prefetch.h"
#include "runtime/backend/gpu/kernels.h"
#include "runtime/backend/gpu/node_plan.h"
#include "runtime/backend/gpu/node_profile.h"
#include "runtime/gpu/cuda_probe.h"

namespace tpusim::runtime {
namespace {

using gpu::Buffer;
using gpu::DeviceBuffer;

// Every value is 4 bytes an element on the device (f32, bf16 held as f32, s32).
size_t value_bytes(const Shape& shape) { return static_cast<size_t>(shape.elements()) * 4; }

// `t`'s values on the host (value_bytes(t.shape) bytes), checking first that it holds as many as
// its shape says.
absl::StatusOr<const void*> host_values(const HostTensor& t, const std::string& what) {
  const size_t held = t.dtype == DType::kS32 ? t.i.size() : t.f.size();
  if (held != static_cast<size_t>(t.elements())) {
    return absl::InvalidArgumentError(
        str_cat(what, " is ", dtype_name(t.dtype), t.shape.str(), " but holds ", held, " values"));
  }
  return t.dtype == DType::kS32 ? static_cast<const void*>(t.i.data())
                                : static_cast<const void*>(t.f.data());
}

// Copies `t`'s values to `device` (value_bytes(t.shape) bytes there).
absl::Status copy_to_device(const HostTensor& t, void* device, const std::string& what) {
  auto host = host_values(t, what);
  if (!host.ok()) return host.status();
  if (t.elements() == 0) return absl::OkStatus();
  return gpu::cuda_status(cudaMemcpy(device, *host, value_bytes(t.shape), cudaMemcpyHostToDevice),
                          str_cat("copying ", what, " to the device"));
}

absl::StatusOr<Buffer> upload(const HostTensor& t, const std::string& what) {
  auto buffer = DeviceBuffer::allocate(value_bytes(t.shape));
  if (!buffer.ok()) return buffer.status();
  if (absl::Status st = copy_to_device(t, (*buffer)->data(), what); !st.ok()) return st;
  return buffer;
}

absl::StatusOr<HostTensor> download(const void* device, DType dtype, const Shape& shape,
                                    const std::string& what) {
  HostTensor t = HostTensor::zeros(dtype, shape);
  if (shape.elements() == 0) return t;
  void* host =
      dtype == DType::kS32 ? static_cast<void*>(t.i.data()) : static_cast<void*>(t.f.data());
  if (absl::Status st =
          gpu::cuda_status(cudaMemcpy(host, device, value_bytes(shape), cudaMemcpyDeviceToHost),
                           str_cat("copying ", what, " from the device"));
      !st.ok()) {
    return st;
  }
  return t;
}

// A node's value on the device: every replica's copy in one buffer, replica r's at byte
// r x stride, or (stride 0) one copy every replica shares (kernels.h).
struct Value {
  Buffer buffer;
  int64_t stride = 0;
  bool shared() const { return stride == 0; }
  const void* at(size_t replica) const {
    return buffer == nullptr
               ? nullptr
               : static_cast<const char*>(buffer->data()) + static_cast<int64_t>(replica) * stride;
  }
};

// `copies` x `bytes` of device memory as a value: shared for one copy, else one a replica.
absl::StatusOr<Value> allocate_value(size_t bytes, size_t copies) {
  auto buffer = DeviceBuffer::allocate(bytes * copies);
  if (!buffer.ok()) return buffer.status();
  return Value{*std::move(buffer), copies > 1 ? static_cast<int64_t>(bytes) : 0};
}

class GpuExecutable final : public Executable {
 public:
  GpuExecutable(Graph graph, uint32_t replicas, std::vector<gpu::NodePlan> plans,
                std::vector<Buffer> constants)
      : graph_(std::move(graph)),
        replicas_(replicas),
        plans_(std::move(plans)),
        constants_(std::move(constants)),
        live_(live_nodes(graph_)),
        last_use_(last_uses(graph_)),
        profile_(gpu::NodeProfile::from_environment(graph_)) {
    for (int i = 0; i < graph_.size(); ++i) {
      if (graph_.node(i).op == Op::kInfeed) infeeds_.push_back(i);
    }
  }
  const Graph& graph() const override { return graph_; }
  uint32_t replicas() const override { return replicas_; }
  const gpu::NodePlan& plan(int id) const { return plans_[static_cast<size_t>(id)]; }
  const Buffer& constant(int id) const { return constants_[static_cast<size_t>(id)]; }
  bool live(int id) const { return live_[static_cast<size_t>(id)]; }  // dead ones never run
  int last_use(int id) const { return last_use_[static_cast<size_t>(id)]; }
  gpu::NodeProfile* profile() const { return profile_.get(); }  // null unless asked for
  const std::vector<int>& infeeds() const { return infeeds_; }  // the infeed nodes

 private:
  Graph graph_;
  uint32_t replicas_;
  std::vector<gpu::NodePlan> plans_;
  std::vector<Buffer> constants_;  // per node; set for kConstant nodes
  std::vector<bool> live_;
  std::vector<int> last_use_;
  std::unique_ptr<gpu::NodeProfile> profile_;
  std::vector<int> infeeds_;
};

using DeviceVariables = std::map<std::string, Value>;  // every replica's variables

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
      auto plan = gpu::plan_node(graph, i, options.precision == Precision::kMxu);
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

  // Every replica starts from `variables` (one upload, shared until the replicas update it); at
  // the end `variables` takes replica 0's updated values. On an error `variables` is unchanged.
  absl::StatusOr<LoopResult> run_loop(Executable& executable, Variables& variables,
                                      const std::vector<LoopStep>& steps,
                                      uint64_t first_step) override {
    auto& exe = static_cast<GpuExecutable&>(executable);
    if (absl::Status st = check_loop(exe, variables, steps, first_step); !st.ok()) return st;
    const Graph& g = exe.graph();
    DeviceVariables vars;
    for (int id : g.variables()) {
      const std::string& name = g.node(id).attrs.name;
      auto buffer = upload(variables.at(name), str_cat("variable '", name, "'"));
      if (!buffer.ok()) return failed_at("loading the variables", buffer.status());
      vars[name] = Value{*std::move(buffer), 0};
    }
    LoopResult result;
    prefetch_->clear();  // nothing left from a loop that failed part-way
    for (size_t s = 0; s < steps.size(); ++s) {
      auto outputs = step(exe, vars, steps, s, first_step + s);
      if (!outputs.ok()) return outputs.status();
      result.outputs.push_back(*std::move(outputs));
    }
    Variables updated;
    for (const auto& u : g.updates()) {
      const Node& v = g.node(u.variable);
      auto t = download(vars.at(v.attrs.name).at(0), v.dtype, v.shape,
                        str_cat("variable '", v.attrs.name, "'"));
      if (!t.ok()) return failed_at("reading back the variables", t.status());
      updated[v.attrs.name] = *std::move(t);
    }
    // A graph with nothing to read back still reports a kernel that faulted.
    if (absl::Status st = gpu::cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        !st.ok()) {
      return failed_at("finishing the loop", st);
    }
    if (exe.profile() != nullptr) {
      if (absl::Status st = exe.profile()->write(); !st.ok()) return failed_at("profiling", st);
    }
    for (auto& [name, value] : updated) variables[name] = std::move(value);
    return result;
  }

 private:
  using Values = std::vector<Value>;  // per node

  // Step `s` of `steps`: its nodes queued, then the next step's infeeds copied while they run
  // (infeed_prefetch.h), then its outputs read back.
  absl::StatusOr<std::vector<Outputs>> step(const GpuExecutable& exe, DeviceVariables& vars,
                                            const std::vector<LoopStep>& steps, size_t s,
                                            uint64_t step_number) {
    const Graph& g = exe.graph();
    const size_t replicas = exe.replicas();
    const std::vector<Feeds>& feeds = steps[s].replicas;
    const std::vector<Feeds>* next = s + 1 < steps.size() ? &steps[s + 1].replicas : nullptr;
    gpu::NodeProfile* profile = exe.profile();
    if (next != nullptr) {
      std::map<int, size_t> bytes;
      for (int id : exe.infeeds()) bytes[id] = value_bytes(g.node(id).shape) * replicas;
      if (absl::Status st = prefetch_->reserve(bytes); !st.ok())
        return failed_at(str_cat("step ", step_number, ", the next step's infeed"), st);
    }
    Values values(static_cast<size_t>(g.size()));
    for (int i = 0; i < g.size(); ++i) {
      if (!exe.live(i)) continue;
      absl::Status st = profile != nullptr ? profile->before(i) : absl::OkStatus();
      if (st.ok()) st = run_node(exe, i, vars, feeds, step_number, values);
      if (st.ok() && profile != nullptr) st = profile->after(i);
      if (!st.ok())
        return failed_at(str_cat("step ", step_number, ", ", gpu::describe_node(g, i)), st);
      for (int id : g.node(i).inputs) {
        if (exe.last_use(id) == i) values[static_cast<size_t>(id)] = Value{};
      }
    }
    if (next != nullptr) {
      if (absl::Status st = prefetch_infeeds(exe, *next); !st.ok())
        return failed_at(str_cat("step ", step_number, ", the next step's infeed"), st);
    }
    std::vector<Outputs> outputs(replicas);
    for (size_t r = 0; r < replicas; ++r) {
      for (const auto& o : g.outputs()) {
        const Node& n = g.node(o.node);
        auto t = download(values[static_cast<size_t>(o.node)].at(r), n.dtype, n.shape,
                          str_cat("output '", o.name, "'"));
        // Kernels run asynchronously: one that faulted during the step is reported here.
        if (!t.ok()) return failed_at(str_cat("step ", step_number), t.status());
        outputs[r][o.name] = *std::move(t);
      }
    }
    for (const auto& u : g.updates())
      vars[g.node(u.variable).attrs.name] = values[static_cast<size_t>(u.value)];
    if (profile != nullptr) {
      // The outputs' read-back waited for the step; a step without outputs waits here.
      absl::Status st = gpu::cuda_status(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      if (st.ok()) st = profile->add_step();
      if (!st.ok()) return failed_at(str_cat("step ", step_number, ", profiling"), st);
    }
    return outputs;
  }

  // Computes node `id` for every replica into `values`.
  absl::Status run_node(const GpuExecutable& exe, int id, DeviceVariables& vars,
                        const std::vector<Feeds>& feeds, uint64_t step_number, Values& values) {
    const Node& n = exe.graph().node(id);
    const gpu::NodePlan& plan = exe.plan(id);
    Value& out = values[static_cast<size_t>(id)];
    const size_t replicas = exe.replicas();
    switch (plan.work) {
      case gpu::NodeWork::kSource:
        if (n.op == Op::kConstant) {
          out = Value{exe.constant(id), 0};
        } else if (n.op == Op::kVariable) {
          out = vars.at(n.attrs.name);
        } else {
          auto prefetched = prefetch_->take(id);
          if (!prefetched.ok()) return prefetched.status();
          if (*prefetched == nullptr) return upload_infeed(n, feeds, replicas, &out);
          out = Value{*std::move(prefetched),
                      replicas > 1 ? static_cast<int64_t>(value_bytes(n.shape)) : 0};
        }
        return absl::OkStatus();
      case gpu::NodeWork::kAlias:
        out = values[static_cast<size_t>(n.inputs[0])];
        return absl::OkStatus();
      case gpu::NodeWork::kCrossReplicaSum:
        if (replicas == 1) {  // one replica: the sum is its own value
          out = values[static_cast<size_t>(n.inputs[0])];
          return absl::OkStatus();
        }
        return ring_sum(n, values[static_cast<size_t>(n.inputs[0])], replicas, &out);
      case gpu::NodeWork::kMatMul:
        return matmul(n, plan, values, replicas, &out);
      case gpu::NodeWork::kElements:
        return run_elements(n, plan, values, replicas, step_number, &out);
    }
    return absl::OkStatus();
  }

  // Every replica's batch of infeed `n` in one buffer, one copy each.
  static absl::Status upload_infeed(const Node& n, const std::vector<Feeds>& feeds, size_t replicas,
                                    Value* out) {
    auto value = allocate_value(value_bytes(n.shape), replicas);
    if (!value.ok()) return value.status();
    for (size_t r = 0; r < replicas; ++r) {
      HostTensor rounded;
      if (absl::Status st = copy_to_device(infeed_value(n, feeds[r].at(n.attrs.name), rounded),
                                           const_cast<void*>(value->at(r)),
                                           str_cat("infeed '", n.attrs.name, "'"));
          !st.ok()) {
        return st;
      }
    }
    *out = *std::move(value);
    return absl::OkStatus();
  }

  absl::Status matmul(const Node& n, const gpu::NodePlan& plan, const Values& values,
                      size_t replicas, Value* out) {
    const Value& a = values[static_cast<size_t>(n.inputs[0])];
    const Value& b = values[static_cast<size_t>(n.inputs[1])];
    const gpu::ReplicaLayout layout{static_cast<uint32_t>(replicas), a.shared(), b.shared()};
    auto value = allocate_value(value_bytes(n.shape), layout.out_shared() ? 1 : replicas);
    if (!value.ok()) return value.status();
    if (absl::Status st = cublas_->matmul(plan.matmul, layout, *a.buffer, *b.buffer,
                                          static_cast<float*>(value->buffer->data()));
        !st.ok()) {
      return st;
    }
    *out = *std::move(value);
    return absl::OkStatus();
  }

  // The node's element launches, once for a shared result, else once for every replica.
  static absl::Status run_elements(const Node& n, const gpu::NodePlan& plan, const Values& values,
                                   size_t replicas, uint64_t step_number, Value* out) {
    bool shared = true;
    for (int in : n.inputs) shared = shared && values[static_cast<size_t>(in)].shared();
    const size_t copies = shared ? 1 : replicas;
    auto value = allocate_value(value_bytes(n.shape), copies);
    if (!value.ok()) return value.status();
    if (plan.zero_output) {
      if (absl::Status st = gpu::cuda_status(
              cudaMemsetAsync(value->buffer->data(), 0, value->buffer->bytes()), "cudaMemsetAsync");
          !st.ok()) {
        return st;
      }
    }
    auto scratch = allocate_value(static_cast<size_t>(plan.scratch_bytes), copies);
    if (!scratch.ok()) return scratch.status();
    for (const gpu::ElementLaunch& l : plan.launches) {
      gpu::ElementPlan p = l.plan;
      p.step = step_number;
      gpu::ReplicaOperands in;
      for (size_t k = 0; k < l.operands.size() && k < 3; ++k) {
        const bool from_scratch = l.operands[k] == gpu::kScratchOperand;
        const Value& v =
            from_scratch
                ? *scratch
                : values[static_cast<size_t>(n.inputs[static_cast<size_t>(l.operands[k])])];
        in.data[k] = static_cast<const char*>(v.at(0)) + (from_scratch ? l.scratch_in : 0);
        in.stride[k] = v.stride;
      }
      const Value& to = l.writes_scratch ? *scratch : *value;
      char* to_data =
          static_cast<char*>(const_cast<void*>(to.at(0))) + (l.writes_scratch ? l.scratch_out : 0);
      if (absl::Status st = gpu::cuda_status(
              gpu::launch_elements(p, in, to_data, to.stride, static_cast<uint32_t>(copies)),
              "launching its kernel");
          !st.ok()) {
        return st;
      }
    }
    *out = *std::move(value);
    return absl::OkStatus();
  }

  // Copies every infeed of the step that `feeds` feed to the device on the prefetch's stream.
  absl::Status prefetch_infeeds(const GpuExecutable& exe, const std::vector<Feeds>& feeds) {
    std::deque<HostTensor> rounded;  // bf16 infeeds' rounded batches, kept until copied
    std::vector<gpu::InfeedPrefetch::Batch> batches;
    for (int id : exe.infeeds()) {
      const Node& n = exe.graph().node(id);
      gpu::InfeedPrefetch::Batch batch{id, value_bytes(n.shape), {}};
      for (const Feeds& replica : feeds) {
        const HostTensor& t = infeed_value(n, replica.at(n.attrs.name), rounded.emplace_back());
        auto host = host_values(t, str_cat("infeed '", n.attrs.name, "'"));
        if (!host.ok()) return host.status();
        batch.replicas.push_back(*host);
      }
      batches.push_back(std::move(batch));
    }
    return prefetch_->copy(batches);
  }

  // cross_replica_sum over several replicas: one copy, which every replica shares.
  static absl::Status ring_sum(const Node& n, const Value& in, size_t replicas, Value* out) {
    auto value = allocate_value(value_bytes(n.shape), 1);
    if (!value.ok()) return value.status();
    if (absl::Status st =
            gpu::cuda_status(gpu::launch_ring_sum(in.at(0), in.stride, replicas,
                                                  static_cast<uint64_t>(n.shape.elements()),
                                                  n.dtype == DType::kS32, value->buffer->data()),
                             "launching the ring sum");
        !st.ok()) {
      return st;
    }
    *out = *std::move(value);
    return absl::OkStatus();
  }

  std::unique_ptr<gpu::Cublas> cublas_;
  // The next step's infeeds, copied while a step runs. A backend runs one loop at a time (as
  // its cuBLAS handle does).
  std::unique_ptr<gpu::InfeedPrefetch> prefetch_ = std::make_unique<gpu::InfeedPrefetch>();
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
