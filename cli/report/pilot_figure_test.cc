// The Fig. 4-style pilot figure (pilot_figure.h) of a selection made by the B.3 rule
// (fitter/pilot_selection.h): green budget lines at the baselines' N, the selected pairs
// ringed in black, unmeasured configurations left out, and both files written.
#include "cli/report/pilot_figure.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "fitter/pilot_selection.h"

namespace xmod::report {
namespace {

fitter::PilotRun Run(xmod::v1::Architecture arch, int k, double a, const std::string& moe, double n,
                     std::optional<double> loss, xmod::v1::RunState state) {
  static int64_t id = 0;
  fitter::PilotRun r;
  r.run_id = ++id;
  r.arch = arch;
  r.state = state;
  r.backbone = "165M";
  r.seq_len = 32768;
  r.flop_budget = 3e19;
  r.k = k;
  if (arch == xmod::v1::XMOD) r.a = a;
  r.moe = moe;
  r.total_params = n;
  r.final_val_loss = loss;
  r.replicate_key = absl::StrCat(arch, k, a, moe);
  return r;
}

xmod::v1::SelectPilotResponse Pilot() {
  using xmod::v1::MOE;
  using xmod::v1::SUCCEEDED;
  using xmod::v1::XMOD;
  absl::StatusOr<xmod::v1::SelectPilotResponse> pilot = fitter::SelectPilot(
      9, {Run(MOE, 1, 0, "8:64+0", 1.0e9, 3.15, SUCCEEDED),
          Run(MOE, 1, 0, "6:64+2", 1.1e9, 3.12, SUCCEEDED),
          Run(XMOD, 8, 4, "", 1.05e9, 3.05, SUCCEEDED), Run(XMOD, 8, 2, "", 0.6e9, 3.10, SUCCEEDED),
          Run(XMOD, 8, 5, "", 1.08e9, std::nullopt, xmod::v1::RUNNING)});
  EXPECT_TRUE(pilot.ok()) << pilot.status();
  return *pilot;
}

TEST(PilotFigureTest, MarksBaselineBudgetsAndSelectedPairs) {
  absl::StatusOr<Chart> chart = PilotChart(Pilot());
  ASSERT_TRUE(chart.ok()) << chart.status();
  int budget_lines = 0, points = 0;
  std::vector<double> ringed_x;
  for (const Series& s : chart->series) {
    if (s.style == SeriesStyle::kDashedLine) {
      ++budget_lines;
      EXPECT_EQ(s.x, (std::vector<double>{1.1e9, 1.1e9}));  // the baseline: 6:64+2
      continue;
    }
    points += static_cast<int>(s.x.size());
    if (s.edge.has_value()) ringed_x.insert(ringed_x.end(), s.x.begin(), s.x.end());
  }
  EXPECT_EQ(budget_lines, 1);
  EXPECT_EQ(points, 4);  // A5K8 is still running: not drawn
  std::sort(ringed_x.begin(), ringed_x.end());
  EXPECT_EQ(ringed_x, (std::vector<double>{1.05e9, 1.1e9}));  // MoE 8:64s2 and its pick A4K8
  EXPECT_EQ(chart->x.scale, Scale::kLog);
}

TEST(PilotFigureTest, WritesPngAndSvg) {
  std::string pattern = ::testing::TempDir() + "/pilot_figure_test.XXXXXX";
  const std::string dir = std::string(mkdtemp(pattern.data())) + "/sub";
  absl::StatusOr<std::vector<std::string>> written = WritePilotFigure(Pilot(), dir);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(*written,
            (std::vector<std::string>{dir + "/pilot_selection.png", dir + "/pilot_selection.svg"}));
  std::ifstream png(written->at(0), std::ios::binary);
  std::string head(8, '\0');
  png.read(head.data(), 8);
  EXPECT_EQ(head, "\x89PNG\r\n\x1a\n");
  std::ifstream svg(written->at(1));
  const std::string text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_NE(text.find("<svg"), std::string::npos);
}

TEST(PilotFigureTest, NothingMeasuredIsAnError) {
  xmod::v1::SelectPilotResponse pilot = Pilot();
  for (auto& c : *pilot.mutable_configurations()) c.set_status(xmod::v1::PILOT_PENDING);
  EXPECT_EQ(PilotChart(pilot).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace xmod::report
