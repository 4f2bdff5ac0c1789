#pragma once
// The plots of a `tpusim sweep`, drawn by gnuplot as PNG and SVG in DIR/plots: the metric
// against the first axis (a line per combination of the other axes), the analyzer's step-time
// breakdown as stacked bars per point, and a roofline of each point's ops when the reports
// carry an op profile. Each plot keeps its data (.dat) and script (.gp) next to the images, so
// it can be restyled and redrawn by hand.

#include <string>
#include <vector>

#include <absl/status/statusor.h>

#include "tools/studies/sweep_table.h"

namespace tpusim::studies {

// Writes the plots with the gnuplot at `gnuplot`; returns the image files drawn. The error
// names the script and gnuplot's log.
absl::StatusOr<std::vector<std::string>> draw_sweep_plots(const std::string& gnuplot,
                                                          const std::string& dir,
                                                          const std::vector<SweepAxis>& axes,
                                                          const std::vector<SweepRow>& rows,
                                                          const std::string& metric);

}  // namespace tpusim::studies
