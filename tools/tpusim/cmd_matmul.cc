// tpusim matmul: one GEMM on one core of a simulated slice, lowered by runtime/lowering/gemm.h.
#include <chrono>
#include <fstream>
#include <iostream>

#include <Eigen/Core>
#include <nlohmann/json.hpp>

#include "configs/loader.h"
#include "runtime/lowering/gemm.h"
#include "sim/isa/dump.h"
#include "sim/numerics/bf16.h"
#include "sim/numerics/reference.h"
#include "sim/system.h"
#include "sim/timing/mxu_policy.h"
#include "tools/tpusim/command.h"
#include "tools/tpusim/commands.h"
#include "tools/tpusim/options.h"

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

}  // namespace

int run_matmul(const std::vector<std::string>& args) {
  po::options_description options("options");
  // Read as signed so that "-3" is an error, not a wrapped-around huge unsigned value.
  int64_t m_arg = 0, k_arg = 0, n_arg = 0;
  uint32_t core = 0, seed = 1;
  options.add_options()("config", po::value<std::string>()->default_value("v3-8"),
                        "slice config file or built-in name")(
      "m", po::value<int64_t>(&m_arg)->required(), "rows of A and C")(
      "k", po::value<int64_t>(&k_arg)->required(), "columns of A, rows of B")(
      "n", po::value<int64_t>(&n_arg)->required(), "columns of B and C")(
      "precision", po::value<std::string>()->default_value("default"),
      "default | high | highest (1, 3, 6 bf16 passes)")(
      "mxu-policy", po::value<std::string>()->default_value("tpu"),
      "MXU timing policy: tpu | scalesim_ws")(
      "input-dtype", po::value<std::string>()->default_value("f32"),
      "dtype of A and B in HBM: f32 | bf16")("core", po::value<uint32_t>(&core)->default_value(0),
                                             "global index of the core that runs it")(
      "seed", po::value<uint32_t>(&seed)->default_value(1), "seed of the random inputs")(
      "timing-only", po::bool_switch(), "skip numerics: time only, no values or error figures")(
      "stats", po::value<std::string>(),
      "write the full statistics tree (values, units, descriptions) as JSON to FILE")(
      "dump", po::bool_switch(), "print the ISA program instead of running it")(
      "json", po::bool_switch(), "print JSON");
  const std::string usage =
      "usage: tpusim matmul --m M --k K --n N [--config SLICE] [--precision default|high|highest]\n"
      "                     [--mxu-policy tpu|scalesim_ws] [--timing-only] [--json]\n\n"
      "Runs C = A x B on one core: A (M x K) and B (K x N) random in HBM, C (f32) written back to\n"
      "HBM, tiled to fit VMEM with DMA double-buffered against MXU work. Reports cycles, TFLOPS,\n"
      "MXU utilisation, HBM traffic and (unless --timing-only) the error against Eigen references\n"
      "with bf16-rounded and with plain fp32 inputs.\n";
  po::variables_map vm;
  if (int rc = parse_args(args, options, {}, usage, &vm); rc >= 0) return rc;
  auto precision = parse_precision(vm["precision"].as<std::string>());
  if (!precision.ok()) return usage_error(std::string(precision.status().message()), usage);
  const std::string policy = vm["mxu-policy"].as<std::string>();
  if (absl::Status s = check_mxu_policy(policy); !s.ok())
    return usage_error(std::string(s.message()), usage);
  const std::string dtype_name = vm["input-dtype"].as<std::string>();
  if (dtype_name != "f32" && dtype_name != "bf16")
    return usage_error("--input-dtype must be f32 or bf16", usage);
  const isa::DType dtype = dtype_name == "bf16" ? isa::BF16 : isa::F32;
  for (int64_t v : {m_arg, k_arg, n_arg}) {
    if (v < 1 || v > (int64_t{1} << 30))
      return usage_error("--m, --k and --n must be in [1, 2^30]", usage);
  }
  const auto m = static_cast<uint32_t>(m_arg), k = static_cast<uint32_t>(k_arg),
             n = static_cast<uint32_t>(n_arg);
  const bool timing_only = vm["timing-only"].as<bool>();

  auto slice = config::load_slice(vm["config"].as<std::string>());
  if (!slice.ok()) return failure(std::string(slice.status().message()));
  if (core >= (*slice)->cores)
    return usage_error("--core " + std::to_string(core) + " is not a core of the slice", usage);
  const sim::ChipId chip = sim::CoreMap(**slice).chip_of(sim::CoreId{core});
  runtime::GemmLayout layout;
  const uint64_t footprint = runtime::pack_gemm_layout({m, k, n}, dtype, 0, &layout);
  if (footprint > (*slice)->chip.hbm.capacity_bytes) {
    return failure("A, B and C take " + std::to_string(footprint) +
                   " bytes; the chip's HBM holds " +
                   std::to_string((*slice)->chip.hbm.capacity_bytes));
  }
  auto plan = runtime::lower_gemm(**slice, core, {m, k, n}, *precision, layout);
  if (!plan.ok()) return failure(std::string(plan.status().message()));
  if (vm["dump"].as<bool>()) {
    std::cout << sim::dump_program(plan->program);
    return kOk;
  }
  auto system = sim::System::create(*slice, {policy, timing_only, nullptr});
  if (!system.ok()) return failure(std::string(system.status().message()));

  Matrix a, b;
  if (!timing_only) {
    a = sim::random_uniform(m, k, seed);
    b = sim::random_uniform(k, n, seed + 1);
    for (auto s : {write_matrix(**system, chip, layout.a_address, a, dtype),
                   write_matrix(**system, chip, layout.b_address, b, dtype)}) {
      if (!s.ok()) return failure(std::string(s.message()));
    }
  }
  const auto host_start = std::chrono::steady_clock::now();
  auto run = (*system)->run(plan->program);
  const double host_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  if (!run.ok()) return failure(std::string(run.status().message()));

  const sim::RunReport report = (*system)->report(*run);
  if (vm.count("stats") > 0) {
    std::ofstream stats_file(vm["stats"].as<std::string>());
    stats_file << (*system)->stats().to_json(/*describe=*/true).dump(2) << "\n";
    if (!stats_file) return failure("cannot write statistics to " + vm["stats"].as<std::string>());
  }
  const double seconds = report.seconds;
  // The HBM figures are the first chip's that moved bytes (the GEMM's chip), 0 when none did.
  const sim::ChipReport* chip_report = report.chips.empty() ? nullptr : &report.chips.front();
  const double flops = 2.0 * m * k * n;
  nlohmann::ordered_json out = {
      {"config", (*slice)->name},
      {"m", m},
      {"k", k},
      {"n", n},
      {"precision", vm["precision"].as<std::string>()},
      {"mxu_policy", policy},
      {"input_dtype", dtype_name},
      {"timing_only", timing_only},
      {"core", core},
      {"tiling", {{"tm", plan->tiling.tm}, {"tk", plan->tiling.tk}, {"tn", plan->tiling.tn}}},
      {"instructions", plan->program.cores(0).instructions_size()},
      {"cycles", run->cycles()},
      {"seconds", seconds},
      {"tflops", flops / seconds / 1e12},
      {"peak_tflops_per_core", (*slice)->chip.core.peak_bf16_flops / 1e12},
      {"mxu_utilization", report.cores.at(0).mxu_utilization},
      {"hbm_bytes", chip_report != nullptr ? chip_report->hbm_bytes : 0.0},
      {"hbm_achieved_bytes_per_s",
       chip_report != nullptr ? chip_report->hbm_achieved_bytes_per_s : 0.0},
      {"vmem_high_water_bytes", report.cores.at(0).vmem_high_water_bytes},
      {"host_seconds", host_seconds},
  };
  if (!timing_only) {
    Matrix c(m, n);
    if (auto s = (*system)->read_hbm(chip, layout.c_address, c.data(), sizeof(float) * c.size());
        !s.ok()) {
      return failure(std::string(s.message()));
    }
    const Matrix bf16_ref = sim::rounded_to_bf16(a) * sim::rounded_to_bf16(b);
    const Matrix fp32_ref = a * b;
    out["max_rel_error_vs_bf16_ref"] = sim::max_rel_error(c, bf16_ref);
    out["max_rel_error_vs_fp32_ref"] = sim::max_rel_error(c, fp32_ref);
  }
  if (vm["json"].as<bool>()) {
    std::cout << out.dump(2) << "\n";
    return kOk;
  }
  std::cout << "matmul " << m << "x" << k << "x" << n << " on core " << core << " of "
            << (*slice)->name << " (" << policy << ", precision "
            << out["precision"].get<std::string>() << ")\n"
            << "  tiles        " << plan->tiling.tm << "x" << plan->tiling.tk << "x"
            << plan->tiling.tn << ", " << out["instructions"] << " instructions\n"
            << "  time         " << run->cycles() << " cycles = " << seconds * 1e6 << " us\n"
            << "  throughput   " << out["tflops"].get<double>() << " TFLOPS of "
            << out["peak_tflops_per_core"].get<double>() << " peak; MXU utilisation "
            << 100 * out["mxu_utilization"].get<double>() << "%\n"
            << "  HBM          " << out["hbm_bytes"].get<double>() / 1e6 << " MB at "
            << out["hbm_achieved_bytes_per_s"].get<double>() / 1e9 << " GB/s\n";
  if (!timing_only) {
    std::cout << "  error        " << out["max_rel_error_vs_bf16_ref"].get<double>()
              << " vs bf16-input reference, " << out["max_rel_error_vs_fp32_ref"].get<double>()
              << " vs fp32 reference\n";
  }
  std::cout << "  host time    " << host_seconds << " s\n";
  return kOk;
}

}  // namespace tpusim::cli
