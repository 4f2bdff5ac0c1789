#include "sim/all_reduce_run.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "common/host_budget.h"
#include "sim/core_map.h"
#include "sim/isa/builder.h"
#include "sim/net/ring_plan.h"
#include "sim/net/topology.h"
#include "sim/numerics/random.h"
#include "sim/system.h"

namespace tpusim::sim {
namespace {

uint64_t base_of(const config::SliceSpec& slice, uint32_t core) {
  return hbm_share(slice, CoreId{core}).base;
}

// Every core's input, counter_uniform(7, core, i) - 0.5, written to its share; returns their
// float64 sum per element.
absl::StatusOr<std::vector<double>> write_inputs(System& system, const AllReduceRequest& request) {
  const config::SliceSpec& s = system.slice();
  const CoreMap cores(s);
  const uint64_t elements = request.bytes / 4;
  std::vector<double> expected(elements, 0.0);
  std::vector<float> values(elements);
  for (uint32_t core = 0; core < s.cores; ++core) {
    for (uint64_t i = 0; i < elements; ++i) {
      values[i] = counter_uniform(7, core, i) - 0.5f;
      expected[i] += values[i];
    }
    const ChipId chip = cores.chip_of(CoreId{core});
    if (absl::Status st = system.write_hbm(chip, base_of(s, core), values.data(), request.bytes);
        !st.ok())
      return st;
  }
  return expected;
}

// Reads every core's result: whether they are bitwise the same, and core 0's distance from the
// float64 sum.
absl::StatusOr<AllReduceNumerics> check_results(System& system, const AllReduceRequest& request,
                                                const std::vector<double>& expected) {
  const config::SliceSpec& s = system.slice();
  const CoreMap cores(s);
  const uint64_t elements = request.bytes / 4;
  std::vector<float> first(elements), other(elements);
  AllReduceNumerics numerics;
  numerics.bitwise_identical_on_every_core = true;
  for (uint32_t core = 0; core < s.cores; ++core) {
    absl::Status st = system.read_hbm(cores.chip_of(CoreId{core}), base_of(s, core) + request.bytes,
                                      core == 0 ? first.data() : other.data(), request.bytes);
    if (!st.ok()) return st;
    if (core > 0 && std::memcmp(first.data(), other.data(), request.bytes) != 0)
      numerics.bitwise_identical_on_every_core = false;
  }
  for (uint64_t i = 0; i < elements; ++i) {
    numerics.max_abs_error_vs_f64_sum =
        std::max(numerics.max_abs_error_vs_f64_sum, std::abs(first[i] - expected[i]));
  }
  return numerics;
}

}  // namespace

uint64_t all_reduce_host_bytes(const config::SliceSpec& slice, const AllReduceRequest& request) {
  const uint64_t per_core = saturating_product(saturating_product(request.bytes, 4), slice.cores);
  return saturating_sum(per_core, saturating_product(request.bytes, 5));
}

std::string all_reduce_host_memory_problem(const config::SliceSpec& slice,
                                           const AllReduceRequest& request) {
  if (request.timing_only) return "";
  const absl::Status s = check_host_memory(
      fmt::format("computing the values of {} bytes on each of {} cores (in, out and the "
                  "interconnect's chunks in the simulated HBM, and the host's copies)",
                  request.bytes, slice.cores),
      all_reduce_host_bytes(slice, request));
  return s.ok() ? "" : std::string(s.message());
}

absl::Status check_all_reduce(const config::SliceSpec& slice, const AllReduceRequest& request) {
  if (request.bytes == 0 || request.bytes % 4 != 0) {
    return absl::InvalidArgumentError(
        fmt::format("an all-reduce of {} bytes: each core's bytes must be a positive multiple "
                    "of 4 (f32 elements)",
                    request.bytes));
  }
  if (request.chunk_bytes < 4 || request.chunk_bytes % 4 != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "chunks of {} bytes: the chunk must be a positive multiple of 4", request.chunk_bytes));
  }
  const uint64_t share = hbm_share(slice, CoreId{0}).bytes;
  if (2 * request.bytes > share) {
    return absl::InvalidArgumentError(
        fmt::format("{} bytes in and out need {} bytes of a core's HBM share of {}", request.bytes,
                    2 * request.bytes, share));
  }
  if (std::string problem = all_reduce_host_memory_problem(slice, request); !problem.empty())
    return absl::InvalidArgumentError(problem + "; run timing-only");
  return absl::OkStatus();
}

isa::Program all_reduce_program(const config::SliceSpec& slice, const AllReduceRequest& request) {
  isa::Program program;
  program.set_name("allreduce");
  for (uint32_t core = 0; core < slice.cores; ++core) {
    CoreBuilder b(&program, core);
    const uint64_t base = base_of(slice, core);
    b.collective(isa::Collective::ALL_REDUCE, request.algorithm, base, base + request.bytes,
                 request.bytes / 4)
        .instruction()
        .mutable_collective()
        ->set_chunk_bytes(request.chunk_bytes);
    b.halt();
  }
  return program;
}

absl::StatusOr<AllReduceResult> run_all_reduce(std::shared_ptr<const config::SliceSpec> slice,
                                               const AllReduceRequest& request,
                                               traces::Sink* sink) {
  if (absl::Status st = check_all_reduce(*slice, request); !st.ok()) return st;
  const isa::Program program = all_reduce_program(*slice, request);
  auto system = System::create(slice, {MxuPolicy::kTpu, request.timing_only, sink});
  if (!system.ok()) return system.status();
  std::vector<double> expected;
  if (!request.timing_only) {
    auto sums = write_inputs(**system, request);
    if (!sums.ok()) return sums.status();
    expected = *std::move(sums);
  }
  const auto host_start = std::chrono::steady_clock::now();
  auto run = (*system)->run(program);
  AllReduceResult result;
  result.host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  if (!run.ok()) return run.status();
  const double hz = (*system)->clock().frequency_hz();
  result.cycles = run->cycles();
  result.seconds = static_cast<double>(run->cycles()) / hz;
  const Topology topology(*slice);
  result.bound = all_reduce_bound(topology, request.algorithm, static_cast<double>(request.bytes));
  const isa::Collective& c = program.cores(0).instructions(0).collective();
  result.link_floor_seconds =
      link_floor_seconds(topology, plan_collective(c, collective_members(c, topology), topology));
  const auto& stats = (*system)->stats();
  result.chunk_transfers = stats.value("interconnect.chunk_transfers");
  result.link_bytes = stats.value("interconnect.bytes");
  result.busiest_link_busy_seconds = stats.value("interconnect.busiest_link_busy_cycles") / hz;
  if (!request.timing_only) {
    auto numerics = check_results(**system, request, expected);
    if (!numerics.ok()) return numerics.status();
    result.numerics = *numerics;
  }
  return result;
}

}  // namespace tpusim::sim
