#include "configs/describe.h"

#include <iterator>

#include <google/protobuf/util/json_util.h>

#include "common/strings.h"

namespace tpusim::config {
namespace {

using json = nlohmann::ordered_json;

json proto_to_json(const google::protobuf::Message& msg) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(msg, &text, options).ok()) return nullptr;
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

json chip_figures(const ChipSpec& chip) {
  const CoreSpec& core = chip.core;
  return json{
      {"name", chip.name},
      {"source", chip.source},
      {"cores_per_chip", chip.tensor_cores},
      {"mxus_per_core", core.mxu_count},
      {"mxu_shape", {core.mxu_rows, core.mxu_cols}},
      {"clock_hz", core.clock_hz},
      {"vector_lanes", core.vector_lanes},
      {"vector_sublanes", core.vector_sublanes},
      {"vector_elements_per_s_per_core", core.vector_elements_per_s},
      {"vmem_bytes_per_core", core.vmem_bytes},
      {"vmem_bytes_per_cycle",
       static_cast<uint64_t>(core.vmem_ports) * core.vmem_port_bytes_per_cycle},
      {"dma_engines_per_core", core.dma_engines},
      {"peak_bf16_tflops_per_core", core.peak_bf16_flops / 1e12},
      {"peak_bf16_tflops_per_chip", chip.peak_bf16_flops / 1e12},
      {"hbm_capacity_bytes", chip.hbm.capacity_bytes},
      {"hbm_bandwidth_bytes_per_s", chip.hbm.bandwidth_bytes_per_s},
      {"hbm_latency_s", chip.hbm.latency_s},
      {"hbm_channels", chip.hbm.channels},
      {"hbm_interleave_bytes", chip.hbm.interleave_bytes},
      {"machine_balance_flops_per_byte", chip.machine_balance_flops_per_byte},
      {"host_to_device_bytes_per_s", chip.host_link.host_to_device_bytes_per_s},
      {"device_to_host_bytes_per_s", chip.host_link.device_to_host_bytes_per_s},
      {"host_link_latency_s", chip.host_link.latency_s},
      {"infeed_queue_depth", chip.infeed_queue_depth},
      {"outfeed_queue_depth", chip.outfeed_queue_depth},
      {"ici_links_per_chip", chip.ici.links_per_chip},
      {"ici_link_bandwidth_bytes_per_s", chip.ici.link_bandwidth_bytes_per_s},
      {"ici_hop_latency_s", chip.ici.hop_latency_s},
      {"core_link_bytes_per_s", chip.ici.core_link_bytes_per_s},
      {"core_link_latency_s", chip.ici.core_link_latency_s},
  };
}

std::string shape_text(const std::vector<uint32_t>& shape) { return str_join(shape, "x"); }

}  // namespace

json to_json(const ChipSpec& chip) {
  json j{{"kind", "chip"},
         {"chips", 1},
         {"cores", chip.tensor_cores},
         {"peak_bf16_tflops", chip.peak_bf16_flops / 1e12}};
  j.update(chip_figures(chip));
  return j;
}

json to_json(const SliceSpec& slice) {
  json j{{"kind", "slice"},
         {"name", slice.name},
         {"source", slice.source},
         {"chips", slice.chips},
         {"cores", slice.cores},
         {"hosts", slice.hosts},
         {"chips_per_host", slice.chips_per_host},
         {"topology",
          {{"shape", slice.topology.shape},
           {"kind", slice.topology.torus ? "torus" : "mesh"},
           {"links_needed_per_chip", slice.topology.links_needed_per_chip}}},
         {"peak_bf16_tflops", slice.peak_bf16_flops / 1e12},
         {"hbm_bandwidth_bytes_per_s_total", slice.hbm_bandwidth_bytes_per_s},
         {"hbm_capacity_bytes_total", slice.hbm_capacity_bytes}};
  json chip = chip_figures(slice.chip);
  chip.erase("name");
  chip.erase("source");
  j["chip"] = slice.chip.name;
  j["chip_source"] = slice.chip.source;
  j.update(chip);
  j["host"] = to_json(slice.host);
  j["config"] = proto_to_json(slice.proto);
  return j;
}

json to_json(const HostSpec& host) {
  const HostStageCostsSpec& c = host.stage_costs;
  return json{{"kind", "host"},
              {"name", host.name},
              {"cpu_cores", host.cpu_cores},
              {"loop_overhead_s", host.loop_overhead_s},
              {"stage_costs",
               {{"file_read_s_per_byte", c.file_read_s_per_byte},
                {"parse_example_s", c.parse_example_s},
                {"decode_raw_s_per_byte", c.decode_raw_s_per_byte},
                {"decode_jpeg_s_per_pixel", c.decode_jpeg_s_per_pixel},
                {"resize_s_per_pixel", c.resize_s_per_pixel},
                {"augment_s_per_pixel", c.augment_s_per_pixel},
                {"batch_s_per_byte", c.batch_s_per_byte},
                {"enqueue_s_per_byte", c.enqueue_s_per_byte}}}};
}

std::string describe(const HostSpec& host) {
  const HostStageCostsSpec& c = host.stage_costs;
  std::string out;
  fmt::format_to(std::back_inserter(out),
                 "host {}: {} cores, {:.0f} us per device loop round trip\n", host.name,
                 host.cpu_cores, host.loop_overhead_s * 1e6);
  fmt::format_to(std::back_inserter(out),
                 "  stage costs    read {:.0f} us/MiB, parse {:.1f} us/example, "
                 "JPEG decode {:.0f} us/Mpixel,\n"
                 "                 resize {:.0f} us/Mpixel, augment {:.0f} us/Mpixel, "
                 "batch {:.0f} us/MiB, enqueue {:.0f} us/MiB\n",
                 c.file_read_s_per_byte * 1e6 * 1024 * 1024, c.parse_example_s * 1e6,
                 c.decode_jpeg_s_per_pixel * 1e12, c.resize_s_per_pixel * 1e12,
                 c.augment_s_per_pixel * 1e12, c.batch_s_per_byte * 1e6 * 1024 * 1024,
                 c.enqueue_s_per_byte * 1e6 * 1024 * 1024);
  return out;
}

std::string describe(const ChipSpec& chip) {
  const CoreSpec& c = chip.core;
  std::string out;
  fmt::format_to(std::back_inserter(out), "chip {} ({})\n", chip.name, chip.source);
  fmt::format_to(std::back_inserter(out),
                 "  cores          {} TensorCores, each {} MXU(s) of {}x{} at {:.0f} MHz\n",
                 chip.tensor_cores, c.mxu_count, c.mxu_rows, c.mxu_cols, c.clock_hz / 1e6);
  fmt::format_to(std::back_inserter(out),
                 "  peak bf16      {:.1f} TFLOPS per chip ({:.2f} per core)\n",
                 chip.peak_bf16_flops / 1e12, c.peak_bf16_flops / 1e12);
  fmt::format_to(std::back_inserter(out),
                 "  vector unit    {} lanes x {} sublanes; VMEM {:g} MiB per core\n",
                 c.vector_lanes, c.vector_sublanes, c.vmem_bytes / (1024.0 * 1024.0));
  fmt::format_to(std::back_inserter(out),
                 "  HBM            {:.0f} GiB, {:.0f} GB/s over {} channels, {:.0f} ns latency\n",
                 chip.hbm.capacity_bytes / (1024.0 * 1024.0 * 1024.0),
                 chip.hbm.bandwidth_bytes_per_s / 1e9, chip.hbm.channels, chip.hbm.latency_s * 1e9);
  fmt::format_to(std::back_inserter(out),
                 "  balance        {:.0f} FLOP per HBM byte (roofline ridge point)\n",
                 chip.machine_balance_flops_per_byte);
  fmt::format_to(
      std::back_inserter(out),
      "  host link      {:.1f} GB/s in, {:.1f} GB/s out; infeed {}, outfeed {} entries\n",
      chip.host_link.host_to_device_bytes_per_s / 1e9,
      chip.host_link.device_to_host_bytes_per_s / 1e9, chip.infeed_queue_depth,
      chip.outfeed_queue_depth);
  fmt::format_to(std::back_inserter(out),
                 "  ICI            {} links, {:.0f} GB/s one way each, {:.0f} ns per hop\n",
                 chip.ici.links_per_chip, chip.ici.link_bandwidth_bytes_per_s / 1e9,
                 chip.ici.hop_latency_s * 1e9);
  if (chip.tensor_cores > 1) {
    fmt::format_to(std::back_inserter(out),
                   "  core link      {:.0f} GB/s one way between the chip's cores, {:.0f} ns\n",
                   chip.ici.core_link_bytes_per_s / 1e9, chip.ici.core_link_latency_s * 1e9);
  }
  return out;
}

std::string describe(const SliceSpec& slice) {
  std::string out;
  fmt::format_to(std::back_inserter(out), "slice {} ({})\n", slice.name, slice.source);
  fmt::format_to(std::back_inserter(out),
                 "  chips          {} in a {} {}, {} cores, {} host(s) of {} chips\n", slice.chips,
                 shape_text(slice.topology.shape), slice.topology.torus ? "torus" : "mesh",
                 slice.cores, slice.hosts, slice.chips_per_host);
  fmt::format_to(std::back_inserter(out), "  peak bf16      {:.1f} TFLOPS in all\n",
                 slice.peak_bf16_flops / 1e12);
  fmt::format_to(std::back_inserter(out), "  HBM            {:.0f} GiB and {:.0f} GB/s in all\n",
                 slice.hbm_capacity_bytes / (1024.0 * 1024.0 * 1024.0),
                 slice.hbm_bandwidth_bytes_per_s / 1e9);
  out += describe(slice.chip);
  out += describe(slice.host);
  return out;
}

}  // namespace tpusim::config
