#pragma once
// A simulated run as XProf profiles a TPU job (docs/profiling.md, "In XProf"): what the run
// gives, in tpusim's terms, and write_xspace, which lays it out as the planes, lines and stats
// XProf's converters read: a plane per simulated TensorCore (/device:TPU:N) with its "Steps",
// "XLA Modules" and "XLA Ops" lines, the device's peaks as plane stats, and a host plane
// (/host:CPU) whose lines are the input pipeline's stages, named as tf.data names its iterators,
// and the infeed enqueues. Every step's events carry its global step as `group_id`, on every
// plane, so XProf takes the profile as grouped and links host and device steps by it.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <absl/status/status.h>

#include "traces/sink.h"
#include "traces/xplane.pb.h"

namespace tpusim::traces {

// One op of the device program: a graph node as the compiler lowered it.
struct XprofOp {
  std::string name;            // the node's label: "dense_1/matmul"
  std::string kind;            // tpusim's op: "matmul", "fused", "infeed", "cross_replica_sum", ...
  int64_t flops = 0;           // per execution
  int64_t bytes_accessed = 0;  // HBM bytes per execution
};

struct XprofSpan {
  TimePs start = 0, end = 0;
};

// One execution of an op on a core: [start, end) from its first instruction's start to its last
// one's end (ops overlap there: the next op's DMAs start under this one's compute).
struct XprofOpRun {
  uint32_t op = 0;  // index into XprofProfile::ops
  int64_t step = 0;
  XprofSpan span;
};

struct XprofCore {
  uint32_t ordinal = 0;                // TPU:N
  std::map<int64_t, XprofSpan> steps;  // global step -> its span on this core
  std::vector<XprofOpRun> ops;
  // The infeed unit's waits for the host: each counts as part of the infeed op that follows it,
  // as a TPU's infeed op blocks until its data arrives (and XProf takes an infeed op's time as
  // the step's time waiting for input).
  std::vector<XprofSpan> infeed_waits;
};

// One stage of a host's input pipeline, source first, with its span for each batch.
struct XprofHostStage {
  std::string name;  // tpusim's: "read", "parse", "map", "batch", "enqueue", ...
  uint32_t threads = 1;
  struct Batch {
    int64_t step = 0;  // the global step the batch feeds
    XprofSpan span;
  };
  std::vector<Batch> batches;
};

struct XprofProfile {
  std::string host = "localhost";
  std::string device_type;               // "TPU v3": XProf needs "TPU" in it to analyse TPU steps
  double peak_teraflops_per_second = 0;  // one core's
  double peak_hbm_gigabytes_per_second = 0;  // one core's share of its chip's
  std::string program = "train_step";        // the module every step runs
  std::vector<XprofOp> ops;
  std::vector<XprofCore> cores;
  std::vector<XprofHostStage> host_stages;
};

// XLA's category for a tpusim op kind ("matmul" -> "convolution", "fused" -> "loop fusion",
// "cross_replica_sum" -> "all-reduce", "infeed" -> "infeed", ...).
std::string xla_category(const std::string& kind);

// The tf.data iterator name of stage `i` of `stages` (source first, the last being the
// enqueue): "Iterator::Root::Prefetch::Batch::Map" for the map before a batch.
std::string iterator_name(const std::vector<XprofHostStage>& stages, size_t i);

// The profile as an XSpace.
xprof::XSpace to_xspace(const XprofProfile& profile);

// Writes `profile` to MODEL_DIR/plugins/profile/RUN/HOST.xplane.pb as `path` names it (folders
// created); errors name the path.
absl::Status write_xspace(const XprofProfile& profile, const std::string& path);

}  // namespace tpusim::traces
