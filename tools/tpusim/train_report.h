#pragma once
// What `tpusim train` prints and reports of a run: the line it starts with, the JSON report
// (--report) and the summary after it.

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "estimator/estimator.h"
#include "tools/tpusim/train_job.h"

namespace tpusim::cli {

// "training MODEL on SLICE (N cores), global batch B, ..." and the backend's mixed-precision note.
void print_start(const TrainJob& job);
// The run's figures as `--report` writes them; `eval` the evaluation's metrics (none: null).
nlohmann::ordered_json train_report(const TrainJob& job, const estimator::TrainResult& r,
                                    const std::map<std::string, double>& eval);
// The final loss and evaluation, the simulated step and its breakdown, the analysis, the
// costliest ops and the trace written.
void print_summary(const TrainJob& job, const estimator::TrainResult& r,
                   const std::map<std::string, double>& eval, const nlohmann::ordered_json& report);

}  // namespace tpusim::cli
