// Tests of the report figures and directory on a fit of synthetic B.4 sweeps drawn from
// Table 8's parameters (fitter/synthetic.h), by sweep, with out-of-range runs, grouped
// cross-validation and a baseline shift of the anchor-stride sweep: the stored Fit carries
// every observation; the law curves pass through the fit's own Δ of each run; the files are
// written; figures without their runs are skipped; a fit without observations and an
// unwritable directory are errors naming what is wrong.
#include "cli/report/figures.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "cli/report/report.h"
#include "common/files.h"
#include "fitter/sweep_fit.h"
#include "fitter/synthetic.h"

namespace xmod::report {
namespace {

using ::testing::HasSubstr;
using xmod::v1::Fit;
using xmod::v1::FitObservation;

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/figures_test.XXXXXX";
  return mkdtemp(pattern.data());
}

const std::vector<fitter::Observation>& PaperData() {
  static const auto* data = new std::vector<fitter::Observation>([] {
    fitter::SyntheticOptions options;
    options.seed = 3;
    options.out_of_range = true;
    options.sweep_roles = true;
    options.axk_shift = 0.01;
    absl::StatusOr<std::vector<fitter::Observation>> obs = fitter::PaperSweepObservations(options);
    EXPECT_TRUE(obs.ok()) << obs.status();
    return *obs;
  }());
  return *data;
}

const Fit& PaperFit() {
  static const auto* fit = new Fit([] {
    fitter::SweepFitOptions options;
    options.fit.search.generations = 60;
    absl::StatusOr<fitter::FitReport> report = fitter::FitObservations(PaperData(), options);
    EXPECT_TRUE(report.ok()) << report.status();
    Fit out = fitter::ToFitProto(*report);
    out.set_id(5);
    out.set_sweep_id(2);
    return out;
  }());
  return *fit;
}

const Figure& Named(const std::vector<Figure>& figures, const std::string& name) {
  for (const Figure& f : figures) {
    if (f.name == name) return f;
  }
  ADD_FAILURE() << "no figure " << name;
  static const Figure none;
  return none;
}

// True when some line series of `chart` has the point (x, y).
bool OnSomeCurve(const Chart& chart, double x, double y) {
  for (const Series& s : chart.series) {
    if (s.style != SeriesStyle::kLine) continue;
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (std::fabs(s.x[i] - x) < 1e-9 && std::fabs(s.y[i] - y) < 1e-9) return true;
    }
  }
  return false;
}

TEST(FitProtoTest, CarriesEveryObservationWithFittedAndCvDelta) {
  const Fit& fit = PaperFit();
  ASSERT_EQ(fit.observations_size(), static_cast<int>(PaperData().size()));
  EXPECT_TRUE(fit.by_sweep());
  int held_out = 0, with_cv = 0;
  for (const FitObservation& o : fit.observations()) {
    held_out += o.held_out();
    with_cv += o.cv_size() > 0;
    EXPECT_GT(o.capacity_ratio(), 1) << o.name();
    EXPECT_EQ(o.n0(), 4) << o.name();
    EXPECT_FALSE(o.sweeps().empty()) << o.name();
    EXPECT_LT(std::fabs(o.fitted_delta() - o.delta()), 0.03) << o.name();
    if (o.held_out()) EXPECT_TRUE(o.cv().empty()) << o.name();
  }
  EXPECT_EQ(held_out, static_cast<int>(PaperData().size()) - 113);
  EXPECT_EQ(fit.n_obs(), 113);
  EXPECT_GT(with_cv, 90);
}

TEST(FiguresTest, CurvesPassThroughTheFitsOwnDelta) {
  const Fit& fit = PaperFit();
  const std::vector<Figure> figures = BuildFigures(fit);
  ASSERT_EQ(figures.size(), 3u);
  const Figure& by_k = Named(figures, "delta_vs_k");
  const Figure& by_a = Named(figures, "delta_vs_a");
  ASSERT_TRUE(by_k.chart.has_value()) << by_k.skipped;
  ASSERT_TRUE(by_a.chart.has_value()) << by_a.skipped;
  ASSERT_TRUE(Named(figures, "predicted_vs_measured").chart.has_value());
  EXPECT_TRUE(OnSomeCurve(*by_k.chart, 1, 0));  // the dense model
  for (const FitObservation* o : ContextSweepRows(fit)) {
    EXPECT_TRUE(OnSomeCurve(*by_k.chart, o->k(), o->fitted_delta())) << o->name();
  }
  int axk_alone = 0;
  for (const FitObservation* o : AnchorSweepRows(fit)) {
    if (o->sweeps_size() != 1) continue;  // a row shared with nact is modelled with e
    ++axk_alone;
    EXPECT_TRUE(OnSomeCurve(*by_a.chart, o->a(), o->fitted_delta())) << o->name();
  }
  EXPECT_EQ(axk_alone, 24);
}

TEST(ReportTest, WritesEveryFigureAndTheSummary) {
  const std::string dir = TempDir() + "/new/report";
  absl::StatusOr<ReportFiles> files = WriteReport(PaperFit(), "Sweep 2", dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_TRUE(files->skipped.empty());
  std::vector<std::string> expected;
  for (const char* name : {"delta_vs_k", "delta_vs_a", "predicted_vs_measured"}) {
    for (const char* ext : {".png", ".svg"}) expected.push_back(dir + "/" + name + ext);
  }
  expected.push_back(dir + "/report.md");
  EXPECT_EQ(files->written, expected);
  for (const std::string& path : expected) {
    EXPECT_GT(std::filesystem::file_size(path), 100u) << path;
  }
  absl::StatusOr<std::string> md = ReadFile(dir + "/report.md");
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_THAT(*md, HasSubstr("# Sweep 2"));
  EXPECT_THAT(*md, HasSubstr("| R²_Δ (in range) |"));
  EXPECT_THAT(*md, HasSubstr("| RMSE on loss (out of range, "));
  EXPECT_THAT(*md, HasSubstr("| rho_a |"));
  EXPECT_THAT(*md, HasSubstr("| L=2048 |"));
  EXPECT_THAT(*md, HasSubstr("| 556M | 65536 | "));  // K* of the held-out context too
  EXPECT_THAT(*md, HasSubstr("![delta_vs_a](delta_vs_a.png)"));
}

TEST(ReportTest, SkipsFiguresWithoutTheirRuns) {
  // The context sweep alone, in range, without cross-validation: no A ≠ 1 run, nothing
  // held out or cross-validated.
  Fit fit = PaperFit();
  fit.clear_observations();
  for (const FitObservation& o : PaperFit().observations()) {
    if (o.held_out() || o.a() != 1) continue;
    FitObservation* copy = fit.add_observations();
    *copy = o;
    copy->clear_cv();
  }
  const std::string dir = TempDir();
  absl::StatusOr<ReportFiles> files = WriteReport(fit, "A = 1 only", dir);
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->written,
            std::vector<std::string>(
                {dir + "/delta_vs_k.png", dir + "/delta_vs_k.svg", dir + "/report.md"}));
  ASSERT_EQ(files->skipped.size(), 2u);
  EXPECT_THAT(files->skipped[0], HasSubstr("delta_vs_a: no run with A ≠ 1"));
  EXPECT_THAT(files->skipped[1], HasSubstr("predicted_vs_measured: no out-of-range run"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/delta_vs_a.png"));
  absl::StatusOr<std::string> md = ReadFile(dir + "/report.md");
  ASSERT_TRUE(md.ok());
  EXPECT_THAT(*md, HasSubstr("Skipped: no run with A ≠ 1"));
}

TEST(ReportTest, WithoutSweepNamesTheFiguresPickTheirRunsByA) {
  Fit fit = PaperFit();
  for (FitObservation& o : *fit.mutable_observations()) o.clear_sweeps();
  const std::vector<const FitObservation*> context = ContextSweepRows(fit);
  ASSERT_FALSE(context.empty());
  for (const FitObservation* o : context) {
    EXPECT_EQ(o->backbone(), "556M");
    EXPECT_EQ(o->a(), 1);
  }
  const std::vector<const FitObservation*> anchor = AnchorSweepRows(fit);
  ASSERT_FALSE(anchor.empty());
  for (const FitObservation* o : anchor) {
    EXPECT_EQ(o->backbone(), "165M");
    EXPECT_EQ(o->seq_len(), 32768);
  }
}

TEST(ReportTest, FitWithoutObservationsIsAnError) {
  Fit fit = PaperFit();
  fit.clear_observations();
  absl::StatusOr<ReportFiles> files = WriteReport(fit, "old", TempDir());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(files.status().message(), HasSubstr("fit 5 of sweep 2 carries no observations"));
}

TEST(ReportTest, UnwritableDirectoryIsNamed) {
  const std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/file", "x").ok());
  absl::StatusOr<ReportFiles> files = WriteReport(PaperFit(), "t", dir + "/file/out");
  EXPECT_EQ(files.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(files.status().message(), HasSubstr(dir + "/file/out"));
}

}  // namespace
}  // namespace xmod::report
