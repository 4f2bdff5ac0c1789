#pragma once
// The validated configuration every other part of tpusim takes. Produced only by the loader
// (configs/loader.h) after every field passed its rule; all figures are in SI units (bytes,
// bytes per second, hertz, seconds), and the derived figures are computed once, here.

#include <cstdint>
#include <string>
#include <vector>

#include "configs/config.pb.h"

namespace tpusim::config {

struct CoreSpec {
  uint32_t mxu_count = 0;
  uint32_t mxu_rows = 0;  // R
  uint32_t mxu_cols = 0;  // C
  double clock_hz = 0;
  uint32_t vector_lanes = 0;
  uint32_t vector_sublanes = 0;
  uint64_t vmem_bytes = 0;
  uint32_t vmem_ports = 0;
  uint32_t vmem_port_bytes_per_cycle = 0;
  uint32_t dma_engines = 0;
  uint32_t unit_queue_depth = 0;
  uint32_t vector_latency_cycles = 0;
  uint32_t transcendental_latency_cycles = 0;
  double vector_divide_cycles_per_vreg = 0;
  double vector_transcendental_cycles_per_vreg = 0;
  uint32_t vector_alus = 0;       // a chain's ALU operations issue this many a cycle per vreg
  uint32_t vector_registers = 0;  // a chain keeps at most this many values in registers

  // Derived: peak bf16 FLOP/s = MXUs x R x C MACs x 2 FLOPs x clock.
  double peak_bf16_flops = 0;
  // Derived: vector unit element operations per second (lanes x sublanes x ALUs x clock).
  double vector_elements_per_s = 0;
};

struct HbmSpec {
  uint64_t capacity_bytes = 0;
  double bandwidth_bytes_per_s = 0;
  double latency_s = 0;
  uint32_t channels = 0;
  uint32_t interleave_bytes = 0;
};

struct HostLinkSpec {
  double host_to_device_bytes_per_s = 0;
  double device_to_host_bytes_per_s = 0;
  double latency_s = 0;
};

struct IciSpec {
  uint32_t links_per_chip = 0;
  double link_bandwidth_bytes_per_s = 0;  // one way, per link
  double hop_latency_s = 0;
  double core_link_bytes_per_s = 0;  // on-chip, between two cores, one way (0: one core)
  double core_link_latency_s = 0;
};

struct ChipSpec {
  std::string name;
  std::string source;  // file (or "<embedded>/name") it was read from
  uint32_t tensor_cores = 0;
  CoreSpec core;
  HbmSpec hbm;
  HostLinkSpec host_link;
  uint32_t infeed_queue_depth = 0;
  uint32_t outfeed_queue_depth = 0;
  IciSpec ici;

  // Derived.
  double peak_bf16_flops = 0;                 // all cores
  double machine_balance_flops_per_byte = 0;  // peak / HBM bandwidth: the roofline ridge point
};

struct TopologySpec {
  std::vector<uint32_t> shape;  // chips along X[, Y[, Z]]
  bool torus = false;           // wraparound links in every dimension
  // Derived.
  uint32_t chips = 0;
  uint32_t links_needed_per_chip = 0;  // by the busiest chip of this arrangement
};

// Host pipeline stage costs for the deterministic host model, in seconds of one core.
struct HostStageCostsSpec {
  double file_read_s_per_byte = 0;
  double parse_example_s = 0;
  double decode_raw_s_per_byte = 0;
  double decode_jpeg_s_per_pixel = 0;
  double resize_s_per_pixel = 0;
  double augment_s_per_pixel = 0;
  double batch_s_per_byte = 0;
  double enqueue_s_per_byte = 0;
};

struct HostSpec {
  std::string name;
  uint32_t cpu_cores = 0;
  double loop_overhead_s = 0;
  HostStageCostsSpec stage_costs;
};

struct SliceSpec {
  std::string name;
  std::string source;  // file (or "<embedded>/name") it was read from
  ChipSpec chip;
  TopologySpec topology;
  uint32_t chips_per_host = 0;
  HostSpec host;
  // The validated input with the chip resolved inline: what a report records and what a
  // sweep edits before validating again.
  SliceConfig proto;

  // Derived.
  uint32_t chips = 0;
  uint32_t cores = 0;
  uint32_t hosts = 0;
  double peak_bf16_flops = 0;            // whole slice
  double hbm_bandwidth_bytes_per_s = 0;  // whole slice
  uint64_t hbm_capacity_bytes = 0;       // whole slice
};

}  // namespace tpusim::config
