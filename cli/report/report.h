// The output directory of `xmodctl report`: every figure of figures.h as DIR/<name>.png and
// DIR/<name>.svg, and DIR/report.md — the fit's goodness (R²_Δ, RMSE, out-of-range RMSE),
// its parameters (with the bootstrap interval when there is one), the grouped
// cross-validation errors, K* (A = 1) and (K*, A*) per context length of the context sweep
// from fitter::Recommend, and the figures (or why one was skipped). Existing files of the
// same names are replaced; nothing else in DIR is touched. Thread-compatible.
#ifndef XMOD_CLI_REPORT_REPORT_H_
#define XMOD_CLI_REPORT_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/report/figures.h"
#include "xmod/v1/coordinator.pb.h"

namespace xmod::report {

struct ReportFiles {
  std::vector<std::string> written;  // paths, in the order written; report.md last
  std::vector<std::string> skipped;  // "delta_vs_a: no run with A ≠ 1 (...)"
};

// report.md's text for `fit` under the heading `title`, listing `figures`.
std::string ReportMarkdown(const xmod::v1::Fit& fit, const std::string& title,
                           const std::vector<Figure>& figures);

// Creates `dir` (and its parents) and writes the files above. FAILED_PRECONDITION when the
// fit carries no observations; UNAVAILABLE naming the path when `dir` cannot be created or a
// file cannot be written (files written before the failure stay).
absl::StatusOr<ReportFiles> WriteReport(const xmod::v1::Fit& fit, const std::string& title,
                                        const std::string& dir);

}  // namespace xmod::report

#endif  // XMOD_CLI_REPORT_REPORT_H_
