// tpusim matmul: one GEMM on one core of a simulated slice, lowered by runtime/lowering/gemm.h.
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "configs/loader.h"
#include "runtime/backend/cpu/cpu_backend.h"
#include "runtime/lowering/gemm.h"
#include "sim/isa/dump.h"
#include "sim/isa/ops.h"
#include "sim/numerics/bf16.h"
#include "sim/numerics/reference.h"
#include "sim/system.h"
#include "sim/timing/mxu_policy.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"
#include "tools/tpusim/refusal.h"
#include "tools/tpusim/shared_flags.h"

namespace tpusim::cli {
namespace {

namespace po = boost::program_options;
using Matrix = sim::MatrixF;

absl::Status write_matrix(sim::System& system, sim::ChipId chip, uint64_t address, const Matrix& m,
                          isa::DType dtype) {
  if (dtype == isa::F32) return system.write_hbm(chip, address, m.data(), sizeof(float) * m.size());
  std::vector<uint16_t> half(static_cast<size_t>(m.size()));
  for (size_t i = 0; i < half.size(); ++i) half[i] = sim::f32_to_bf16_bits(m.data()[i]);
  return system.write_hbm(chip, address, half.data(), 2 * half.size());
}

// The flags matmul binds to numbers. M, K and N are read as signed so that "-3" is an error, not
// a wrapped-around huge unsigned value.
struct MatmulFlags {
  int64_t m = 0, k = 0, n = 0;
  uint32_t core = 0, seed = 1;
};

// matmul's options, the numbers bound to `f`.
po::options_description matmul_options(MatmulFlags* f) {
  po::options_description options("options");
  add_config_flag(options);
  options.add_options()("m", po::value<int64_t>(&f->m)->required(), "rows of A and C")(
      "k", po::value<int64_t>(&f->k)->required(), "columns of A, rows of B")(
      "n", po::value<int64_t>(&f->n)->required(), "columns of B and C")(
      "precision", po::value<std::string>()->default_value("default"),
      "default | high | highest (1, 3, 6 bf16 passes)")(
      "input-dtype", po::value<std::string>()->default_value("f32"),
      "dtype of A and B in HBM: f32 | bf16")("core",
                                             po::value<uint32_t>(&f->core)->default_value(0),
                                             "global index of the core that runs it")(
      "seed", po::value<uint32_t>(&f->seed)->default_value(1), "seed of the random inputs")(
      "tiles", po::value<std::string>(),
      "TMxTKxTN: the GEMM's tiles instead of the ones the compiler chooses")(
      "stats", po::value<std::string>(),
      "write the full statistics tree (values, units, descriptions) as JSON to FILE");
  add_mxu_policy_flag(options);
  add_timing_only_flag(options);
  add_dump_flag(options);
  add_json_flag(options);
  return options;
}

constexpr char kMatmulUsage[] =
    "usage: tpusim matmul --m M --k K --n N [--config SLICE] [--precision default|high|highest]\n"
    "                     [--tiles TMxTKxTN] [--mxu-policy tpu|scalesim_ws] [--timing-only]\n"
    "                     [--json]\n\n"
    "Runs C = A x B on one core: A (M x K) and B (K x N) random in HBM, C (f32) written back to\n"
    "HBM, tiled to fit VMEM with DMA double-buffered against MXU work. Reports cycles, TFLOPS,\n"
    "MXU utilisation, HBM traffic, the compiler's estimate of its tiles and the roofline bound,\n"
    "and (unless --timing-only) the error against references with bf16-rounded and with plain\n"
    "fp32 inputs.\n";

// The GEMM the flags ask for and where it runs.
struct MatmulJob {
  std::shared_ptr<const config::SliceSpec> slice;
  uint32_t m = 0, k = 0, n = 0, core = 0, seed = 1;
  sim::ChipId chip;
  isa::Precision precision{};
  sim::MxuPolicy policy = sim::MxuPolicy::kTpu;
  isa::DType dtype = isa::F32;
  bool timing_only = false;
  std::optional<runtime::GemmTiling> tiling;  // --tiles
};

// "TMxTKxTN" as a tiling, or nullopt.
std::optional<runtime::GemmTiling> parse_tiles(const std::string& text) {
  runtime::GemmTiling t;
  char x1 = 0, x2 = 0;
  std::istringstream in(text);
  if (text.find_first_not_of("0123456789x") != std::string::npos ||
      !(in >> t.tm >> x1 >> t.tk >> x2 >> t.tn) || x1 != 'x' || x2 != 'x' || in.peek() != EOF ||
      t.tm == 0 || t.tk == 0 || t.tn == 0) {
    return std::nullopt;
  }
  return t;
}

// The job from the flags, or why not.
Refused matmul_job_from(const po::variables_map& vm, const MatmulFlags& f, MatmulJob* job) {
  auto precision = parse_precision(vm["precision"].as<std::string>());
  if (!precision.ok()) return usage_problem(precision.status());
  job->precision = *precision;
  auto policy = parse_mxu_policy(vm["mxu-policy"].as<std::string>());
  if (!policy.ok()) return usage_problem(policy.status());
  job->policy = *policy;
  auto dtype = kTensorDTypes.parse(vm["input-dtype"].as<std::string>());
  if (!dtype) return usage_problem("--input-dtype must be f32 or bf16");
  job->dtype = *dtype;
  for (int64_t v : {f.m, f.k, f.n}) {
    if (v < 1 || v > (int64_t{1} << 30))
      return usage_problem("--m, --k and --n must be in [1, 2^30]");
  }
  job->m = static_cast<uint32_t>(f.m);
  job->k = static_cast<uint32_t>(f.k);
  job->n = static_cast<uint32_t>(f.n);
  job->core = f.core;
  job->seed = f.seed;
  job->timing_only = vm["timing-only"].as<bool>();
  if (vm.count("tiles") > 0) {
    job->tiling = parse_tiles(vm["tiles"].as<std::string>());
    if (!job->tiling)
      return usage_problem("--tiles must be TMxTKxTN, three positive numbers (e.g. 1024x512x512)");
  }
  auto slice = config::load_slice(vm["config"].as<std::string>());
  if (!slice.ok()) return failure_of(slice.status());
  job->slice = *slice;
  if (f.core >= job->slice->cores)
    return usage_problem("--core " + std::to_string(f.core) + " is not a core of the slice");
  job->chip = sim::CoreMap(*job->slice).chip_of(sim::CoreId{f.core});
  return std::nullopt;
}

// The GEMM laid out in HBM and lowered, or why not (it does not fit).
Refused plan_gemm(const MatmulJob& job, runtime::GemmLayout* layout, runtime::GemmPlan* plan) {
  const uint64_t footprint = runtime::pack_gemm_layout({job.m, job.k, job.n}, job.dtype, 0, layout);
  if (footprint > job.slice->chip.hbm.capacity_bytes) {
    return failure_of("A, B and C take " + std::to_string(footprint) +
                      " bytes; the chip's HBM holds " +
                      std::to_string(job.slice->chip.hbm.capacity_bytes));
  }
  auto lowered = runtime::lower_gemm(*job.slice, job.core, {job.m, job.k, job.n}, job.precision,
                                     *layout, job.tiling);
  if (!lowered.ok()) return failure_of(lowered.status());
  *plan = *std::move(lowered);
  return std::nullopt;
}

// The GEMM's roofline bound on one core: its MXU work at the core's peak (times the precision's
// passes) or each matrix crossing HBM once at the chip's bandwidth, whichever is longer.
double roofline_seconds(const MatmulJob& job) {
  const config::ChipSpec& chip = job.slice->chip;
  const double flops = 2.0 * job.m * job.k * job.n * sim::mxu_passes(job.precision);
  const double in_bytes = job.dtype == isa::BF16 ? 2 : 4;
  const double m = job.m, k = job.k, n = job.n;
  const double bytes = (m * k + k * n) * in_bytes + m * n * 4;
  return std::max(flops / chip.core.peak_bf16_flops, bytes / chip.hbm.bandwidth_bytes_per_s);
}

// The run's figures as --json prints them (without the error figures).
nlohmann::ordered_json matmul_report(const MatmulJob& job, const runtime::GemmPlan& plan,
                                     const sim::RunResult& run, const sim::RunReport& report,
                                     double host_seconds) {
  const double seconds = report.seconds;
  // The HBM figures are the first chip's that moved bytes (the GEMM's chip), 0 when none did.
  const sim::ChipReport* chip_report = report.chips.empty() ? nullptr : &report.chips.front();
  const double flops = 2.0 * job.m * job.k * job.n;
  const runtime::GemmEstimate estimate = runtime::estimate_gemm(
      job.slice->chip, {job.m, job.k, job.n}, job.dtype, job.precision, plan.tiling,
      /*streaming_cores=*/1);
  const double roof = roofline_seconds(job);
  return {
      {"config", job.slice->name},
      {"m", job.m},
      {"k", job.k},
      {"n", job.n},
      {"precision", kMatmulPrecisions.name(job.precision)},
      {"mxu_policy", sim::kMxuPolicies.name(job.policy)},
      {"input_dtype", kTensorDTypes.name(job.dtype)},
      {"timing_only", job.timing_only},
      {"core", job.core},
      {"tiling", {{"tm", plan.tiling.tm}, {"tk", plan.tiling.tk}, {"tn", plan.tiling.tn}}},
      {"instructions", plan.program.cores(0).instructions_size()},
      {"cycles", run.cycles()},
      {"seconds", seconds},
      {"tflops", flops / seconds / 1e12},
      {"peak_tflops_per_core", job.slice->chip.core.peak_bf16_flops / 1e12},
      {"mxu_utilization", report.cores.at(0).mxu_utilization},
      {"hbm_bytes", chip_report != nullptr ? chip_report->hbm_bytes : 0.0},
      {"hbm_achieved_bytes_per_s",
       chip_report != nullptr ? chip_report->hbm_achieved_bytes_per_s : 0.0},
      {"vmem_high_water_bytes", report.cores.at(0).vmem_high_water_bytes},
      {"estimate_seconds", estimate.seconds},
      {"roofline_seconds", roof},
      {"fraction_of_roofline", roof / seconds},
      {"host_seconds", host_seconds},
  };
}

// a x b summed as the cpu backend sums it: the same bits on every host, so the error figures
// below are too (Eigen's own product blocks its sums by the host's cache sizes and threads).
Matrix reference_product(const Matrix& a, const Matrix& b) {
  Matrix out(a.rows(), b.cols());
  runtime::reference_matmul(a.data(), b.data(), out.data(), a.rows(), a.cols(), b.cols());
  return out;
}

// C read back and its error against the products of bf16-rounded and of fp32 inputs.
absl::Status add_errors(sim::System& system, const MatmulJob& job,
                        const runtime::GemmLayout& layout, const Matrix& a, const Matrix& b,
                        nlohmann::ordered_json* out) {
  Matrix c(job.m, job.n);
  if (auto s = system.read_hbm(job.chip, layout.c_address, c.data(), sizeof(float) * c.size());
      !s.ok()) {
    return s;
  }
  const Matrix bf16_ref = reference_product(sim::rounded_to_bf16(a), sim::rounded_to_bf16(b));
  const Matrix fp32_ref = reference_product(a, b);
  (*out)["max_rel_error_vs_bf16_ref"] = sim::max_rel_error(c, bf16_ref);
  (*out)["max_rel_error_vs_fp32_ref"] = sim::max_rel_error(c, fp32_ref);
  return absl::OkStatus();
}

void print_matmul(const MatmulJob& job, const runtime::GemmPlan& plan, const sim::RunResult& run,
                  const nlohmann::ordered_json& out) {
  std::cout << "matmul " << job.m << "x" << job.k << "x" << job.n << " on core " << job.core
            << " of " << job.slice->name << " (" << sim::kMxuPolicies.name(job.policy)
            << ", precision " << out["precision"].get<std::string>() << ")\n"
            << "  tiles        " << plan.tiling.tm << "x" << plan.tiling.tk << "x" << plan.tiling.tn
            << ", " << out["instructions"] << " instructions\n"
            << "  time         " << run.cycles()
            << " cycles = " << out["seconds"].get<double>() * 1e6 << " us\n"
            << "  throughput   " << out["tflops"].get<double>() << " TFLOPS of "
            << out["peak_tflops_per_core"].get<double>() << " peak; MXU utilisation "
            << 100 * out["mxu_utilization"].get<double>() << "%\n"
            << "  HBM          " << out["hbm_bytes"].get<double>() / 1e6 << " MB at "
            << out["hbm_achieved_bytes_per_s"].get<double>() / 1e9 << " GB/s\n"
            << "  estimate     " << out["estimate_seconds"].get<double>() * 1e6
            << " us, the compiler's for these tiles\n"
            << "  roofline     " << out["roofline_seconds"].get<double>() * 1e6
            << " us: " << 100 * out["fraction_of_roofline"].get<double>() << "% of the roof\n";
  if (!job.timing_only) {
    std::cout << "  error        " << out["max_rel_error_vs_bf16_ref"].get<double>()
              << " vs bf16-input reference, " << out["max_rel_error_vs_fp32_ref"].get<double>()
              << " vs fp32 reference\n";
  }
  std::cout << "  host time    " << out["host_seconds"].get<double>() << " s\n";
}

}  // namespace

int run_matmul(const std::vector<std::string>& args) {
  MatmulFlags flags;
  const po::options_description options = matmul_options(&flags);
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, kMatmulUsage, &vm); rc >= 0) return rc;
  MatmulJob job;
  if (Refused r = matmul_job_from(vm, flags, &job)) return refuse(*r, kMatmulUsage);
  runtime::GemmLayout layout;
  runtime::GemmPlan plan;
  if (Refused r = plan_gemm(job, &layout, &plan)) return refuse(*r, kMatmulUsage);
  if (vm["dump"].as<bool>()) {
    std::cout << sim::dump_program(plan.program);
    return kOk;
  }
  auto system = sim::System::create(job.slice, {job.policy, job.timing_only, nullptr});
  if (!system.ok()) return failure(std::string(system.status().message()));

  Matrix a, b;
  if (!job.timing_only) {
    a = sim::random_uniform(job.m, job.k, job.seed);
    b = sim::random_uniform(job.k, job.n, job.seed + 1);
    for (auto s : {write_matrix(**system, job.chip, layout.a_address, a, job.dtype),
                   write_matrix(**system, job.chip, layout.b_address, b, job.dtype)}) {
      if (!s.ok()) return failure(std::string(s.message()));
    }
  }
  const auto host_start = std::chrono::steady_clock::now();
  auto run = (*system)->run(plan.program);
  const double host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  if (!run.ok()) return failure(std::string(run.status().message()));

  const sim::RunReport report = (*system)->report(*run);
  if (vm.count("stats") > 0) {
    std::ofstream stats_file(vm["stats"].as<std::string>());
    stats_file << json_text((*system)->stats().to_json(/*describe=*/true)) << "\n";
    if (!stats_file.flush())  // flushed before it is checked: a full disk shows only then
      return failure("cannot write statistics to " + vm["stats"].as<std::string>());
  }
  nlohmann::ordered_json out = matmul_report(job, plan, *run, report, host_seconds);
  if (!job.timing_only) {
    if (auto s = add_errors(**system, job, layout, a, b, &out); !s.ok())
      return failure(std::string(s.message()));
  }
  if (vm["json"].as<bool>()) {
    std::cout << json_text(out) << "\n";
    return kOk;
  }
  print_matmul(job, plan, *run, out);
  return kOk;
}

}  // namespace tpusim::cli
