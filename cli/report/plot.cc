// Charts drawn with cairo, to PNG and SVG from the same code. See plot.h.
#include "cli/report/plot.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xmod::report {
namespace {

constexpr double kMarginLeft = 84;
constexpr double kMarginTop = 44;
constexpr double kMarginBottom = 62;
constexpr double kLegendWidth = 200;
constexpr double kMarkerRadius = 4.5;
constexpr double kFontSize = 13;
constexpr double kTitleSize = 16;
constexpr char kFont[] = "DejaVu Sans";

struct SurfaceDeleter {
  void operator()(cairo_surface_t* s) const { cairo_surface_destroy(s); }
};
struct ContextDeleter {
  void operator()(cairo_t* cr) const { cairo_destroy(cr); }
};
using SurfacePtr = std::unique_ptr<cairo_surface_t, SurfaceDeleter>;
using ContextPtr = std::unique_ptr<cairo_t, ContextDeleter>;

bool Drawable(double v, Scale scale) {
  return std::isfinite(v) && (scale == Scale::kLinear || v > 0);
}

double Transform(double v, Scale scale) { return scale == Scale::kLog ? std::log10(v) : v; }

// The range drawn on one axis: the axis's own, else the series' drawable points' with a 5%
// margin (in log space on a log axis); a single value is widened around itself.
std::pair<double, double> AxisRange(const Axis& axis, const std::vector<Series>& series,
                                    bool is_x) {
  if (axis.lo < axis.hi) return {axis.lo, axis.hi};
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    const std::vector<double>& v = is_x ? s.x : s.y;
    for (double d : v) {
      if (!Drawable(d, axis.scale)) continue;
      lo = std::min(lo, d);
      hi = std::max(hi, d);
    }
  }
  if (axis.scale == Scale::kLog) {
    if (lo == hi) return {lo / 2, hi * 2};
    const double pad = 0.05 * std::log10(hi / lo);
    return {lo / std::pow(10.0, pad), hi * std::pow(10.0, pad)};
  }
  if (lo == hi) {
    const double half = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    return {lo - half, hi + half};
  }
  const double pad = 0.05 * (hi - lo);
  return {lo - pad, hi + pad};
}

// Data value -> device coordinate along one axis.
struct Mapping {
  Scale scale;
  double lo, hi;  // data range
  double p0, p1;  // device coordinates of lo and hi
  double operator()(double v) const {
    const double t0 = Transform(lo, scale), t1 = Transform(hi, scale);
    return p0 + (Transform(v, scale) - t0) / (t1 - t0) * (p1 - p0);
  }
};

// Ticks at 1-2-5 multiples of a power of ten, about six over [lo, hi].
std::vector<double> LinearTicks(double lo, double hi) {
  const double raw = (hi - lo) / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double norm = raw / mag;
  const double step = (norm < 1.5 ? 1 : norm < 3.5 ? 2 : norm < 7.5 ? 5 : 10) * mag;
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step) {
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return ticks;
}

}  // namespace

std::vector<double> LogTicks(double lo, double hi) {
  std::vector<double> ticks;
  if (hi <= 1024 && hi / lo <= 1024) {  // counts such as K and A: powers of two
    const double step = std::max(1.0, std::ceil(std::log2(hi / lo) / 10));
    for (double e = std::ceil(std::log2(lo) - 1e-9); std::exp2(e) <= hi * (1 + 1e-9); e += step) {
      ticks.push_back(std::exp2(e));
    }
  } else {  // powers of ten, or 1, 2 and 5 times them within about a decade
    const double step = std::max(1.0, std::ceil(std::log10(hi / lo) / 10));
    const std::vector<double> mantissas =
        hi / lo >= 100 ? std::vector<double>{1} : std::vector<double>{1, 2, 5};
    for (double e = std::floor(std::log10(lo)); std::pow(10.0, e) <= hi * (1 + 1e-9); e += step) {
      for (double m : mantissas) {
        const double v = m * std::pow(10.0, e);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
      }
    }
  }
  if (ticks.size() < 2) return LinearTicks(lo, hi);
  return ticks;
}

std::string TickLabel(double v) {
  static constexpr struct {
    double scale;
    const char* suffix;
  } kSi[] = {{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}};
  if (std::fabs(v) >= 1e4) {
    for (const auto& si : kSi) {
      if (std::fabs(v) >= si.scale) return absl::StrFormat("%g%s", v / si.scale, si.suffix);
    }
  }
  return absl::StrFormat("%.6g", v);
}

namespace {

void SetColor(cairo_t* cr, const Color& c) { cairo_set_source_rgb(cr, c.r, c.g, c.b); }

void SetFont(cairo_t* cr, double size, bool bold = false) {
  cairo_select_font_face(cr, kFont, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

// Draws `text` with its reference point at (x, y): align 0 = left, 0.5 = centred, 1 = right;
// the baseline sits `raise` of the text height below y (0.5: vertically centred on y).
void Text(cairo_t* cr, const std::string& text, double x, double y, double align,
          double raise = 0.5) {
  cairo_text_extents_t ext;
  cairo_text_extents(cr, text.c_str(), &ext);
  cairo_move_to(cr, x - align * ext.width - ext.x_bearing, y - ext.y_bearing * raise);
  cairo_show_text(cr, text.c_str());
}

void MarkerPath(cairo_t* cr, Marker marker, double x, double y) {
  const double r = kMarkerRadius;
  switch (marker) {
    case Marker::kCircle:
      cairo_new_sub_path(cr);
      cairo_arc(cr, x, y, r, 0, 2 * M_PI);
      break;
    case Marker::kSquare:
      cairo_rectangle(cr, x - r * 0.85, y - r * 0.85, 1.7 * r, 1.7 * r);
      break;
    case Marker::kTriangle:
      cairo_move_to(cr, x, y - r * 1.1);
      cairo_line_to(cr, x + r, y + r * 0.8);
      cairo_line_to(cr, x - r, y + r * 0.8);
      cairo_close_path(cr);
      break;
    case Marker::kDiamond:
      cairo_move_to(cr, x, y - r * 1.2);
      cairo_line_to(cr, x + r, y);
      cairo_line_to(cr, x, y + r * 1.2);
      cairo_line_to(cr, x - r, y);
      cairo_close_path(cr);
      break;
  }
}

void StrokeMarker(cairo_t* cr, const Series& s, double x, double y) {
  MarkerPath(cr, s.marker, x, y);
  if (s.hollow) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_fill_preserve(cr);
  } else {
    SetColor(cr, s.color);
    cairo_fill_preserve(cr);
  }
  SetColor(cr, s.edge.value_or(s.color));
  cairo_set_line_width(cr, s.edge ? 2.4 : 1.4);
  cairo_stroke(cr);
}

void SetLineStyle(cairo_t* cr, const Series& s) {
  SetColor(cr, s.color);
  cairo_set_line_width(cr, 2);
  if (s.style == SeriesStyle::kDashedLine) {
    const double dash[] = {6, 4};
    cairo_set_dash(cr, dash, 2, 0);
  } else {
    cairo_set_dash(cr, nullptr, 0, 0);
  }
}

void DrawSeries(cairo_t* cr, const Series& s, const Chart& chart, const Mapping& mx,
                const Mapping& my) {
  if (s.style == SeriesStyle::kMarkers) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!Drawable(s.x[i], chart.x.scale) || !Drawable(s.y[i], chart.y.scale)) continue;
      StrokeMarker(cr, s, mx(s.x[i]), my(s.y[i]));
    }
    return;
  }
  SetLineStyle(cr, s);
  bool open = false;  // a polyline is under way; an undrawable value breaks it
  for (size_t i = 0; i < s.x.size(); ++i) {
    if (!Drawable(s.x[i], chart.x.scale) || !Drawable(s.y[i], chart.y.scale)) {
      open = false;
      continue;
    }
    if (open) {
      cairo_line_to(cr, mx(s.x[i]), my(s.y[i]));
    } else {
      cairo_move_to(cr, mx(s.x[i]), my(s.y[i]));
      open = true;
    }
  }
  cairo_stroke(cr);
  cairo_set_dash(cr, nullptr, 0, 0);
}

void DrawLegend(cairo_t* cr, const Chart& chart, double x, double y) {
  SetFont(cr, kFontSize - 1);
  for (const Series& s : chart.series) {
    if (s.label.empty()) continue;
    if (s.style == SeriesStyle::kMarkers) {
      StrokeMarker(cr, s, x + 12, y);
    } else {
      SetLineStyle(cr, s);
      cairo_move_to(cr, x, y);
      cairo_line_to(cr, x + 24, y);
      cairo_stroke(cr);
      cairo_set_dash(cr, nullptr, 0, 0);
    }
    SetColor(cr, kBlack);
    Text(cr, s.label, x + 32, y, 0);
    y += 20;
  }
}

// The plot area in device coordinates and the axes' data ranges mapped onto it.
struct PlotArea {
  double left, top, right, bottom;
  Mapping mx, my;
};

PlotArea LayOut(const Chart& chart, bool legend) {
  const double w = chart.width, h = chart.height;
  const double left = kMarginLeft, top = kMarginTop;
  const double right = w - (legend ? kLegendWidth : 24), bottom = h - kMarginBottom;
  const auto [x_lo, x_hi] = AxisRange(chart.x, chart.series, /*is_x=*/true);
  const auto [y_lo, y_hi] = AxisRange(chart.y, chart.series, /*is_x=*/false);
  const Mapping mx{chart.x.scale, x_lo, x_hi, left, right};
  const Mapping my{chart.y.scale, y_lo, y_hi, bottom, top};
  return {left, top, right, bottom, mx, my};
}

std::vector<double> Ticks(const Mapping& m) {
  return m.scale == Scale::kLog ? LogTicks(m.lo, m.hi) : LinearTicks(m.lo, m.hi);
}

// Grid, ticks and tick labels, and the frame.
void DrawGrid(cairo_t* cr, const PlotArea& a) {
  SetFont(cr, kFontSize);
  cairo_set_line_width(cr, 1);
  const std::vector<double> x_ticks = Ticks(a.mx);
  const std::vector<double> y_ticks = Ticks(a.my);
  for (double t : x_ticks) {
    const double px = a.mx(t);
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, px, a.top);
    cairo_line_to(cr, px, a.bottom);
    cairo_stroke(cr);
    SetColor(cr, kBlack);
    cairo_move_to(cr, px, a.bottom);
    cairo_line_to(cr, px, a.bottom + 5);
    cairo_stroke(cr);
    Text(cr, TickLabel(t), px, a.bottom + 16, 0.5);
  }
  for (double t : y_ticks) {
    const double py = a.my(t);
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, a.left, py);
    cairo_line_to(cr, a.right, py);
    cairo_stroke(cr);
    SetColor(cr, kBlack);
    cairo_move_to(cr, a.left - 5, py);
    cairo_line_to(cr, a.left, py);
    cairo_stroke(cr);
    Text(cr, TickLabel(t), a.left - 8, py, 1);
  }
  SetColor(cr, kBlack);
  cairo_rectangle(cr, a.left, a.top, a.right - a.left, a.bottom - a.top);
  cairo_stroke(cr);
}

// Axis labels and title.
void DrawLabels(cairo_t* cr, const Chart& chart, const PlotArea& a) {
  const double h = chart.height;
  Text(cr, chart.x.label, (a.left + a.right) / 2, h - 18, 0.5);
  cairo_save(cr);
  cairo_translate(cr, 22, (a.top + a.bottom) / 2);
  cairo_rotate(cr, -M_PI / 2);
  Text(cr, chart.y.label, 0, 0, 0.5);
  cairo_restore(cr);
  SetFont(cr, kTitleSize, /*bold=*/true);
  Text(cr, chart.title, (a.left + a.right) / 2, a.top / 2, 0.5);
}

// Series, clipped to the plot area widened by a marker.
void DrawClippedSeries(cairo_t* cr, const Chart& chart, const PlotArea& a) {
  cairo_save(cr);
  cairo_rectangle(cr, a.left - kMarkerRadius * 1.5, a.top - kMarkerRadius * 1.5,
                  a.right - a.left + kMarkerRadius * 3, a.bottom - a.top + kMarkerRadius * 3);
  cairo_clip(cr);
  for (const Series& s : chart.series) DrawSeries(cr, s, chart, a.mx, a.my);
  cairo_restore(cr);
}

void Draw(const Chart& chart, cairo_t* cr) {
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);

  bool legend = false;
  for (const Series& s : chart.series) legend |= !s.label.empty();
  const PlotArea area = LayOut(chart, legend);
  DrawGrid(cr, area);
  DrawLabels(cr, chart, area);
  DrawClippedSeries(cr, chart, area);
  if (legend) DrawLegend(cr, chart, area.right + 14, area.top + 10);
}

absl::Status Check(const Chart& chart) {
  if (chart.width < 64 || chart.width > 8192 || chart.height < 64 || chart.height > 8192) {
    return absl::InvalidArgumentError(absl::StrCat("chart \"", chart.title, "\": size ",
                                                   chart.width, "x", chart.height,
                                                   " outside [64, 8192]"));
  }
  int drawable = 0;
  for (const Series& s : chart.series) {
    if (s.x.size() != s.y.size()) {
      return absl::InvalidArgumentError(absl::StrCat("chart \"", chart.title, "\": series \"",
                                                     s.label, "\" has ", s.x.size(), " x and ",
                                                     s.y.size(), " y values"));
    }
    for (size_t i = 0; i < s.x.size(); ++i) {
      drawable += Drawable(s.x[i], chart.x.scale) && Drawable(s.y[i], chart.y.scale);
    }
  }
  if (drawable == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("chart \"", chart.title, "\": no point can be drawn"));
  }
  return absl::OkStatus();
}

absl::Status CairoError(cairo_status_t status, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("cannot write ", path, ": ", cairo_status_to_string(status)));
}

}  // namespace

Color PaletteColor(int i) {
  static constexpr Color kPalette[] = {
      {0.122, 0.467, 0.706}, {1.000, 0.498, 0.055}, {0.173, 0.627, 0.173}, {0.839, 0.153, 0.157},
      {0.580, 0.404, 0.741}, {0.549, 0.337, 0.294}, {0.890, 0.467, 0.761}, {0.498, 0.498, 0.498},
      {0.737, 0.741, 0.133}, {0.090, 0.745, 0.812}};
  const int n = sizeof(kPalette) / sizeof(kPalette[0]);
  return kPalette[((i % n) + n) % n];
}

absl::Status WriteChart(const Chart& chart, ImageFormat format, const std::string& path) {
  if (absl::Status s = Check(chart); !s.ok()) return s;
  SurfacePtr surface(
      format == ImageFormat::kPng
          ? cairo_image_surface_create(CAIRO_FORMAT_ARGB32, chart.width, chart.height)
          : cairo_svg_surface_create(path.c_str(), chart.width, chart.height));
  if (cairo_status_t s = cairo_surface_status(surface.get()); s != CAIRO_STATUS_SUCCESS) {
    return CairoError(s, path);
  }
  {
    ContextPtr cr(cairo_create(surface.get()));
    Draw(chart, cr.get());
    if (cairo_status_t s = cairo_status(cr.get()); s != CAIRO_STATUS_SUCCESS) {
      return CairoError(s, path);
    }
  }
  cairo_status_t status = CAIRO_STATUS_SUCCESS;
  if (format == ImageFormat::kPng) {
    status = cairo_surface_write_to_png(surface.get(), path.c_str());
  } else {
    cairo_surface_finish(surface.get());
    status = cairo_surface_status(surface.get());
  }
  if (status != CAIRO_STATUS_SUCCESS) return CairoError(status, path);
  return absl::OkStatus();
}

}  // namespace xmod::report
