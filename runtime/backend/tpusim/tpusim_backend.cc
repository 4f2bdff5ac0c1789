#include "runtime/backend/tpusim/tpusim_backend.h"

#include <cstring>

#include "common/strings.h"
#include "configs/loader.h"
#include "runtime/backend/tpusim/compiler.h"
#include "sim/system.h"

namespace tpusim::runtime {
namespace {

using tpusim_backend::CompiledStep;
using tpusim_backend::Transfer;

// The process's System (SystemC elaborates once).
absl::StatusOr<sim::System*> shared_system(const std::string& slice_name) {
  static std::unique_ptr<sim::System> system;
  static std::string built_for;
  if (system != nullptr) {
    if (built_for != slice_name) {
      return absl::FailedPreconditionError(str_cat(
          "the tpusim backend of this process simulates ", built_for,
          "; SystemC elaborates once per process, so ", slice_name, " needs a process of its own"));
    }
    return system.get();
  }
  auto slice = config::load_slice(slice_name);
  if (!slice.ok()) return slice.status();
  auto made = sim::System::create(*slice, {"tpu", false, nullptr});
  if (!made.ok()) return made.status();
  system = *std::move(made);
  built_for = slice_name;
  return system.get();
}

class TpusimExecutable final : public Executable {
 public:
  TpusimExecutable(Graph graph, CompiledStep step)
      : graph_(std::move(graph)), step_(std::move(step)) {}
  const Graph& graph() const override { return graph_; }
  CompiledStep& step() { return step_; }

 private:
  Graph graph_;
  CompiledStep step_;
};

std::vector<uint8_t> bytes_of(const HostTensor& t) {
  std::vector<uint8_t> out(static_cast<size_t>(t.elements()) * 4);
  if (t.dtype == DType::kS32) {
    std::memcpy(out.data(), t.i.data(), out.size());
  } else {
    std::memcpy(out.data(), t.f.data(), out.size());
  }
  return out;
}

class TpusimBackend final : public Backend {
 public:
  explicit TpusimBackend(std::string slice) : slice_(std::move(slice)) {}
  std::string name() const override { return "tpusim"; }

  absl::StatusOr<std::unique_ptr<Executable>> compile(const Graph& graph,
                                                      const CompileOptions& options) override {
    if (options.precision != "fp32" && options.precision != "mxu") {
      return absl::InvalidArgumentError(
          str_cat("tpusim backend: unknown precision '", options.precision, "'"));
    }
    auto system = shared_system(slice_);
    if (!system.ok()) return system.status();
    auto step = tpusim_backend::compile_graph(graph, (*system)->slice(), 0);
    if (!step.ok()) return step.status();
    return std::make_unique<TpusimExecutable>(graph, *std::move(step));
  }

  absl::StatusOr<std::vector<Outputs>> run(Executable& executable, Variables& variables,
                                           const std::vector<Feeds>& feeds,
                                           uint64_t first_step) override {
    auto& exe = static_cast<TpusimExecutable&>(executable);
    const Graph& g = exe.graph();
    CompiledStep& step = exe.step();
    auto system_or = shared_system(slice_);
    if (!system_or.ok()) return system_or.status();
    sim::System& system = **system_or;
    if (feeds.empty()) return std::vector<Outputs>{};
    for (size_t s = 0; s < feeds.size(); ++s) {
      if (absl::Status st = check_inputs(g, variables, feeds[s]); !st.ok()) {
        return absl::Status(st.code(), str_cat("step ", first_step + s, ": ", st.message()));
      }
    }
    // Persistent state into HBM, then every step's batches to the host link.
    for (const auto& [address, values] : step.constants) {
      if (auto st = system.write_hbm(0, address, values.data(), values.size() * 4); !st.ok())
        return st;
    }
    for (int id : g.variables()) {
      const std::vector<uint8_t> data = bytes_of(variables.at(g.node(id).attrs.name));
      if (auto st = system.write_hbm(0, step.plan.address[static_cast<size_t>(id)], data.data(),
                                     data.size());
          !st.ok()) {
        return st;
      }
    }
    const uint64_t now = system.now_cycle();
    for (const Feeds& f : feeds) {
      for (const Transfer& t : step.infeeds) {
        const std::vector<uint8_t> data = bytes_of(f.at(t.name));
        const uint64_t row_bytes = uint64_t{t.cols} * 4;
        for (uint64_t at = 0; at < data.size(); at += t.rows_per_entry * row_bytes) {
          sim::FeedEntry entry;
          entry.bytes = std::min<uint64_t>(t.rows_per_entry * row_bytes, data.size() - at);
          entry.data.assign(data.begin() + static_cast<long>(at),
                            data.begin() + static_cast<long>(at + entry.bytes));
          if (auto st = system.send_infeed(0, std::move(entry), now); !st.ok()) return st;
        }
      }
    }
    isa::Program program = step.program;
    program.set_step_base(first_step);
    program.mutable_cores(0)
        ->mutable_instructions(step.loop_instruction)
        ->mutable_loop()
        ->set_count(static_cast<uint32_t>(feeds.size()));
    auto run = system.run(program);
    if (!run.ok()) return run.status();
    last_cycles_ = run->cycles();
    // Outfeed entries come back in program order: step by step, output by output.
    std::vector<sim::FeedEntry> entries = system.take_outfeed(0);
    size_t next = 0;
    std::vector<Outputs> results;
    for (size_t s = 0; s < feeds.size(); ++s) {
      Outputs outputs;
      for (const Transfer& t : step.outputs) {
        HostTensor value = HostTensor::zeros(t.dtype, t.shape);
        std::vector<uint8_t> data;
        const uint64_t total = static_cast<uint64_t>(t.shape.elements()) * 4;
        while (data.size() < total) {
          if (next >= entries.size())
            return absl::InternalError("tpusim backend: the outfeed ended early");
          data.insert(data.end(), entries[next].data.begin(), entries[next].data.end());
          ++next;
        }
        if (t.dtype == DType::kS32) {
          std::memcpy(value.i.data(), data.data(), total);
        } else {
          std::memcpy(value.f.data(), data.data(), total);
        }
        outputs[t.name] = std::move(value);
      }
      results.push_back(std::move(outputs));
    }
    for (int id : g.variables()) {
      HostTensor& v = variables[g.node(id).attrs.name];
      void* dst =
          v.dtype == DType::kS32 ? static_cast<void*>(v.i.data()) : static_cast<void*>(v.f.data());
      if (auto st = system.read_hbm(0, step.plan.address[static_cast<size_t>(id)], dst,
                                    static_cast<uint64_t>(v.elements()) * 4);
          !st.ok()) {
        return st;
      }
    }
    return results;
  }

 private:
  std::string slice_;
  uint64_t last_cycles_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_tpusim_backend(const std::string& slice) {
  return std::make_unique<TpusimBackend>(slice);
}

}  // namespace tpusim::runtime
