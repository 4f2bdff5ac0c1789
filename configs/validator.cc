#include "configs/validator.h"

#include <cmath>

#include "common/strings.h"

namespace tpusim::config {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGB = 1e9;

// Rates and delays a run can simulate. Past them a config is almost surely a typo (900 typed as
// 9e-7), and much slower rates would make jobs run past the simulator's time horizon.
constexpr double kMinGbPerS = 1e-3;  // 1 MB/s
constexpr double kMaxGbPerS = 1e7;   // 10 PB/s
constexpr const char* kRateWhy = "GB/s, from 1 MB/s to 10 PB/s";
constexpr const char* kNsWhy = "ns, at most 1 s";
constexpr const char* kUsWhy = "us, at most 1 s";
constexpr const char* kStageCostWhy = "us, at most 1000 s per unit";

void validate_core(const CoreConfig& core, FieldChecker& c, CoreSpec* spec) {
  spec->mxu_count =
      static_cast<uint32_t>(c.count_in_range(core, "mxu_count", 1, 64, "MXUs per core"));
  spec->mxu_rows =
      static_cast<uint32_t>(c.count_in_range(core, "mxu_rows", 1, 4096, "systolic array rows"));
  spec->mxu_cols =
      static_cast<uint32_t>(c.count_in_range(core, "mxu_cols", 1, 4096, "systolic array columns"));
  spec->clock_hz = c.real_in_range(core, "clock_mhz", 1, 100000, "clock in MHz") * 1e6;
  spec->vector_lanes =
      static_cast<uint32_t>(c.count_in_range(core, "vector_lanes", 1, 65536, "vector unit lanes"));
  spec->vector_sublanes = static_cast<uint32_t>(
      c.count_in_range(core, "vector_sublanes", 1, 1024, "vector unit sublanes"));
  spec->vmem_bytes = static_cast<uint64_t>(
      c.real_in_range(core, "vmem_mib", 1.0 / 1024, 1024.0 * 1024, "VMEM capacity in MiB") * kMiB);
  spec->vmem_ports =
      static_cast<uint32_t>(c.count_in_range(core, "vmem_ports", 1, 64, "VMEM ports"));
  spec->vmem_port_bytes_per_cycle = static_cast<uint32_t>(c.count_in_range(
      core, "vmem_port_bytes_per_cycle", 1, 1u << 20, "bytes per VMEM port per cycle"));
  spec->dma_engines =
      static_cast<uint32_t>(c.count_in_range(core, "dma_engines", 1, 64, "DMA engines per core"));
  spec->unit_queue_depth = static_cast<uint32_t>(
      c.count_in_range(core, "unit_queue_depth", 1, 1u << 16, "instructions per unit queue"));
  spec->vector_latency_cycles = static_cast<uint32_t>(c.count_in_range(
      core, "vector_latency_cycles", 0, 1u << 16, "vector pipeline latency in cycles"));
  spec->transcendental_latency_cycles = static_cast<uint32_t>(c.count_in_range(
      core, "transcendental_latency_cycles", 0, 1u << 16, "extra latency of transcendentals"));
  spec->vector_divide_cycles_per_vreg = c.real_in_range(core, "vector_divide_cycles_per_vreg", 1,
                                                        1024, "issue cycles per vreg of a divide");
  spec->vector_transcendental_cycles_per_vreg =
      c.real_in_range(core, "vector_transcendental_cycles_per_vreg", 1, 1024,
                      "issue cycles per vreg of exp/log/tanh/rsqrt");
  spec->vector_alus = static_cast<uint32_t>(
      c.count_in_range(core, "vector_alus", 1, 64, "ALU operations a cycle per element slot"));
  spec->vector_registers = static_cast<uint32_t>(
      c.count_in_range(core, "vector_registers", 1, 4096, "vector registers per core"));
}

void validate_hbm(const HbmConfig& hbm, FieldChecker& c, HbmSpec* spec) {
  spec->capacity_bytes = static_cast<uint64_t>(
      c.real_in_range(hbm, "capacity_gib", 1.0 / 1024, 1024.0 * 1024, "HBM capacity in GiB") *
      kGiB);
  spec->bandwidth_bytes_per_s =
      c.positive_in_range(hbm, "bandwidth_gb_per_s", kMinGbPerS, kMaxGbPerS, kRateWhy) * kGB;
  spec->latency_s = c.non_negative_at_most(hbm, "latency_ns", 1e9, kNsWhy) / 1e9;
  spec->channels =
      static_cast<uint32_t>(c.count_in_range(hbm, "channels", 1, 4096, "HBM channels"));
  spec->interleave_bytes = static_cast<uint32_t>(c.count_in_range(
      hbm, "interleave_bytes", 1, 1u << 30, "bytes per channel interleave granule"));
}

void validate_host_link(const HostLinkConfig& link, FieldChecker& c, HostLinkSpec* spec) {
  spec->host_to_device_bytes_per_s =
      c.positive_in_range(link, "host_to_device_gb_per_s", kMinGbPerS, kMaxGbPerS, kRateWhy) * kGB;
  spec->device_to_host_bytes_per_s =
      c.positive_in_range(link, "device_to_host_gb_per_s", kMinGbPerS, kMaxGbPerS, kRateWhy) * kGB;
  spec->latency_s = c.non_negative_at_most(link, "latency_us", 1e6, kUsWhy) / 1e6;
}

void validate_ici(const IciConfig& ici, FieldChecker& c, IciSpec* spec) {
  spec->links_per_chip = static_cast<uint32_t>(c.count_in_range(
      ici, "links_per_chip", 0, 64, "ICI links per chip; 0 for a chip without ICI"));
  if (spec->links_per_chip > 0) {
    spec->link_bandwidth_bytes_per_s =
        c.positive_in_range(ici, "link_bandwidth_gb_per_s", kMinGbPerS, kMaxGbPerS, kRateWhy) * kGB;
  } else {
    spec->link_bandwidth_bytes_per_s =
        c.non_negative_at_most(ici, "link_bandwidth_gb_per_s", kMaxGbPerS, kRateWhy) * kGB;
  }
  spec->hop_latency_s = c.non_negative_at_most(ici, "hop_latency_ns", 1e9, kNsWhy) / 1e9;
  if (ici.has_core_link_gb_per_s() || ici.has_core_link_latency_ns()) {
    spec->core_link_bytes_per_s =
        c.positive_in_range(ici, "core_link_gb_per_s", kMinGbPerS, kMaxGbPerS, kRateWhy) * kGB;
    spec->core_link_latency_s =
        c.non_negative_at_most(ici, "core_link_latency_ns", 1e9, kNsWhy) / 1e9;
  }
}

void validate_stage_costs(const HostStageCosts& costs, FieldChecker& c, HostStageCostsSpec* spec) {
  spec->file_read_s_per_byte =
      c.non_negative_at_most(costs, "file_read_us_per_mib", 1e9, kStageCostWhy) / 1e6 / kMiB;
  spec->parse_example_s =
      c.non_negative_at_most(costs, "parse_example_us", 1e9, kStageCostWhy) / 1e6;
  spec->decode_raw_s_per_byte =
      c.non_negative_at_most(costs, "decode_raw_us_per_kib", 1e9, kStageCostWhy) / 1e6 / 1024.0;
  spec->decode_jpeg_s_per_pixel =
      c.non_negative_at_most(costs, "decode_jpeg_us_per_mpixel", 1e9, kStageCostWhy) / 1e12;
  spec->resize_s_per_pixel =
      c.non_negative_at_most(costs, "resize_us_per_mpixel", 1e9, kStageCostWhy) / 1e12;
  spec->augment_s_per_pixel =
      c.non_negative_at_most(costs, "augment_us_per_mpixel", 1e9, kStageCostWhy) / 1e12;
  spec->batch_s_per_byte =
      c.non_negative_at_most(costs, "batch_us_per_mib", 1e9, kStageCostWhy) / 1e6 / kMiB;
  spec->enqueue_s_per_byte =
      c.non_negative_at_most(costs, "enqueue_us_per_mib", 1e9, kStageCostWhy) / 1e6 / kMiB;
}

}  // namespace

void validate_chip(const ChipConfig& chip, FieldChecker& c, ChipSpec* spec) {
  spec->name = c.nonempty_string(chip, "name");
  spec->tensor_cores =
      static_cast<uint32_t>(c.count_in_range(chip, "tensor_cores", 1, 64, "TensorCores per chip"));
  bool present = false;
  FieldChecker core = c.nested(chip, "core", &present);
  if (present) validate_core(chip.core(), core, &spec->core);
  FieldChecker hbm = c.nested(chip, "hbm", &present);
  if (present) validate_hbm(chip.hbm(), hbm, &spec->hbm);
  FieldChecker link = c.nested(chip, "host_link", &present);
  if (present) validate_host_link(chip.host_link(), link, &spec->host_link);
  spec->infeed_queue_depth = static_cast<uint32_t>(
      c.count_in_range(chip, "infeed_queue_depth", 1, 1u << 20, "infeed queue entries"));
  spec->outfeed_queue_depth = static_cast<uint32_t>(
      c.count_in_range(chip, "outfeed_queue_depth", 1, 1u << 20, "outfeed queue entries"));
  FieldChecker ici = c.nested(chip, "ici", &present);
  if (present) validate_ici(chip.ici(), ici, &spec->ici);
  if (present && spec->tensor_cores > 1 && !chip.ici().has_core_link_gb_per_s()) {
    ici.fail(chip.ici(), "core_link_gb_per_s",
             str_cat("required field is missing: the chip has ", spec->tensor_cores,
                     " TensorCores, and collectives between them use this link"));
  }
}

void validate_topology(const TopologyConfig& topology, FieldChecker& c, TopologySpec* spec) {
  if (topology.shape_size() < 1 || topology.shape_size() > 3) {
    c.fail(topology, "shape",
           str_cat("has ", topology.shape_size(),
                   " dimensions; a slice is arranged in 1, 2 or 3 dimensions"));
  }
  spec->chips = 1;
  spec->links_needed_per_chip = 0;
  spec->shape.clear();
  for (int i = 0; i < topology.shape_size(); ++i) {
    const uint32_t n = topology.shape(i);
    if (n < 1 || n > 4096) {
      c.fail(topology, "shape",
             str_cat("dimension ", i, " is ", n, "; each must be in [1, 4096] chips"));
      continue;
    }
    spec->shape.push_back(n);
    spec->chips *= n;
  }
  switch (topology.kind()) {
    case TopologyConfig::MESH:
      spec->torus = false;
      break;
    case TopologyConfig::TORUS:
      spec->torus = true;
      break;
    default:
      c.fail(topology, "kind",
             topology.has_kind() ? "must be MESH or TORUS"
                                 : "required field is missing (MESH or TORUS)");
  }
  // Links the busiest chip needs: an interior chip of a mesh line has two neighbours, an end
  // chip one; in a torus every chip has two links per dimension (for a ring of 2 chips both
  // links go to the same neighbour, as on the v2/v3 4-chip boards).
  for (uint32_t n : spec->shape) {
    if (n == 1) continue;
    spec->links_needed_per_chip += (spec->torus || n > 2) ? 2 : 1;
  }
  if (spec->chips > 65536) {
    c.fail(topology, "shape",
           str_cat("describes ", spec->chips, " chips; at most 65536 are supported"));
  }
}

void validate_host(const HostConfig& host, FieldChecker& c, HostSpec* spec) {
  spec->name = c.nonempty_string(host, "name");
  spec->cpu_cores = static_cast<uint32_t>(
      c.count_in_range(host, "cpu_cores", 1, 65536, "host CPU cores for the input pipeline"));
  spec->loop_overhead_s = c.non_negative_at_most(host, "loop_overhead_us", 1e6, kUsWhy) / 1e6;
  bool present = false;
  FieldChecker costs = c.nested(host, "stage_costs", &present);
  if (present) validate_stage_costs(host.stage_costs(), costs, &spec->stage_costs);
}

void validate_slice_relations(const SliceConfig& slice, FieldChecker& c, SliceSpec* spec) {
  const TopologySpec& topo = spec->topology;
  if (topo.links_needed_per_chip > spec->chip.ici.links_per_chip) {
    c.fail(slice, "topology",
           str_cat("a ", topo.torus ? "torus" : "mesh", " of this shape needs ",
                   topo.links_needed_per_chip, " ICI links per chip, but chip ", spec->chip.name,
                   " has ", spec->chip.ici.links_per_chip, " (ici.links_per_chip)"));
  }
  spec->chips_per_host = static_cast<uint32_t>(
      c.count_in_range(slice, "chips_per_host", 1, 4096, "chips fed by one host"));
  if (spec->chips_per_host > 0 && topo.chips > 0 && topo.chips % spec->chips_per_host != 0) {
    c.fail(slice, "chips_per_host",
           str_cat(spec->chips_per_host, " does not divide the slice's ", topo.chips,
                   " chips; every host must feed the same number of chips"));
  }
}

void finish_chip(ChipSpec* spec) {
  CoreSpec& core = spec->core;
  core.peak_bf16_flops =
      static_cast<double>(core.mxu_count) * core.mxu_rows * core.mxu_cols * 2.0 * core.clock_hz;
  core.vector_elements_per_s = static_cast<double>(core.vector_lanes) * core.vector_sublanes *
                               core.vector_alus * core.clock_hz;
  spec->peak_bf16_flops = core.peak_bf16_flops * spec->tensor_cores;
  spec->machine_balance_flops_per_byte = spec->peak_bf16_flops / spec->hbm.bandwidth_bytes_per_s;
}

void finish_slice(SliceSpec* spec) {
  finish_chip(&spec->chip);
  spec->chips = spec->topology.chips;
  spec->cores = spec->chips * spec->chip.tensor_cores;
  spec->hosts = spec->chips / spec->chips_per_host;
  spec->peak_bf16_flops = spec->chip.peak_bf16_flops * spec->chips;
  spec->hbm_bandwidth_bytes_per_s = spec->chip.hbm.bandwidth_bytes_per_s * spec->chips;
  spec->hbm_capacity_bytes = spec->chip.hbm.capacity_bytes * spec->chips;
}

}  // namespace tpusim::config
