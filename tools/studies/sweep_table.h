#pragma once
// The results of a `tpusim sweep`: one row per grid point with the figures of its run's JSON
// report flattened to columns ("sim_seconds_per_step", "analysis.step_breakdown.compute"),
// written as CSV and JSON.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/studies/sweep_grid.h"

namespace tpusim::studies {

struct SweepRow {
  SweepPoint point;
  bool ended = false;             // its run has ended (rows of a sweep still running may not)
  int exit_code = 0;              // -1: lost with the MPI rank that ran it
  int rank = 0;                   // the MPI rank that ran it (0 when not under MPI)
  double seconds = 0;             // host seconds its run took
  std::string failure;            // why it failed without an exit code of its own
  std::string log;                // the run's output
  nlohmann::ordered_json report;  // null when the run wrote none (set with set_report)
  nlohmann::ordered_json flat;    // flatten_report(report)
};

// The report's scalars (numbers, strings, booleans) keyed by their dotted path; arrays are left
// out (per-step lists, advice). A report that is itself a list of objects (validate's cases) has
// each one's scalars under its "name" (or its index).
nlohmann::ordered_json flatten_report(const nlohmann::ordered_json& report);

// Sets the row's report and its flattened figures.
void set_report(SweepRow* row, nlohmann::ordered_json report);

// The report columns of the rows: every flattened key, in first-seen order.
std::vector<std::string> report_columns(const std::vector<SweepRow>& rows);

// "point,<axis fields...>,exit_code,<report columns...>" and a row per point; a failed point
// has its axis values and exit code and empty figures.
std::string sweep_csv(const std::vector<SweepAxis>& axes, const std::vector<SweepRow>& rows);

// {"axes": [{field, values, kind}], "metric", "points": [{point, values, exit_code, failure (when
// it has one), rank, host_seconds, log, report}]}.
nlohmann::ordered_json sweep_json(const std::vector<SweepAxis>& axes,
                                  const std::vector<SweepRow>& rows, const std::string& metric);

// Whether every row with an input classification (train's analysis.classification) is
// input-bound, and at least one has it: the host's input pipeline sets every point's step time.
bool every_point_input_bound(const std::vector<SweepRow>& rows);

// A row's value for a flattened column, or NaN when it has none or it is not a number.
double row_number(const SweepRow& row, const std::string& column);

}  // namespace tpusim::studies
