// The pilot figure of `xmodctl pilot select --output DIR`, in the style of the paper's
// Fig. 4, from a SelectPilotResponse (proto/xmod/v1/pilot.proto): measured validation loss
// against total parameters (log axis), X-MoD configurations as circles and MoE ones as
// diamonds, one colour per nominal K; green dashed lines at the total-parameter budgets of
// the selected MoE baselines; the baselines and their X-MoD picks ringed in black (Fig. 4's
// selected pairs). Configurations without a measured loss (pending, no result) are not
// drawn. Fig. 4's marker area by total parameters is left out (the x axis shows them), and so
// are its point labels (the table of `xmodctl pilot select` names every point).
// Pure functions; thread-safe.
#ifndef XMOD_CLI_REPORT_PILOT_FIGURE_H_
#define XMOD_CLI_REPORT_PILOT_FIGURE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/report/plot.h"
#include "xmod/v1/pilot.pb.h"

namespace xmod::report {

// The chart above; INVALID_ARGUMENT when no configuration has a measured loss.
absl::StatusOr<Chart> PilotChart(const xmod::v1::SelectPilotResponse& pilot);

// Creates `dir` (and its parents) and writes DIR/pilot_selection.png and .svg; the paths
// written. UNAVAILABLE naming the path when a file cannot be written.
absl::StatusOr<std::vector<std::string>> WritePilotFigure(
    const xmod::v1::SelectPilotResponse& pilot, const std::string& dir);

}  // namespace xmod::report

#endif  // XMOD_CLI_REPORT_PILOT_FIGURE_H_
