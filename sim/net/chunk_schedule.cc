#include "sim/net/chunk_schedule.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace tpusim::sim {
namespace {

constexpr uint64_t kDefaultChunkBytes = 1ull << 20;

}  // namespace

ChunkSchedule::ChunkSchedule(const Topology& topology, uint32_t cores,
                             double vector_elements_per_cycle, Resources& resources)
    : topology_(topology),
      resources_(resources),
      vector_elements_per_cycle_(vector_elements_per_cycle),
      members_(cores) {}

void ChunkSchedule::begin_run() {
  for (Member& m : members_) m.done = true;
  instances_.clear();
  runs_.clear();
  queue_ = {};
}

void ChunkSchedule::issued(CoreId core, double cycle) {
  Member& me = state(core);
  me.done = false;
  me.passes_left = 0;
  me.start = me.finish = cycle;
  me.work = MemberWork{};
}

void ChunkSchedule::reset_stats() {
  chunk_transfers_ = 0;
  hbm_bytes_ = 0;
}

const CollectivePlan& ChunkSchedule::start(const CollectiveGroup& group, double cycle) {
  for (CoreId m : group.cores) state(m).start = cycle;
  Instance& in = instances_.emplace_back();
  in.group = &group;
  in.started = cycle;
  const size_t first_run = runs_.size();
  add_runs(instances_.size() - 1);
  link_runs(in, first_run);
  for (size_t r = first_run; r < runs_.size(); ++r) {
    for (uint32_t i = 0; i < runs_[r].cores.size(); ++i) join_pass(r, i, cycle);
  }
  return in.plan;
}

void ChunkSchedule::add_runs(size_t id) {
  Instance& in = instances_[id];
  const CollectiveGroup& g = *in.group;
  PassRun common;
  common.instance = id;
  common.chunk_size = g.c.chunk_bytes() > 0 ? g.c.chunk_bytes() : kDefaultChunkBytes;
  common.elements = g.c.elements();
  common.gather_only = g.c.kind() == isa::Collective::ALL_GATHER;
  if (g.c.kind() == isa::Collective::PERMUTE) {
    PassRun run = common;
    run.cores = g.cores;
    for (CoreId peer : g.peers) {
      run.next.push_back(
          static_cast<uint32_t>(std::find(g.cores.begin(), g.cores.end(), peer) - g.cores.begin()));
    }
    run.steps = 1;
    runs_.push_back(std::move(run));
    return;
  }
  in.plan = plan_collective(g.c, g.cores, topology_);
  for (size_t p = 0; p < in.plan.size(); ++p) {
    for (const RingPass& pass : in.plan[p]) {
      PassRun run = common;
      run.pass = &pass;
      run.cores = pass.members;
      for (uint32_t i = 0; i < pass.size(); ++i) run.next.push_back((i + 1) % pass.size());
      run.steps = pass.steps();
      run.rs_steps = pass.reduce_scatter ? pass.size() - 1 : 0;
      run.phase = static_cast<uint32_t>(p);
      runs_.push_back(std::move(run));
    }
  }
}

void ChunkSchedule::link_runs(Instance& in, size_t first_run) {
  const std::vector<CoreId>& cores = in.group->cores;
  std::unordered_map<CoreId, uint32_t> position;  // core -> its index in cores
  for (uint32_t i = 0; i < cores.size(); ++i) position[cores[i]] = i;
  // Per member: the latest phase that moved its data, of those so far and of those before the
  // current run's (-1: none).
  std::vector<int> moved(cores.size(), -1), moved_before(cores.size(), -1);
  std::vector<bool> waited_for(std::max<size_t>(in.plan.size(), 1), false);  // per phase
  uint32_t phase = 0;
  for (size_t r = first_run; r < runs_.size(); ++r) {  // runs_ holds the phases in order
    PassRun& run = runs_[r];
    if (run.phase != phase) {
      moved_before = moved;
      phase = run.phase;
    }
    const size_t k = run.cores.size();
    run.due.assign(k, 0);
    run.landed.assign(k, 0.0);
    run.written.assign(k, 0.0);
    for (CoreId core : run.cores) {
      const uint32_t slot = position.at(core);
      run.slot.push_back(slot);
      run.after.push_back(moved_before[slot]);
      if (moved_before[slot] >= 0) waited_for[moved_before[slot]] = true;
      ++state(core).passes_left;
    }
    // Each member's chain ends at the member `steps` hops on; it is due the chain's chunks.
    for (uint32_t i = 0; i < k; ++i) {
      if (run.steps == 0) continue;
      uint32_t end = i;
      for (uint32_t s = 0; s < run.steps; ++s) end = run.next[end];
      run.due[end] += run.chunks(run.first_segment(i));
    }
    if (run.steps > 0) {
      for (uint32_t slot : run.slot) moved[slot] = static_cast<int>(run.phase);
    }
  }
  // A pass keeps the ranges it makes final when a later pass waits for them.
  if (in.plan.size() > 1) in.finals.assign(cores.size(), std::vector<FinalRanges>(in.plan.size()));
  for (size_t r = first_run; r < runs_.size(); ++r)
    runs_[r].keeps_finals = waited_for[runs_[r].phase];
}

void ChunkSchedule::join_pass(size_t r, uint32_t member, double cycle) {
  PassRun& run = runs_[r];
  if (run.steps > 0) {  // its first chunk; each one sent asks for the next (send)
    const uint32_t segment = run.first_segment(member);
    if (run.chunks(segment) > 0)
      push(ChunkEvent{cycle, 0, static_cast<uint32_t>(r), member, 0, segment, 0});
  }
  if (run.due[member] == 0) member_finished_pass(r, member, cycle);
}

void ChunkSchedule::process(const ChunkEvent& e) {
  PassRun& run = runs_[e.run];
  const double bytes = run.chunk_bytes(e.segment, e.chunk);
  const uint64_t offset = run.chunk_offset(e.segment, e.chunk);
  if (e.add_waiting) {  // a chunk landed before the part it is added to was final
    add_when_ready(e, offset, bytes);
    return;
  }
  if (e.step > 0 && e.step >= run.rs_steps) write_final(run, e, offset, bytes);
  if (e.step == run.steps) {  // a chunk of the member's final step has landed
    run.landed[e.member] = std::max(run.landed[e.member], e.time);
    if (--run.due[e.member] == 0) member_finished_pass(e.run, e.member, run.landed[e.member]);
    return;
  }
  // A pass's first step sends the member's own data, streamed out of its HBM; later steps
  // forward what arrived, from on-chip buffers.
  if (e.step == 0) {
    const uint64_t end = offset + static_cast<uint64_t>(bytes);
    const double own_written = own_data_ready(e, offset, end);
    if (own_written < 0) return;
    if (run.rs_steps == 0 && run.keeps_finals && run.after[e.member] >= 0) {
      // An all-gather after an earlier phase never lands the member's own segment: it is final
      // since that phase wrote it, and a later phase that needs it from this one finds it here.
      made_final(run, e.member, offset, end, own_written);
    }
  }
  send(run, e, offset, bytes);
}

void ChunkSchedule::add_when_ready(const ChunkEvent& e, uint64_t offset, double bytes) {
  const PassRun& run = runs_[e.run];
  if (own_data_ready(e, offset, offset + static_cast<uint64_t>(bytes)) < 0) return;
  const CoreId core = run.cores[e.member];
  const double operand = hbm(core, own_buffer(run, e.member), offset, bytes, e.time);
  state(core).work.flops += bytes / 4;
  ChunkEvent added = e;
  added.add_waiting = false;
  added.time = std::max(e.time, operand) + bytes / 4 / vector_elements_per_cycle_;
  push(added);
}

void ChunkSchedule::write_final(PassRun& run, const ChunkEvent& e, uint64_t offset, double bytes) {
  const CollectiveGroup& g = *instances_[run.instance].group;
  const double written = hbm(run.cores[e.member], g.dst[run.slot[e.member]], offset, bytes, e.time);
  run.written[e.member] = std::max(run.written[e.member], written);
  if (run.keeps_finals)
    made_final(run, e.member, offset, offset + static_cast<uint64_t>(bytes), written);
}

void ChunkSchedule::send(PassRun& run, const ChunkEvent& e, uint64_t offset, double bytes) {
  const uint32_t to = run.next[e.member];
  const CoreId sender = run.cores[e.member], receiver = run.cores[to];
  double first_byte = e.time, last_byte = e.time;
  if (e.step == 0) {
    // An all-gather member's src is its own segment alone.
    const uint64_t src_offset = run.gather_only ? e.chunk * run.chunk_size : offset;
    last_byte = hbm(sender, own_buffer(run, e.member), src_offset, bytes, e.time);
    first_byte = e.time + resources_.hbm_latency(sender);
    // An all-gather's member also copies its own part into its result.
    if (run.gather_only) {
      const CollectiveGroup& g = *instances_[run.instance].group;
      run.written[e.member] = std::max(
          run.written[e.member], hbm(sender, g.dst[run.slot[e.member]], offset, bytes, e.time));
    }
  }
  if (run.routes.empty()) run.routes.assign(run.cores.size(), nullptr);
  const std::vector<uint32_t>*& route = run.routes[e.member];
  if (route == nullptr) {
    route = &resources_.route(sender, receiver,
                              run.pass != nullptr ? run.pass->ties : TieBreak::kPositive);
  }
  const TransferTimes sent = resources_.transfer(*route, first_byte, bytes, last_byte);
  state(sender).work.ici_bytes += bytes;
  // The member reads its next chunk just in time to follow this one onto the link, so that its
  // HBM reads keep pace with the link instead of all queueing at once.
  if (e.step == 0 && e.chunk + 1 < run.chunks(e.segment)) {
    const double lead = resources_.hbm_latency(sender) + run.chunk_bytes(e.segment, e.chunk + 1) /
                                                             resources_.hbm_bytes_per_cycle(sender);
    push(ChunkEvent{std::max(e.time, sent.first_link_end - lead), 0, e.run, e.member, 0, e.segment,
                    e.chunk + 1});
  }
  ++chunk_transfers_;
  push(receive(run, e, to, offset, bytes, sent.landed));
}

ChunkEvent ChunkSchedule::receive(PassRun& run, const ChunkEvent& e, uint32_t to, uint64_t offset,
                                  double bytes, double arrival) {
  const uint32_t received = e.step + 1;
  ChunkEvent next{arrival, 0, e.run, to, received, e.segment, e.chunk};
  if (received > run.rs_steps) return next;
  // Reducing: added on the vector unit to the receiver's own part.
  const double written =
      own_data_written(run, to, offset, offset + static_cast<uint64_t>(bytes), nullptr);
  if (written < 0 || written > e.time) {
    // The receiver's part, from an earlier phase, is not final yet: the add waits for it (and
    // reads it) once the chunk has landed.
    next.add_waiting = true;
    return next;
  }
  // The receiver knows what is coming: it asks for its part one HBM latency before the chunk is
  // sent (not before the part is there), so an uncontended read never holds up the add.
  const CoreId receiver = run.cores[to];
  const double asked = std::max(written, e.time - resources_.hbm_latency(receiver));
  const double operand = hbm(receiver, own_buffer(run, to), offset, bytes, asked);
  next.time = std::max(arrival, operand) + bytes / 4 / vector_elements_per_cycle_;
  state(receiver).work.flops += bytes / 4;
  return next;
}

const MemberBuffer& ChunkSchedule::own_buffer(const PassRun& r, uint32_t member) const {
  const CollectiveGroup& g = *instances_[r.instance].group;
  return (r.after[member] >= 0 ? g.dst : g.src)[r.slot[member]];
}

double ChunkSchedule::own_data_written(const PassRun& r, uint32_t member, uint64_t begin,
                                       uint64_t end, uint64_t* missing) const {
  const int after = r.after[member];
  const Instance& in = instances_[r.instance];
  if (after < 0) return in.started;
  return in.finals[r.slot[member]][after].written(begin, end, missing);
}

double ChunkSchedule::own_data_ready(const ChunkEvent& e, uint64_t begin, uint64_t end) {
  const PassRun& run = runs_[e.run];
  uint64_t missing = 0;
  const double written = own_data_written(run, e.member, begin, end, &missing);
  if (written < 0) {
    instances_[run.instance].finals[run.slot[e.member]][run.after[e.member]].wait(missing, e);
    return -1;
  }
  if (written > e.time) {
    ChunkEvent later = e;
    later.time = written;
    push(later);
    return -1;
  }
  return written;
}

void ChunkSchedule::made_final(const PassRun& r, uint32_t member, uint64_t begin, uint64_t end,
                               double cycle) {
  instances_[r.instance].finals[r.slot[member]][r.phase].make_final(
      begin, end, cycle, [this](const ChunkEvent& e) { push(e); });
}

void ChunkSchedule::member_finished_pass(size_t run, uint32_t member, double cycle) {
  const CoreId core = runs_[run].cores[member];
  Member& me = state(core);
  me.finish = std::max({me.finish, cycle, runs_[run].written[member]});
  if (--me.passes_left > 0) return;
  me.done = true;
  resources_.finished(core, me.finish);
}

double ChunkSchedule::hbm(CoreId core, const MemberBuffer& buffer, uint64_t offset, double bytes,
                          double cycle) {
  const double end = resources_.hbm_transfer(core, buffer, offset, bytes, cycle);
  state(core).work.hbm_bytes += bytes;
  hbm_bytes_ += bytes;
  return end;
}

}  // namespace tpusim::sim
