// tpusim allreduce: one all-reduce over every core of a simulated slice, timed against the
// bandwidth-optimal bound for its algorithm (sim/net/collective_bound.h).
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/strings.h"
#include "configs/loader.h"
#include "sim/all_reduce_run.h"
#include "sim/isa/ops.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"
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

// allreduce's options, --chunk-bytes bound to `chunk`.
po::options_description allreduce_options(uint64_t* chunk) {
  po::options_description options("options");
  add_config_flag(options);
  options.add_options()("bytes", po::value<std::string>()->required(),
                        "bytes each core contributes (e.g. 268435456, 256MiB, 100MB)")(
      "algorithm", po::value<std::string>()->default_value("ring"),
      "ring | bidir_ring | torus2d | torus")(
      "chunk-bytes", po::value<uint64_t>(chunk)->default_value(1 << 20),
      "pipelining granule: data moves in chunks of this size")(
      "trace", po::value<std::string>(),
      "write a trace (.pftrace: Perfetto, .json: Chrome): each core's ici track and every "
      "link's utilization and HBM bandwidth counters");
  add_timing_only_flag(options);
  add_json_flag(options);
  return options;
}

constexpr char kAllreduceUsage[] =
    "usage: tpusim allreduce --bytes N [--config SLICE]\n"
    "                        [--algorithm ring|bidir_ring|torus2d|torus] [--chunk-bytes N]\n"
    "                        [--timing-only] [--trace FILE] [--json]\n\n"
    "Sums N bytes of f32 from every core of the slice into every core over the simulated\n"
    "interconnect, and compares the time with the algorithm's bandwidth-optimal bound.\n"
    "Unless --timing-only, checks that every core ends with bitwise the same sum and how far\n"
    "it is from a float64 sum.\n";

// The all-reduce the flags ask for, or why not.
Refused request_from(const po::variables_map& vm, uint64_t chunk, sim::AllReduceRequest* request) {
  auto bytes = parse_bytes("--bytes", vm["bytes"].as<std::string>(), 4);
  if (!bytes.ok()) return usage_problem(bytes.status());
  auto algorithm = parse_algorithm(vm["algorithm"].as<std::string>());
  if (!algorithm.ok()) return usage_problem(algorithm.status());
  if (chunk < 4 || chunk % 4 != 0)
    return usage_problem("--chunk-bytes must be a positive multiple of 4");
  request->bytes = *bytes;
  request->algorithm = *algorithm;
  request->chunk_bytes = chunk;
  request->timing_only = vm["timing-only"].as<bool>();
  return std::nullopt;
}

// Refuses a run whose values would not fit in the host's memory.
Refused check_host_memory(const config::SliceSpec& s, const sim::AllReduceRequest& request) {
  const std::string problem = sim::all_reduce_host_memory_problem(s, request);
  if (problem.empty()) return std::nullopt;
  return failure_of(str_cat("--bytes ", request.bytes, ": ", problem, "; add --timing-only"));
}

// The run's figures as --json prints them.
nlohmann::ordered_json allreduce_report(const config::SliceSpec& s,
                                        const sim::AllReduceRequest& request,
                                        const sim::AllReduceResult& run,
                                        const traces::TraceWriter* trace,
                                        const po::variables_map& vm) {
  const double seconds = run.seconds;
  const sim::CollectiveBound& bound = run.bound;
  nlohmann::ordered_json out = {
      {"config", s.name},
      {"algorithm", sim::collective_algorithm_name(request.algorithm)},
      {"bytes", request.bytes},
      {"cores", s.cores},
      {"chunk_bytes", request.chunk_bytes},
      {"timing_only", request.timing_only},
      {"cycles", run.cycles},
      {"seconds", seconds},
      {"algorithm_bandwidth_bytes_per_s", static_cast<double>(request.bytes) / seconds},
      {"bound_seconds", bound.seconds},
      {"bound_latency_seconds", bound.latency_seconds},
      {"bound_bandwidth_seconds", bound.bandwidth_seconds},
      {"ratio_to_bound", bound.seconds / seconds},
      {"link_floor_seconds", run.link_floor_seconds},
      {"chunk_transfers", run.chunk_transfers},
      {"link_bytes", run.link_bytes},
      {"busiest_link_busy_seconds", run.busiest_link_busy_seconds},
      {"host_seconds", run.host_seconds},
  };
  if (trace != nullptr) {
    out["trace"] = vm["trace"].as<std::string>();
    out["trace_bytes"] = trace->bytes_written();
  }
  if (run.numerics) {
    out["bitwise_identical_on_every_core"] = run.numerics->bitwise_identical_on_every_core;
    out["max_abs_error_vs_f64_sum"] = run.numerics->max_abs_error_vs_f64_sum;
  }
  return out;
}

void print_allreduce(const config::SliceSpec& s, const sim::AllReduceRequest& request,
                     const sim::AllReduceResult& run, const traces::TraceWriter* trace,
                     const std::string& trace_path) {
  const double seconds = run.seconds;
  const sim::CollectiveBound& bound = run.bound;
  const uint64_t bytes = request.bytes;
  std::cout << fmt::format(
      "all-reduce of {} bytes over {} cores of {} ({}, {} KiB chunks)\n"
      "  simulated   {:.3f} us ({} cycles), {:.2f} GB/s algorithm bandwidth\n"
      "  bound       {:.3f} us = {:.3f} latency + {:.3f} bandwidth; ratio to bound {:.3f}\n"
      "  link floor  {:.3f} us (the busiest link's bytes at its bandwidth)\n"
      "  transfers   {} chunks, busiest link busy {:.3f} us\n"
      "  host time   {:.3f} s\n",
      bytes, s.cores, s.name, sim::collective_algorithm_name(request.algorithm),
      request.chunk_bytes / 1024, seconds * 1e6, run.cycles, bytes / seconds / 1e9,
      bound.seconds * 1e6, bound.latency_seconds * 1e6, bound.bandwidth_seconds * 1e6,
      bound.seconds / seconds, run.link_floor_seconds * 1e6, run.chunk_transfers,
      run.busiest_link_busy_seconds * 1e6, run.host_seconds);
  if (run.numerics) {
    std::cout << fmt::format(
        "  numerics    every core bitwise identical: {}; max |error| vs "
        "float64 sum {:.3g}\n",
        run.numerics->bitwise_identical_on_every_core ? "yes" : "NO",
        run.numerics->max_abs_error_vs_f64_sum);
  }
  if (trace != nullptr) {
    const double kb = static_cast<double>(trace->bytes_written()) / 1e3;
    std::cout << fmt::format(
        "  trace       {} ({}; ui.perfetto.dev)\n", trace_path,
        kb < 1e3 ? fmt::format("{:.0f} KB", kb) : fmt::format("{:.1f} MB", kb / 1e3));
  }
}

}  // namespace

int run_allreduce(const std::vector<std::string>& args) {
  uint64_t chunk = 0;
  const po::options_description options = allreduce_options(&chunk);
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kAllreduceUsage, &vm); rc >= 0) return rc;
  sim::AllReduceRequest request;
  if (Refused r = request_from(vm, chunk, &request)) return refuse(*r, kAllreduceUsage);
  auto slice = config::load_slice(vm["config"].as<std::string>());
  if (!slice.ok()) return failure(std::string(slice.status().message()));
  if (Refused r = check_host_memory(**slice, request)) return refuse(*r, kAllreduceUsage);
  std::unique_ptr<traces::TraceWriter> trace;
  if (vm.count("trace")) {
    auto writer = traces::open_trace_writer(vm["trace"].as<std::string>());
    if (!writer.ok()) return failure(std::string(writer.status().message()));
    trace = *std::move(writer);
  }
  auto run = sim::run_all_reduce(*slice, request, trace.get());
  if (!run.ok()) return failure(std::string(run.status().message()));
  if (trace != nullptr) {
    if (absl::Status st = trace->close(); !st.ok()) return failure(std::string(st.message()));
  }
  const nlohmann::ordered_json out = allreduce_report(**slice, request, *run, trace.get(), vm);
  if (vm["json"].as<bool>()) {
    std::cout << json_text(out) << "\n";
    return kOk;
  }
  print_allreduce(**slice, request, *run, trace.get(),
                  vm.count("trace") ? vm["trace"].as<std::string>() : "");
  return kOk;
}

}  // namespace tpusim::cli
