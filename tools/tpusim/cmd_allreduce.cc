// tpusim allreduce: one all-reduce over every core of a simulated slice, timed against the
// bandwidth-optimal bound for its algorithm (sim/net/collective_bound.h).
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "configs/loader.h"
#include "sim/isa/builder.h"
#include "sim/isa/ops.h"
#include "sim/net/collective_bound.h"
#include "sim/net/ring_plan.h"
#include "sim/net/topology.h"
#include "sim/numerics/random.h"
#include "sim/system.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "traces/trace_writer.h"

namespace tpusim::cli {
namespace {

namespace po = boost::program_options;

absl::StatusOr<isa::Collective::Algorithm> parse_algorithm(const std::string& name) {
  isa::Collective::Algorithm algorithm = isa::Collective::RING;
  if (sim::collective_algorithm_named(name, &algorithm)) return algorithm;
  return absl::InvalidArgumentError(
      str_cat("--algorithm '", name, "' is not one of ring, bidir_ring, torus2d, torus"));
}

}  // namespace

int run_allreduce(const std::vector<std::string>& args) {
  po::options_description options("options");
  uint64_t chunk = 0;
  options.add_options()("config", po::value<std::string>()->default_value("v3-8"),
                        "slice config file or built-in name")(
      "bytes", po::value<std::string>()->required(),
      "bytes each core contributes (e.g. 268435456, 256MiB, 100MB)")(
      "algorithm", po::value<std::string>()->default_value("ring"),
      "ring | bidir_ring | torus2d | torus")(
      "chunk-bytes", po::value<uint64_t>(&chunk)->default_value(1 << 20),
      "pipelining granule: data moves in chunks of this size")(
      "timing-only", po::bool_switch(), "time only: no values (needed for big slices)")(
      "trace", po::value<std::string>(),
      "write a trace (.pftrace: Perfetto, .json: Chrome): each core's ici track and every "
      "link's utilization and HBM bandwidth counters")("json", po::bool_switch(), "print JSON");
  const std::string usage =
      "usage: tpusim allreduce --bytes N [--config SLICE]\n"
      "                        [--algorithm ring|bidir_ring|torus2d|torus] [--chunk-bytes N]\n"
      "                        [--timing-only] [--trace FILE] [--json]\n\n"
      "Sums N bytes of f32 from every core of the slice into every core over the simulated\n"
      "interconnect, and compares the time with the algorithm's bandwidth-optimal bound.\n"
      "Unless --timing-only, checks that every core ends with bitwise the same sum and how far\n"
      "it is from a float64 sum.\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  auto bytes = parse_bytes("--bytes", vm["bytes"].as<std::string>(), 4);
  if (!bytes.ok()) return usage_error(std::string(bytes.status().message()), usage);
  auto algorithm = parse_algorithm(vm["algorithm"].as<std::string>());
  if (!algorithm.ok()) return usage_error(std::string(algorithm.status().message()), usage);
  if (chunk < 4 || chunk % 4 != 0)
    return usage_error("--chunk-bytes must be a positive multiple of 4", usage);
  const bool timing_only = vm["timing-only"].as<bool>();

  auto slice = config::load_slice(vm["config"].as<std::string>());
  if (!slice.ok()) return failure(std::string(slice.status().message()));
  const config::SliceSpec& s = **slice;
  // Each core owns an equal share of its chip's HBM; its buffers start at the share's base.
  const sim::CoreMap cores(s);
  const uint64_t share = sim::hbm_share(s, sim::CoreId{0}).bytes;
  auto base_of = [&](uint32_t core) { return sim::hbm_share(s, sim::CoreId{core}).base; };
  if (2 * *bytes > share) {
    return failure(fmt::format("{} bytes in and out need {} bytes of a core's HBM share of {}",
                               *bytes, 2 * *bytes, share));
  }
  const double host_bytes = 3.0 * static_cast<double>(*bytes) * s.cores;
  if (!timing_only && host_bytes > 8.0 * (1ull << 30)) {
    return failure(fmt::format(
        "computing the values takes about {:.0f} GiB of host memory ({} cores x {} bytes, in, "
        "out and a copy); add --timing-only",
        host_bytes / (1ull << 30), s.cores, *bytes));
  }
  const uint64_t elements = *bytes / 4;
  isa::Program program;
  program.set_name("allreduce");
  for (uint32_t core = 0; core < s.cores; ++core) {
    sim::CoreBuilder b(&program, core);
    const uint64_t base = base_of(core);
    b.collective(isa::Collective::ALL_REDUCE, *algorithm, base, base + *bytes, elements)
        .instruction()
        .mutable_collective()
        ->set_chunk_bytes(chunk);
    b.halt();
  }
  std::unique_ptr<traces::TraceWriter> trace;
  if (vm.count("trace")) {
    auto writer = traces::open_trace_writer(vm["trace"].as<std::string>());
    if (!writer.ok()) return failure(std::string(writer.status().message()));
    trace = *std::move(writer);
  }
  auto system = sim::System::create(*slice, {"tpu", timing_only, trace.get()});
  if (!system.ok()) return failure(std::string(system.status().message()));
  std::vector<double> expected;
  if (!timing_only) {
    expected.assign(elements, 0.0);
    std::vector<float> values(elements);
    for (uint32_t core = 0; core < s.cores; ++core) {
      for (uint64_t i = 0; i < elements; ++i) {
        values[i] = sim::counter_uniform(7, core, i) - 0.5f;
        expected[i] += values[i];
      }
      const sim::ChipId chip = cores.chip_of(sim::CoreId{core});
      if (auto st = (*system)->write_hbm(chip, base_of(core), values.data(), *bytes); !st.ok())
        return failure(std::string(st.message()));
    }
  }
  const auto host_start = std::chrono::steady_clock::now();
  auto run = (*system)->run(program);
  const double host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  if (!run.ok()) return failure(std::string(run.status().message()));
  if (trace != nullptr) {
    if (absl::Status st = trace->close(); !st.ok()) return failure(std::string(st.message()));
  }
  const double seconds = static_cast<double>(run->cycles()) / (*system)->clock().frequency_hz();
  const sim::Topology topology(s);
  const sim::CollectiveBound bound =
      sim::all_reduce_bound(topology, *algorithm, static_cast<double>(*bytes));
  const isa::Collective& c = program.cores(0).instructions(0).collective();
  const double floor = sim::link_floor_seconds(
      topology, sim::plan_collective(c, sim::collective_members(c, topology), topology));
  const auto& stats = (*system)->stats();
  nlohmann::ordered_json out = {
      {"config", s.name},
      {"algorithm", sim::collective_algorithm_name(*algorithm)},
      {"bytes", *bytes},
      {"cores", s.cores},
      {"chunk_bytes", chunk},
      {"timing_only", timing_only},
      {"cycles", run->cycles()},
      {"seconds", seconds},
      {"algorithm_bandwidth_bytes_per_s", static_cast<double>(*bytes) / seconds},
      {"bound_seconds", bound.seconds},
      {"bound_latency_seconds", bound.latency_seconds},
      {"bound_bandwidth_seconds", bound.bandwidth_seconds},
      {"ratio_to_bound", bound.seconds / seconds},
      {"link_floor_seconds", floor},
      {"chunk_transfers", stats.value("interconnect.chunk_transfers")},
      {"link_bytes", stats.value("interconnect.bytes")},
      {"busiest_link_busy_seconds",
       stats.value("interconnect.busiest_link_busy_cycles") / (*system)->clock().frequency_hz()},
      {"host_seconds", host_seconds},
  };
  if (trace != nullptr) {
    out["trace"] = vm["trace"].as<std::string>();
    out["trace_bytes"] = trace->bytes_written();
  }
  if (!timing_only) {
    std::vector<float> first(elements), other(elements);
    bool identical = true;
    double max_error = 0;
    for (uint32_t core = 0; core < s.cores; ++core) {
      auto st = (*system)->read_hbm(cores.chip_of(sim::CoreId{core}), base_of(core) + *bytes,
                                    core == 0 ? first.data() : other.data(), *bytes);
      if (!st.ok()) return failure(std::string(st.message()));
      if (core > 0 && std::memcmp(first.data(), other.data(), *bytes) != 0) identical = false;
    }
    for (uint64_t i = 0; i < elements; ++i)
      max_error = std::max(max_error, std::abs(first[i] - expected[i]));
    out["bitwise_identical_on_every_core"] = identical;
    out["max_abs_error_vs_f64_sum"] = max_error;
  }
  if (vm["json"].as<bool>()) {
    std::cout << out.dump(2) << "\n";
    return kOk;
  }
  std::cout << fmt::format(
      "all-reduce of {} bytes over {} cores of {} ({}, {} KiB chunks)\n"
      "  simulated   {:.3f} us ({} cycles), {:.2f} GB/s algorithm bandwidth\n"
      "  bound       {:.3f} us = {:.3f} latency + {:.3f} bandwidth; ratio to bound {:.3f}\n"
      "  link floor  {:.3f} us (the busiest link's bytes at its bandwidth)\n"
      "  transfers   {} chunks, busiest link busy {:.3f} us\n"
      "  host time   {:.3f} s\n",
      *bytes, s.cores, s.name, out["algorithm"].get<std::string>(), chunk / 1024, seconds * 1e6,
      run->cycles(), *bytes / seconds / 1e9, bound.seconds * 1e6, bound.latency_seconds * 1e6,
      bound.bandwidth_seconds * 1e6, bound.seconds / seconds, floor * 1e6,
      out["chunk_transfers"].get<double>(), out["busiest_link_busy_seconds"].get<double>() * 1e6,
      host_seconds);
  if (!timing_only) {
    std::cout << fmt::format(
        "  numerics    every core bitwise identical: {}; max |error| vs "
        "float64 sum {:.3g}\n",
        out["bitwise_identical_on_every_core"].get<bool>() ? "yes" : "NO",
        out["max_abs_error_vs_f64_sum"].get<double>());
  }
  if (trace != nullptr) {
    const double kb = static_cast<double>(trace->bytes_written()) / 1e3;
    std::cout << fmt::format(
        "  trace       {} ({}; ui.perfetto.dev)\n", out["trace"].get<std::string>(),
        kb < 1e3 ? fmt::format("{:.0f} KB", kb) : fmt::format("{:.1f} MB", kb / 1e3));
  }
  return kOk;
}

}  // namespace tpusim::cli
