// A small chart library over cairo for `xmodctl report`: a Chart (title, two axes, series,
// legend) is drawn by one function onto either a PNG image surface or an SVG surface, so both
// files show the same picture. Axes are linear or logarithmic with ticks at round values
// (1-2-5 steps; powers of two, or 1-2-5 times powers of ten, on a log axis); each series is a
// colour with markers (measured points) or a line (law curves, y = x). Values that are not finite,
// or not > 0 on a log axis, are left out of the drawing.
//
// Layout (pixels for PNG, points for SVG):
//
//   +--------------------------------------------------+
//   |                     title                        |
//   |  y  +--------------------------+   legend        |
//   |  l  |      plot area (clipped) |   ■ series 1    |
//   |  a  |                          |   — series 2    |
//   |  b  +--------------------------+                 |
//   |          ticks, x label                          |
//   +--------------------------------------------------+
//
// Pure functions; thread-compatible (every call owns its cairo surface and context).
#ifndef XMOD_CLI_REPORT_PLOT_H_
#define XMOD_CLI_REPORT_PLOT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace xmod::report {

struct Color {
  double r = 0, g = 0, b = 0;  // each in [0, 1]
};

// The i-th colour of a qualitative palette (Tableau 10; cycles after ten).
Color PaletteColor(int i);
inline constexpr Color kGrey{0.62, 0.62, 0.62};
inline constexpr Color kBlack{0.1, 0.1, 0.1};

enum class Scale { kLinear, kLog };

struct Axis {
  std::string label;
  Scale scale = Scale::kLinear;
  // The range drawn; when !(lo < hi) it is taken from the series with a 5% margin.
  double lo = 0, hi = 0;
};

enum class SeriesStyle { kMarkers, kLine, kDashedLine };
enum class Marker { kCircle, kSquare, kTriangle, kDiamond };

struct Series {
  std::string label;  // legend entry; empty = not in the legend
  Color color;
  SeriesStyle style = SeriesStyle::kMarkers;
  Marker marker = Marker::kCircle;
  bool hollow = false;  // markers drawn as outlines
  // Markers ringed in this colour (a thicker outline) instead of their own: marks chosen
  // points, as the black outlines of the paper's Fig. 4.
  std::optional<Color> edge;
  std::vector<double> x, y;
};

struct Chart {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  int width = 820, height = 540;
};

enum class ImageFormat { kPng, kSvg };

// The ticks of a log axis over [lo, hi] (0 < lo < hi): powers of two for small counts
// (hi <= 1024, as K and A; every n-th over more than ten octaves); otherwise powers of ten,
// and 1, 2 and 5 times them when the range spans less than two decades (total parameters);
// linear ticks when fewer than two of those fall inside.
std::vector<double> LogTicks(double lo, double hi);

// A tick's text: "%.6g", and from 10,000 up with an SI suffix ("5M", "1.5G").
std::string TickLabel(double v);

// Draws `chart` into the file `path` (created or replaced). INVALID_ARGUMENT naming the
// series when its x and y differ in length, or when no point of any series can be drawn;
// INVALID_ARGUMENT for a size outside [64, 8192]; UNAVAILABLE naming `path` when cairo
// cannot write it.
absl::Status WriteChart(const Chart& chart, ImageFormat format, const std::string& path);

}  // namespace xmod::report

#endif  // XMOD_CLI_REPORT_PLOT_H_
