#include "sim/net/collective_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "common/strings.h"
#include "sim/isa/ops.h"
#include "sim/net/collective_numerics.h"

namespace tpusim::sim {
namespace {

constexpr uint64_t kDefaultChunkBytes = 1ull << 20;

// How long from now until cycle `cycle` (rounded up to a whole cycle) begins.
sc_core::sc_time until(const ClockDomain& clock, double cycle) {
  const Picoseconds target = clock.time_of(Cycles(ceil_cycle(cycle)));
  const Picoseconds now = sc_core::sc_time_stamp().value();
  return sc_core::sc_time(static_cast<double>(target > now ? target - now : 0), sc_core::SC_PS);
}

const char* op_name_of(const isa::Collective& c) { return collective_kind_name(c.kind()); }

std::string core_list(const std::vector<uint32_t>& cores) {
  if (cores.size() <= 8) return str_join(cores, ", ");
  std::vector<uint32_t> head(cores.begin(), cores.begin() + 8);
  return str_cat(str_join(head, ", "), " and ", cores.size() - 8, " more");
}

}  // namespace

CollectiveEngine::CollectiveEngine(const sc_core::sc_module_name& name,
                                   const config::SliceSpec& slice, const ClockDomain& clock,
                                   StatGroup& stats, std::function<void(const std::string&)> fail)
    : sc_module(name),
      slice_(slice),
      clock_(clock),
      fail_(std::move(fail)),
      topology_(slice),
      interconnect_(topology_, clock),
      members_(slice.cores) {
  SC_THREAD(thread);
  for (Member& m : members_) m.done_event = std::make_unique<sc_core::sc_event>();
  vector_elements_per_cycle_ =
      static_cast<double>(slice.chip.core.vector_lanes) * slice.chip.core.vector_sublanes;
  StatGroup& s = stats.child("interconnect", "ICI links between chips and links between cores");
  s.add("collectives", "collectives", "collectives run (each counted once, not per member)",
        [this] { return static_cast<double>(collectives_); });
  s.add("chunk_transfers", "transfers", "chunks moved from one member to another",
        [this] { return static_cast<double>(chunk_transfers_); });
  s.add("bytes", "bytes", "bytes moved over all links (each hop counted)", [this] {
    double b = 0;
    for (uint32_t l = 0; l < topology_.link_count(); ++l) b += interconnect_.bytes_on(l);
    return b;
  });
  s.add("hbm_bytes", "bytes", "bytes the collectives read and wrote in HBM (every core)",
        [this] { return hbm_bytes_; });
  s.add("busiest_link_busy_cycles", "cycles", "cycles the busiest link was transferring", [this] {
    double most = 0;
    for (uint32_t l = 0; l < topology_.link_count(); ++l)
      most = std::max(most, interconnect_.busy_cycles_on(l));
    return most;
  });
  s.on_reset([this] {
    collectives_ = chunk_transfers_ = 0;
    hbm_bytes_ = 0;
    interconnect_.reset_stats();
  });
}

void CollectiveEngine::begin_run() {
  for (Member& m : members_) {
    m.issued = 0;
    m.done = true;
  }
  instances_.clear();
  open_.clear();
  runs_.clear();
  queue_ = {};
}

void CollectiveEngine::arrive(uint32_t core, const isa::Collective& c, int index, uint64_t cycle,
                              bool functional) {
  Member& me = members_[core];
  const std::vector<uint32_t> cores = collective_members(c, topology_);
  const auto key = std::make_pair(me.issued++, cores);
  auto it = open_.find(key);
  if (it == open_.end()) {
    Instance in;
    in.c = c;
    in.cores = cores;
    in.number = key.first;
    in.first_issue = str_cat("core ", core, " instruction ", index);
    instances_.push_back(std::move(in));
    it = open_.emplace(key, instances_.size() - 1).first;
  }
  const size_t id = it->second;
  Instance& in = instances_[id];
  const isa::Collective& first = in.c;
  if (c.kind() != first.kind() || c.algorithm() != first.algorithm() ||
      c.elements() != first.elements() || c.chunk_bytes() != first.chunk_bytes()) {
    fail_(str_cat("core ", core, " instruction ", index, " (", op_name_of(c), ", ", c.elements(),
                  " elements, ", collective_algorithm_name(c.algorithm()),
                  ") does not match its group's collective #", in.number, " as ", in.first_issue,
                  " issued it (", op_name_of(first), ", ", first.elements(), " elements, ",
                  collective_algorithm_name(first.algorithm()), ")"));
    return;
  }
  me.done = false;
  me.passes_left = 0;
  me.instance = id;
  me.start = me.finish = static_cast<double>(cycle);
  me.work = MemberWork{};
  in.arrived.push_back(core);
  const auto pos =
      static_cast<size_t>(std::find(in.cores.begin(), in.cores.end(), core) - in.cores.begin());
  in.peers.resize(in.cores.size());
  in.src.resize(in.cores.size());
  in.dst.resize(in.cores.size());
  in.peers[pos] = c.peer();
  in.src[pos] = MemberBuffer::of(c, MemberBuffer::Side::kSrc);
  in.dst[pos] = MemberBuffer::of(c, MemberBuffer::Side::kDst);
  in.functional = in.functional && functional;
  if (in.arrived.size() < in.cores.size()) return;
  open_.erase(it);
  start(id, static_cast<double>(cycle));
}

std::string CollectiveEngine::waiting_for(uint32_t core) const {
  const Member& me = members_[core];
  if (me.done || me.instance >= instances_.size()) return "";
  const Instance& in = instances_[me.instance];
  if (in.arrived.size() == in.cores.size()) return "";  // started
  std::vector<uint32_t> arrived = in.arrived;
  std::sort(arrived.begin(), arrived.end());
  std::vector<uint32_t> missing;
  for (uint32_t m : in.cores) {
    if (!std::binary_search(arrived.begin(), arrived.end(), m)) missing.push_back(m);
  }
  return str_cat("waits for core(s) ", core_list(missing), " to issue collective #", in.number,
                 " (", op_name_of(in.c), " over ", in.cores.size(), " cores)");
}

void CollectiveEngine::start(size_t id, double cycle) {
  Instance& in = instances_[id];
  ++collectives_;
  for (uint32_t m : in.cores) members_[m].start = cycle;
  if (in.c.kind() == isa::Collective::PERMUTE) {
    std::vector<uint32_t> sorted = in.peers;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      fail_(str_cat("collective #", in.number, " (permute over cores ", core_list(in.cores),
                    ", first issued by ", in.first_issue, "): peers ", str_join(in.peers, ", "),
                    " send two members' data to one core"));
      return;
    }
  }
  in.started = cycle;
  const size_t first_run = runs_.size();
  if (in.c.kind() == isa::Collective::PERMUTE) {
    PassRun run;
    run.instance = id;
    run.cores = in.cores;
    for (uint32_t peer : in.peers) {
      run.next.push_back(static_cast<uint32_t>(std::find(in.cores.begin(), in.cores.end(), peer) -
                                               in.cores.begin()));
    }
    run.steps = 1;
    runs_.push_back(std::move(run));
  } else {
    in.plan = plan_collective(in.c, in.cores, topology_);
    for (size_t p = 0; p < in.plan.size(); ++p) {
      for (const RingPass& pass : in.plan[p]) {
        PassRun run;
        run.instance = id;
        run.pass = &pass;
        run.cores = pass.members;
        for (uint32_t i = 0; i < pass.size(); ++i) run.next.push_back((i + 1) % pass.size());
        run.steps = pass.steps();
        run.phase = static_cast<uint32_t>(p);
        runs_.push_back(std::move(run));
      }
    }
  }
  if (in.functional) compute_values(in);
  link_runs(in, first_run);
  for (size_t r = first_run; r < runs_.size(); ++r) {
    for (uint32_t i = 0; i < runs_[r].cores.size(); ++i) join_pass(r, i, cycle);
  }
  work_.notify(sc_core::SC_ZERO_TIME);
}

void CollectiveEngine::link_runs(Instance& in, size_t first_run) {
  std::unordered_map<uint32_t, uint32_t> position;  // core -> its index in in.cores
  for (uint32_t i = 0; i < in.cores.size(); ++i) position[in.cores[i]] = i;
  // Per member: the latest phase that moved its data, of those so far and of those before the
  // current run's (-1: none).
  std::vector<int> moved(in.cores.size(), -1), moved_before(in.cores.size(), -1);
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
    for (uint32_t core : run.cores) {
      const uint32_t slot = position.at(core);
      run.slot.push_back(slot);
      run.after.push_back(moved_before[slot]);
      if (moved_before[slot] >= 0) waited_for[moved_before[slot]] = true;
      ++members_[core].passes_left;
    }
    // Each member's chain ends at the member `steps` hops on; it is due the chain's chunks.
    for (uint32_t i = 0; i < k; ++i) {
      if (run.steps == 0) continue;
      uint32_t end = i;
      for (uint32_t s = 0; s < run.steps; ++s) end = run.next[end];
      const uint32_t segment = run.pass != nullptr ? run.pass->segment_sent(i, 0) : 0;
      run.due[end] += chunks(run, segment);
    }
    if (run.steps > 0) {
      for (uint32_t slot : run.slot) moved[slot] = static_cast<int>(run.phase);
    }
  }
  // A pass keeps the ranges it makes final when a later pass waits for them.
  if (in.plan.size() > 1) in.finals.assign(in.cores.size(), std::vector<Finals>(in.plan.size()));
  for (size_t r = first_run; r < runs_.size(); ++r)
    runs_[r].keeps_finals = waited_for[runs_[r].phase];
}

void CollectiveEngine::compute_values(Instance& in) {
  // Waits only for the numerics jobs that write what the collective reads or touch what it
  // writes, so the members' other work goes on (an overlapped all-reduce starts while they still
  // compute). While a memory's host storage may still move, everything queued runs first.
  bool stable = true;
  for (uint32_t core : in.cores) stable = stable && hbm_[core].memory->base_is_stable();
  if (numerics_ != nullptr && !stable) numerics_->drain();
  auto settle = [&](const HostRange* reads, size_t count, HostRange write) {
    if (numerics_ != nullptr && stable) numerics_->before_shared_access(reads, count, write);
  };
  const uint64_t n = in.c.elements();
  std::vector<std::vector<float>> src(in.cores.size(), std::vector<float>(n));
  for (size_t i = 0; i < in.cores.size(); ++i) {
    Memory& memory = *hbm_[in.cores[i]].memory;
    uint8_t* to = reinterpret_cast<uint8_t*>(src[i].data());
    in.src[i].for_each(0, n * 4, [&](uint64_t address, uint64_t bytes) {
      const uint8_t* at = memory.base_covering(address + bytes) + address;
      const HostRange read{at, at + bytes};
      settle(&read, 1, {});
      std::memcpy(to, at, bytes);
      to += bytes;
    });
  }
  const auto dst = collective_results(in.c, in.cores, in.plan, src, in.peers);
  for (size_t i = 0; i < in.cores.size(); ++i) {
    Memory& memory = *hbm_[in.cores[i]].memory;
    const uint8_t* from = reinterpret_cast<const uint8_t*>(dst[i].data());
    in.dst[i].for_each(0, dst[i].size() * 4, [&](uint64_t address, uint64_t bytes) {
      uint8_t* at = memory.base_covering(address + bytes) + address;
      settle(nullptr, 0, {at, at + bytes});
      std::memcpy(at, from, bytes);
      from += bytes;
    });
  }
}

void CollectiveEngine::join_pass(size_t r, uint32_t member, double cycle) {
  PassRun& run = runs_[r];
  if (run.steps > 0) {  // its first chunk; each one sent asks for the next (process)
    const uint32_t segment = run.pass != nullptr ? run.pass->segment_sent(member, 0) : 0;
    if (chunks(run, segment) > 0)
      push(Event{cycle, 0, static_cast<uint32_t>(r), member, 0, segment, 0});
  }
  if (run.due[member] == 0) member_finished_pass(r, member, cycle);
}

double CollectiveEngine::own_data_written(const PassRun& r, uint32_t member, uint64_t begin,
                                          uint64_t end, uint64_t* missing) const {
  const int after = r.after[member];
  if (after < 0) return instances_[r.instance].started;
  const Finals& finals = instances_[r.instance].finals[r.slot[member]][after];
  // Walk the final ranges from the one holding `begin` to the first gap or `end`.
  double written = 0;
  uint64_t at = begin;
  auto it = finals.ranges.upper_bound(at);
  if (it != finals.ranges.begin()) --it;
  for (; at < end && it != finals.ranges.end() && it->first <= at; ++it) {
    if (it->second.first <= at) continue;
    written = std::max(written, it->second.second);
    at = it->second.first;
  }
  if (at < end) {
    if (missing != nullptr) *missing = at;
    return -1;
  }
  return written;
}

double CollectiveEngine::own_data_ready(const Event& e, uint64_t begin, uint64_t end) {
  const PassRun& run = runs_[e.run];
  uint64_t missing = 0;
  const double written = own_data_written(run, e.member, begin, end, &missing);
  if (written < 0) {
    instances_[run.instance].finals[run.slot[e.member]][run.after[e.member]].waiting.emplace(
        missing, e);
    return -1;
  }
  if (written > e.time) {
    Event later = e;
    later.time = written;
    push(later);
    return -1;
  }
  return written;
}

void CollectiveEngine::made_final(const PassRun& r, uint32_t member, uint64_t begin, uint64_t end,
                                  double cycle) {
  Finals& finals = instances_[r.instance].finals[r.slot[member]][r.phase];
  finals.ranges[begin] = {end, cycle};
  // Wake what waited for a byte of the range: it looks again (and may wait for the next gap).
  const auto first = finals.waiting.lower_bound(begin), last = finals.waiting.lower_bound(end);
  for (auto it = first; it != last; ++it) {
    Event e = it->second;
    e.time = std::max(e.time, cycle);
    push(e);
  }
  finals.waiting.erase(first, last);
}

void CollectiveEngine::process(const Event& e) {
  PassRun& run = runs_[e.run];
  const Instance& in = instances_[run.instance];
  const double bytes = chunk_bytes(run, e.segment, e.chunk);
  const uint64_t offset = chunk_offset(run, e.segment, e.chunk);
  const auto end = offset + static_cast<uint64_t>(bytes);
  const uint32_t rs_steps =
      run.pass != nullptr && run.pass->reduce_scatter ? run.pass->size() - 1 : 0;
  // The member's own data: its src in a collective's first phase, what an earlier phase left in
  // its dst after that.
  const std::vector<MemberBuffer>& own = run.after[e.member] >= 0 ? in.dst : in.src;
  if (e.add_waiting) {  // a chunk landed before the part it is added to was final
    if (own_data_ready(e, offset, end) < 0) return;
    const uint32_t core = run.cores[e.member];
    const double operand = hbm_access(core, own[run.slot[e.member]], offset, bytes, e.time);
    members_[core].work.flops += bytes / 4;
    Event added = e;
    added.add_waiting = false;
    added.time = std::max(e.time, operand) + bytes / 4 / vector_elements_per_cycle_;
    push(added);
    return;
  }
  if (e.step > 0 && e.step >= rs_steps) {  // a final value has landed: the member writes it
    const double written =
        hbm_access(run.cores[e.member], in.dst[run.slot[e.member]], offset, bytes, e.time);
    run.written[e.member] = std::max(run.written[e.member], written);
    if (run.keeps_finals) made_final(run, e.member, offset, end, written);
  }
  if (e.step == run.steps) {  // a chunk of the member's final step has landed
    run.landed[e.member] = std::max(run.landed[e.member], e.time);
    if (--run.due[e.member] == 0) member_finished_pass(e.run, e.member, run.landed[e.member]);
    return;
  }
  // A pass's first step sends the member's own data, streamed out of its HBM; later steps
  // forward what arrived, from on-chip buffers.
  if (e.step == 0) {
    const double own_written = own_data_ready(e, offset, end);
    if (own_written < 0) return;
    if (rs_steps == 0 && run.keeps_finals && run.after[e.member] >= 0) {
      // An all-gather after an earlier phase never lands the member's own segment: it is final
      // since that phase wrote it, and a later phase that needs it from this one finds it here.
      made_final(run, e.member, offset, end, own_written);
    }
  }
  const uint32_t to = run.next[e.member];
  const uint32_t sender = run.cores[e.member], receiver = run.cores[to];
  double first_byte = e.time, last_byte = e.time;
  if (e.step == 0) {
    const bool gather_only = in.c.kind() == isa::Collective::ALL_GATHER;
    // An all-gather member's src is its own segment alone.
    const uint64_t src_offset = gather_only ? e.chunk * chunk_size(run) : offset;
    last_byte = hbm_access(sender, own[run.slot[e.member]], src_offset, bytes, e.time);
    first_byte = e.time + hbm_[sender].timing->latency_cycles();
    // An all-gather's member also copies its own part into its result.
    if (gather_only) {
      run.written[e.member] =
          std::max(run.written[e.member],
                   hbm_access(sender, in.dst[run.slot[e.member]], offset, bytes, e.time));
    }
  }
  if (run.routes.empty()) run.routes.assign(run.cores.size(), nullptr);
  const std::vector<uint32_t>*& route = run.routes[e.member];
  if (route == nullptr) {
    route = &interconnect_.route(sender, receiver,
                                 run.pass != nullptr ? run.pass->ties : TieBreak::kPositive);
  }
  const TransferTimes sent = interconnect_.transfer_along(*route, first_byte, bytes, last_byte);
  double arrival = sent.landed;
  members_[sender].work.ici_bytes += bytes;
  // The member reads its next chunk just in time to follow this one onto the link, so that its
  // HBM reads keep pace with the link instead of all queueing at once.
  if (e.step == 0 && e.chunk + 1 < chunks(run, e.segment)) {
    const HbmTiming& hbm = *hbm_[sender].timing;
    const double lead =
        hbm.latency_cycles() + chunk_bytes(run, e.segment, e.chunk + 1) / hbm.bytes_per_cycle();
    push(Event{std::max(e.time, sent.first_link_end - lead), 0, e.run, e.member, 0, e.segment,
               e.chunk + 1});
  }
  ++chunk_transfers_;
  const uint32_t received = e.step + 1;
  Event next{arrival, 0, e.run, to, received, e.segment, e.chunk};
  if (received <= rs_steps) {  // reducing: added on the vector unit to the receiver's own part
    const double written = own_data_written(run, to, offset, end, nullptr);
    if (written < 0 || written > e.time) {
      // The receiver's part, from an earlier phase, is not final yet: the add waits for it (and
      // reads it) once the chunk has landed.
      next.add_waiting = true;
    } else {
      // The receiver knows what is coming: it asks for its part one HBM latency before the chunk
      // is sent (not before the part is there), so an uncontended read never holds up the add.
      const double asked = std::max(written, e.time - hbm_[receiver].timing->latency_cycles());
      const double operand = hbm_access(receiver, own[run.slot[to]], offset, bytes, asked);
      next.time = std::max(arrival, operand) + bytes / 4 / vector_elements_per_cycle_;
      members_[receiver].work.flops += bytes / 4;
    }
  }
  push(next);
}

double CollectiveEngine::hbm_access(uint32_t core, const MemberBuffer& buffer, uint64_t offset,
                                    double bytes, double cycle) {
  const CoreHbm& h = hbm_[core];
  double end = cycle;
  buffer.for_each(offset, static_cast<uint64_t>(bytes), [&](uint64_t address, uint64_t n) {
    end = std::max(end, h.timing->transfer(cycle, address, n));
  });
  members_[core].work.hbm_bytes += bytes;
  hbm_bytes_ += bytes;
  if (h.bandwidth != nullptr && (h.shadow == nullptr || !*h.shadow))
    h.bandwidth->add_bytes(clock_.time_at(cycle), clock_.time_at(end), bytes);
  return end;
}

void CollectiveEngine::member_finished_pass(size_t run, uint32_t member, double cycle) {
  const uint32_t core = runs_[run].cores[member];
  Member& me = members_[core];
  me.finish = std::max({me.finish, cycle, runs_[run].written[member]});
  if (--me.passes_left > 0) return;
  me.done = true;
  me.done_event->notify(until(clock_, me.finish));
}

void CollectiveEngine::push(Event e) {
  e.order = order_++;
  queue_.push(e);
}

uint64_t CollectiveEngine::segment_elements(const PassRun& r, uint32_t segment) const {
  if (r.pass == nullptr) return instances_[r.instance].c.elements();
  return r.pass->segment_size(segment);
}

uint64_t CollectiveEngine::chunk_size(const PassRun& r) const {
  const uint64_t size = instances_[r.instance].c.chunk_bytes();
  return size > 0 ? size : kDefaultChunkBytes;
}

uint64_t CollectiveEngine::chunks(const PassRun& r, uint32_t segment) const {
  const uint64_t bytes = segment_elements(r, segment) * 4;
  return (bytes + chunk_size(r) - 1) / chunk_size(r);
}

double CollectiveEngine::chunk_bytes(const PassRun& r, uint32_t segment, uint32_t chunk) const {
  const uint64_t bytes = segment_elements(r, segment) * 4;
  return static_cast<double>(std::min(chunk_size(r), bytes - uint64_t{chunk} * chunk_size(r)));
}

uint64_t CollectiveEngine::chunk_offset(const PassRun& r, uint32_t segment, uint32_t chunk) const {
  const uint64_t region =
      r.pass != nullptr ? (r.pass->offset + r.pass->segment_begin(segment)) * 4 : 0;
  return region + uint64_t{chunk} * chunk_size(r);
}

void CollectiveEngine::thread() {
  for (;;) {
    if (queue_.empty()) {
      wait(work_);
      continue;
    }
    const uint64_t now = clock_.cycle_at_or_after(sc_core::sc_time_stamp().value()).value;
    const double next = queue_.top().time;
    if (next > static_cast<double>(now)) {
      wait(until(clock_, next), work_);
      continue;
    }
    while (!queue_.empty() && queue_.top().time <= static_cast<double>(now)) {
      const Event e = queue_.top();
      queue_.pop();
      process(e);
    }
  }
}

}  // namespace tpusim::sim
