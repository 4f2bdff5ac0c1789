#include "sim/run_report.h"

namespace tpusim::sim {

namespace {

nlohmann::ordered_json ops_json(const std::vector<OpFigures>& figures) {
  nlohmann::ordered_json ops = nlohmann::ordered_json::array();
  for (const OpFigures& f : figures) {
    ops.push_back({{"label", f.label},
                   {"op", f.op},
                   {"flops", f.flops},
                   {"mxu_flops", f.mxu_flops},
                   {"hbm_bytes", f.hbm_bytes},
                   {"ici_bytes", f.ici_bytes},
                   {"cycles", f.cycles},
                   {"instructions", f.instructions}});
  }
  return ops;
}

nlohmann::ordered_json core_json(const CoreReport& core) {
  nlohmann::ordered_json units = nlohmann::ordered_json::object();
  for (const UnitReport& u : core.units) {
    units[u.name] = {{"busy_cycles", static_cast<double>(u.busy_cycles)},
                     {"stall_cycles", static_cast<double>(u.stall_cycles)},
                     {"utilization", u.utilization}};
  }
  return {{"core", index(core.core)},
          {"shadow", core.shadow},
          {"cycles", core.cycles},
          {"mxu_utilization", core.mxu_utilization},
          {"infeed_wait_cycles", core.infeed_wait_cycles},
          {"outfeed_wait_cycles", core.outfeed_wait_cycles},
          {"vmem_high_water_bytes", core.vmem_high_water_bytes},
          {"units", units},
          {"ops", ops_json(core.ops)}};
}

nlohmann::ordered_json chip_json(const ChipReport& chip) {
  return {{"chip", index(chip.chip)},
          {"hbm_bytes", chip.hbm_bytes},
          {"hbm_achieved_bytes_per_s", chip.hbm_achieved_bytes_per_s},
          {"hbm_peak_bytes_per_s", chip.hbm_peak_bytes_per_s},
          {"ops", ops_json(chip.ops)}};
}

}  // namespace

const UnitReport* CoreReport::unit(std::string_view name) const {
  for (const UnitReport& u : units) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

const ChipReport* RunReport::chip(ChipId chip) const {
  for (const ChipReport& c : chips) {
    if (c.chip == chip) return &c;
  }
  return nullptr;
}

nlohmann::ordered_json RunReport::to_json() const {
  nlohmann::ordered_json cores_json = nlohmann::ordered_json::array();
  for (const CoreReport& c : cores) cores_json.push_back(core_json(c));
  nlohmann::ordered_json chips_json = nlohmann::ordered_json::array();
  for (const ChipReport& c : chips) chips_json.push_back(chip_json(c));
  return {{"cycles", cycles}, {"seconds", seconds}, {"cores", cores_json}, {"chips", chips_json}};
}

}  // namespace tpusim::sim
