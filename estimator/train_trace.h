#pragma once
// The device timeline of one train() or evaluate() call. It is always recorded (only the events
// the step analyzer reads) so that the call can end with an analysis, and written to a trace
// file (train only) when
// SimulatorOptions::trace_path is set, for the loops that hold a step of [trace_first_step,
// trace_last_step] only, so traces of long runs stay small. Host pipeline stages appear as host
// tracks, one slice per batch, on the device's timeline.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "runtime/backend/backend.h"
#include "runtime/infeed/infeed_driver.h"
#include "traces/analyzer.h"
#include "traces/counter_binning_sink.h"
#include "traces/recording_sink.h"
#include "traces/step_watch_sink.h"
#include "traces/tee_sink.h"
#include "traces/trace_writer.h"
#include "traces/xprof_sink.h"

namespace tpusim::estimator {

struct TraceRequest {
  std::string path;  // "" for no file
  int64_t first_step = 0;
  int64_t last_step = INT64_MAX;
  traces::TimePs counter_window = 0;  // the file's rate counters averaged over it; 0: exact
  // An XProf profile of the loops holding a step of [first_step, last_step] (xprof_profile.h).
  struct Profile {
    std::string path;  // "" for none: MODEL_DIR/plugins/profile/RUN/HOST.xplane.pb
    int64_t first_step = 0;
    int64_t last_step = INT64_MAX;
    uint32_t cores_per_chip = 1;
    // Batch j of a pipeline (from the run's start) feeds global step
    // first_global_step + j / batches_per_step.
    int64_t first_global_step = 1;
    uint32_t batches_per_step = 1;
    traces::XprofProfile header;  // the device and host, no timeline yet
  } profile;
};

class TrainTrace {
 public:
  // Attaches to the device's trace router; host stage tracks come from the driver's models.
  // `on_step` (may be empty) hears each global step as the device finishes it.
  static absl::StatusOr<std::unique_ptr<TrainTrace>> start(
      const TraceRequest& request, runtime::InfeedDriver& driver,
      std::function<void(int64_t)> on_step = {});
  ~TrainTrace();
  TrainTrace(const TrainTrace&) = delete;
  TrainTrace& operator=(const TrainTrace&) = delete;

  // Before a device loop of global steps [first, last]: the file and the profile record it when
  // it overlaps their requested steps.
  void before_loop(int64_t first, int64_t last);
  // After the loop: the host stages' spans for the loop's batches, and into the profile, the
  // loop's op spans on every core (`timing`'s core_ops).
  void after_loop(runtime::InfeedDriver& driver, const runtime::DeviceTiming& timing);
  // Whether the profile wants the backend's op spans (Backend::keep_op_spans).
  bool profiling() const { return !request_.profile.path.empty(); }
  // Detaches, closes the file and writes the profile. The analysis, or nullopt when the backend
  // has no timeline.
  absl::StatusOr<std::optional<traces::Analysis>> finish();
  uint64_t file_bytes() const { return writer_ ? writer_->bytes_written() : 0; }
  const std::string& profile_path() const { return request_.profile.path; }

 private:
  TrainTrace() = default;

  traces::RecordingSink analysis_;
  std::unique_ptr<traces::StepWatchSink> step_watch_;
  std::unique_ptr<traces::TraceWriter> writer_;
  std::unique_ptr<traces::CounterBinningSink> binning_;  // between the tee and the writer
  traces::TeeSink tee_;
  size_t file_output_ = 0;
  TraceRequest request_;
  std::vector<std::vector<traces::TrackId>> stage_tracks_;  // [pipeline][stage]
  bool attached_ = false;
  // The profile: its steps from the timeline, the rest added after each loop it records.
  std::unique_ptr<traces::XprofDeviceSink> profile_device_;
  size_t profile_output_ = 0;
  bool profile_loop_ = false;  // the loop running now is one the profile records
  std::pair<int64_t, int64_t> loop_steps_{0, 0};
  traces::XprofProfile profile_;
  std::map<std::pair<std::string, std::string>, uint32_t> profile_op_index_;  // (label, op)
  std::vector<uint64_t> profile_batches_;  // per pipeline, batches seen since the start
  void profile_host_stages(size_t pipeline,
                           const std::vector<runtime::HostPipelineModel::StageSpans>& batches,
                           const std::vector<runtime::HostStage>& stages, double origin);
  void profile_ops(const runtime::DeviceTiming& timing);
  traces::XprofCore* profile_core(uint32_t ordinal);  // added when the profile has none yet
  absl::Status write_profile();
};

}  // namespace tpusim::estimator
