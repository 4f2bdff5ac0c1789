#pragma once
// The device timeline of one train() or evaluate() call. It is always recorded (only the events
// the step analyzer reads) so that the call can end with an analysis, and written to a trace
// file (train only) when
// SimulatorOptions::trace_path is set, for the loops that hold a step of [trace_first_step,
// trace_last_step] only, so traces of long runs stay small. Host pipeline stages appear as host
// tracks, one slice per batch, on the device's timeline.

#include <functional>
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

namespace tpusim::estimator {

struct TraceRequest {
  std::string path;  // "" for no file
  int64_t first_step = 0;
  int64_t last_step = INT64_MAX;
  traces::TimePs counter_window = 0;  // the file's rate counters averaged over it; 0: exact
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

  // Before a device loop of global steps [first, last]: the file records it when it overlaps
  // the requested steps.
  void before_loop(int64_t first, int64_t last);
  // After the loop: the host stages' spans for the loop's batches.
  void after_loop(runtime::InfeedDriver& driver);
  // Detaches and closes the file. The analysis, or nullopt when the backend has no timeline.
  absl::StatusOr<std::optional<traces::Analysis>> finish();
  uint64_t file_bytes() const { return writer_ ? writer_->bytes_written() : 0; }

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
};

}  // namespace tpusim::estimator
