// Tests of the cairo chart library: a chart written as PNG (signature and pixel size) and as
// SVG (well-formed XML of the chart's size, with paths in each series' colour); bad input and
// an unwritable path are errors naming the series or the path.
#include "cli/report/plot.h"

#include <expat.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_format.h"
#include "common/files.h"

namespace xmod::report {
namespace {

using ::testing::HasSubstr;

std::string TempDir() {
  std::string pattern = ::testing::TempDir() + "/plot_test.XXXXXX";
  return mkdtemp(pattern.data());
}

Chart TwoSeries() {
  Chart chart;
  chart.title = "Δ against K";
  chart.x = {"K", Scale::kLog};
  chart.y = {"Δ"};
  Series points;
  points.label = "L=2k";
  points.color = PaletteColor(0);
  points.x = {2, 4, 8, 16};
  points.y = {0.01, -0.02, -0.015, 0.03};
  Series curve;
  curve.label = "law";
  curve.color = PaletteColor(1);
  curve.style = SeriesStyle::kLine;
  curve.x = {1, 2, 4, 8, 16, 32};
  curve.y = {0, 0.008, -0.018, -0.012, 0.025, 0.08};
  chart.series = {points, curve};
  chart.width = 640;
  chart.height = 400;
  return chart;
}

uint32_t BigEndian32(const std::string& bytes, size_t at) {
  return (uint32_t(uint8_t(bytes[at])) << 24) | (uint32_t(uint8_t(bytes[at + 1])) << 16) |
         (uint32_t(uint8_t(bytes[at + 2])) << 8) | uint32_t(uint8_t(bytes[at + 3]));
}

// What an expat pass over an SVG file saw.
struct SvgSummary {
  std::string root;
  std::string width, height;
  std::vector<std::string> path_styles;  // style attribute (or stroke/fill) of each <path>
};

void StartElement(void* data, const char* name, const char** attrs) {
  auto* s = static_cast<SvgSummary*>(data);
  const std::string tag = name;
  if (s->root.empty()) s->root = tag;
  std::string style;
  for (int i = 0; attrs[i] != nullptr; i += 2) {
    const std::string key = attrs[i];
    if (tag == "svg" && key == "width") s->width = attrs[i + 1];
    if (tag == "svg" && key == "height") s->height = attrs[i + 1];
    if (key == "style" || key == "stroke" || key == "fill") style += attrs[i + 1];
  }
  if (tag == "path") s->path_styles.push_back(style);
}

// Parses `xml`; false (with the parser's message) when it is not well-formed.
bool ParseSvg(const std::string& xml, SvgSummary* out, std::string* error) {
  XML_Parser parser = XML_ParserCreate(nullptr);
  XML_SetUserData(parser, out);
  XML_SetStartElementHandler(parser, StartElement);
  const bool ok = XML_Parse(parser, xml.data(), static_cast<int>(xml.size()), 1) == XML_STATUS_OK;
  if (!ok) *error = XML_ErrorString(XML_GetErrorCode(parser));
  XML_ParserFree(parser);
  return ok;
}

// The colour as cairo's SVG surface writes it: rgb(12.2%,46.7%,70.6%) (shortest form; the
// palette's components have three decimals).
std::string CairoSvgColor(const Color& c) {
  return absl::StrFormat("rgb(%g%%,%g%%,%g%%)", c.r * 100, c.g * 100, c.b * 100);
}

TEST(PlotTest, WritesPngOfTheChartSize) {
  const std::string path = TempDir() + "/chart.png";
  ASSERT_TRUE(WriteChart(TwoSeries(), ImageFormat::kPng, path).ok());
  absl::StatusOr<std::string> png = ReadFile(path);
  ASSERT_TRUE(png.ok()) << png.status();
  ASSERT_GT(png->size(), 24u);
  EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png->substr(12, 4), "IHDR");
  EXPECT_EQ(BigEndian32(*png, 16), 640u);
  EXPECT_EQ(BigEndian32(*png, 20), 400u);
}

TEST(PlotTest, WritesSvgWithEverySeries) {
  const Chart chart = TwoSeries();
  const std::string path = TempDir() + "/chart.svg";
  ASSERT_TRUE(WriteChart(chart, ImageFormat::kSvg, path).ok());
  absl::StatusOr<std::string> svg = ReadFile(path);
  ASSERT_TRUE(svg.ok()) << svg.status();
  SvgSummary summary;
  std::string error;
  ASSERT_TRUE(ParseSvg(*svg, &summary, &error)) << error;
  EXPECT_EQ(summary.root, "svg");
  EXPECT_THAT(summary.width, ::testing::StartsWith("640"));
  EXPECT_THAT(summary.height, ::testing::StartsWith("400"));
  for (const Series& s : chart.series) {
    int paths = 0;
    for (const std::string& style : summary.path_styles) {
      paths += style.find(CairoSvgColor(s.color)) != std::string::npos;
    }
    // Markers: a path per point plus the legend's; a line: one path and the legend's.
    EXPECT_GE(paths, s.style == SeriesStyle::kMarkers ? int(s.x.size()) : 2) << s.label;
  }
}

TEST(PlotTest, LeavesOutValuesALogAxisCannotShow) {
  Chart chart = TwoSeries();
  chart.series[1].y[0] = -1;  // fine on the linear y axis
  chart.series[0].x = {0, -2, 4, 8};
  EXPECT_TRUE(WriteChart(chart, ImageFormat::kPng, TempDir() + "/c.png").ok());
  chart.series = {chart.series[0]};
  chart.series[0].x = {0, -1, 0, -3};  // nothing drawable on the log x axis
  absl::Status s = WriteChart(chart, ImageFormat::kPng, TempDir() + "/d.png");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no point can be drawn"));
}

TEST(PlotTest, RefusesSeriesOfUnequalLength) {
  Chart chart = TwoSeries();
  chart.series[0].y.pop_back();
  absl::Status s = WriteChart(chart, ImageFormat::kSvg, TempDir() + "/c.svg");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("series \"L=2k\" has 4 x and 3 y values"));
}

TEST(PlotTest, UnwritablePathIsNamed) {
  const std::string dir = TempDir();
  ASSERT_TRUE(WriteFileAtomic(dir + "/file", "x").ok());
  for (ImageFormat format : {ImageFormat::kPng, ImageFormat::kSvg}) {
    const std::string path = dir + "/file/chart";
    absl::Status s = WriteChart(TwoSeries(), format, path);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_THAT(s.message(), HasSubstr(path));
  }
}

// Log axes: K and A by powers of two; total parameters (the pilot figure's x axis, millions
// to billions) by round decimal values, labelled with SI suffixes rather than "4.1943e+06".
TEST(PlotTest, LogTicksAreRoundAndReadable) {
  EXPECT_EQ(LogTicks(1.5, 20), (std::vector<double>{2, 4, 8, 16}));
  EXPECT_EQ(LogTicks(2.55e6, 12.8e6), (std::vector<double>{5e6, 1e7}));
  EXPECT_EQ(LogTicks(4e8, 6e9), (std::vector<double>{5e8, 1e9, 2e9, 5e9}));
  EXPECT_EQ(LogTicks(1e3, 1e9), (std::vector<double>{1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}));
  EXPECT_EQ(TickLabel(5e6), "5M");
  EXPECT_EQ(TickLabel(2.5e9), "2.5G");
  EXPECT_EQ(TickLabel(16), "16");
  EXPECT_EQ(TickLabel(0.015), "0.015");
  EXPECT_EQ(TickLabel(1e4), "10k");
}

}  // namespace
}  // namespace xmod::report
