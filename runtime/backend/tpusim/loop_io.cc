#include "runtime/backend/tpusim/loop_io.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "sim/numerics/bf16.h"

namespace tpusim::runtime::tpusim_backend {
namespace {

std::vector<uint8_t> bytes_of(const HostTensor& t) {
  std::vector<uint8_t> out(static_cast<size_t>(t.elements()) * 4);
  if (t.dtype == DType::kS32) {
    std::memcpy(out.data(), t.i.data(), out.size());
  } else {
    std::memcpy(out.data(), t.f.data(), out.size());
  }
  return out;
}

void copy_into(HostTensor& t, const std::vector<uint8_t>& data) {
  if (t.dtype == DType::kS32) {
    std::memcpy(t.i.data(), data.data(), t.i.size() * 4);
  } else {
    std::memcpy(t.f.data(), data.data(), t.f.size() * 4);
  }
}

// What the host link carries for an infeed: 4-byte f32 or s32, or bf16 (the values rounded to
// nearest even, as a host cast to bfloat16 does) for a 2-byte transfer.
std::vector<uint8_t> link_bytes_of(const Transfer& t, const HostTensor& value) {
  if (t.link_bytes == 4) return bytes_of(value);
  std::vector<uint8_t> out(value.f.size() * 2);
  for (size_t i = 0; i < value.f.size(); ++i) {
    const uint16_t bits = sim::f32_to_bf16_bits(value.f[i]);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

// A step's batch for one replica, cut into the entries its infeed dequeues take. Timing only,
// the entries carry their sizes and no data: nothing reads it (v4-128's 128 replicas of 128
// images held 250 MB of copies of it).
void add_batch(sim::CoreId core, const CompiledStep& step, const Feeds& feeds, bool timing_only,
               sim::InfeedStep& into) {
  const size_t first = into.entries.size();
  for (const Transfer& t : step.infeeds) {
    const HostTensor& value = feeds.at(t.name);
    const std::vector<uint8_t> data =
        timing_only ? std::vector<uint8_t>{} : link_bytes_of(t, value);
    const uint64_t total = static_cast<uint64_t>(value.elements()) * t.link_bytes;
    const uint64_t entry_bytes = t.entry_bytes();
    for (uint64_t at = 0; at < total; at += entry_bytes) {
      sim::FeedEntry entry;
      entry.bytes = std::min<uint64_t>(entry_bytes, total - at);
      if (!timing_only) {
        entry.data.assign(data.begin() + static_cast<long>(at),
                          data.begin() + static_cast<long>(at + entry.bytes));
      }
      entry.ends_batch = false;
      into.entries.emplace_back(core, std::move(entry));
    }
  }
  // The replica's step is one infeed enqueue: its queue holds it as one batch.
  if (into.entries.size() > first) into.entries.back().second.ends_batch = true;
}

// A host schedule (or, `host` >= 0, one host's part of it) as the simulator's HostFeed: device
// seconds are cycles / clock frequency.
class ScheduleFeed final : public sim::HostFeed {
 public:
  ScheduleFeed(std::shared_ptr<HostSchedule> schedule, int host, const sim::ClockDomain& clock)
      : schedule_(std::move(schedule)), host_(host), clock_(clock) {}
  uint64_t ready_cycle(uint64_t step) override {
    const double s = host_ < 0 ? schedule_->ready_seconds(step)
                               : schedule_->host_ready_seconds(step, static_cast<uint32_t>(host_));
    return clock_.cycles_for_seconds(std::max(0.0, s)).value;
  }
  void taken(uint64_t step, uint64_t cycle) override {
    const double s = static_cast<double>(cycle) / clock_.frequency_hz();
    if (host_ < 0) {
      schedule_->taken(step, s);
    } else {
      schedule_->host_taken(step, static_cast<uint32_t>(host_), s);
    }
  }

 private:
  std::shared_ptr<HostSchedule> schedule_;
  int host_;
  const sim::ClockDomain& clock_;
};

// One replica's outfeed entries, which come back in program order: step by step, output by
// output.
absl::StatusOr<std::vector<Outputs>> outputs_of_replica(std::vector<sim::FeedEntry> entries,
                                                        const CompiledStep& step, size_t steps) {
  size_t next = 0;
  std::vector<Outputs> results;
  for (size_t s = 0; s < steps; ++s) {
    Outputs outputs;
    for (const Transfer& t : step.outputs) {
      HostTensor value = HostTensor::zeros(t.dtype, t.shape);
      std::vector<uint8_t> data;
      const uint64_t total = static_cast<uint64_t>(t.shape.elements()) * 4;
      uint64_t received = 0;
      while (received < total) {
        if (next >= entries.size())
          return absl::InternalError("tpusim backend: the outfeed ended early");
        // Timing-only runs send entries of the right size without data: the value stays zero.
        data.insert(data.end(), entries[next].data.begin(), entries[next].data.end());
        received += entries[next].bytes;
        ++next;
      }
      if (data.size() == total) copy_into(value, data);
      outputs[t.name] = std::move(value);
    }
    results.push_back(std::move(outputs));
  }
  return results;
}

}  // namespace

absl::Status write_state(sim::System& system, const Graph& g, const CompiledStep& step,
                         sim::ChipId chip, const Variables& variables) {
  for (const auto& [address, values] : step.constants) {
    if (auto st = system.write_hbm(chip, address, values.data(), values.size() * 4); !st.ok())
      return st;
  }
  for (int id : g.variables()) {
    const std::vector<uint8_t> data = bytes_of(variables.at(g.node(id).attrs.name));
    if (auto st = system.write_hbm(chip, step.plan.address[static_cast<size_t>(id)], data.data(),
                                   data.size());
        !st.ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status queue_infeeds(sim::System& system, const std::vector<LoopStep>& steps,
                           uint32_t simulated, const StepOfReplica& step_for, bool timing_only) {
  const uint64_t start = system.now_cycle();
  const sim::CoreMap& cores = system.core_map();
  auto host_of_replica = [&cores](uint32_t r) {
    return cores.host_of(cores.chip_of(sim::CoreId{r}));
  };
  const uint32_t replica_hosts = host_of_replica(simulated - 1) + 1;
  std::vector<std::shared_ptr<sim::HostFeed>> feeds;
  const HostSchedule* feeds_of = nullptr;
  for (const LoopStep& step : steps) {
    const bool by_host =
        step.host != nullptr && step.host->hosts() > 1 && step.host->hosts() == replica_hosts;
    const uint32_t parts = by_host ? replica_hosts : 1;
    if (step.host != nullptr && (step.host.get() != feeds_of || feeds.size() != parts)) {
      feeds.clear();
      for (uint32_t h = 0; h < parts; ++h) {
        feeds.push_back(std::make_shared<ScheduleFeed>(
            step.host, by_host ? static_cast<int>(h) : -1, system.clock()));
      }
      feeds_of = step.host.get();
    }
    std::vector<sim::InfeedStep> in(parts);
    for (uint32_t h = 0; h < parts; ++h) {
      in[h].ready_cycle = start;
      in[h].host = h;
      if (step.host != nullptr) {
        in[h].feed = feeds[h];
        in[h].index = step.host_step;
      }
    }
    for (uint32_t r = 0; r < simulated; ++r) {
      const uint32_t h = by_host ? host_of_replica(r) : 0;
      add_batch(sim::CoreId{r}, step_for(r), step.replicas[r], timing_only, in[h]);
    }
    for (sim::InfeedStep& part : in) {
      if (auto st = system.queue_infeed_step(std::move(part)); !st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<Outputs>>> receive_outputs(sim::System& system,
                                                                  uint32_t simulated,
                                                                  const StepOfReplica& step_for,
                                                                  size_t steps) {
  std::vector<std::vector<Outputs>> out(steps);
  for (uint32_t r = 0; r < simulated; ++r) {
    auto outputs = outputs_of_replica(system.take_outfeed(sim::CoreId{r}), step_for(r), steps);
    if (!outputs.ok()) return outputs.status();
    for (size_t s = 0; s < steps; ++s) out[s].push_back((*outputs)[s]);
  }
  return out;
}

absl::Status read_variables(sim::System& system, const Graph& g, const CompiledStep& first,
                            Variables* variables) {
  for (int id : g.variables()) {
    HostTensor& v = (*variables)[g.node(id).attrs.name];
    std::vector<uint8_t> data(static_cast<size_t>(v.elements()) * 4);
    if (auto st = system.read_hbm(sim::ChipId{0}, first.plan.address[static_cast<size_t>(id)],
                                  data.data(), data.size());
        !st.ok()) {
      return st;
    }
    copy_into(v, data);
  }
  return absl::OkStatus();
}

}  // namespace tpusim::runtime::tpusim_backend
