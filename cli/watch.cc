// Live sweep view (see watch.h).
#include "cli/watch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/format.h"
#include "cli/render.h"

namespace xmod::cli {
namespace {

std::string Bar(double fraction) {
  fraction = std::clamp(std::isfinite(fraction) ? fraction : 0.0, 0.0, 1.0);
  int filled = static_cast<int>(std::floor(fraction * kWatchBarWidth + 1e-9));
  return absl::StrCat("[", std::string(filled, '#'), std::string(kWatchBarWidth - filled, '.'),
                      "]");
}

// The line cut to columns - 1 code points (UTF-8 aware); whole when columns <= 0.
std::string Fit(const std::string& line, int columns) {
  if (columns <= 1) return line;
  int seen = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80 && ++seen == columns) {
      return line.substr(0, i);
    }
  }
  return line;
}

int Count(const xmod::v1::Sweep& sweep, const char* state) {
  auto it = sweep.run_counts().find(state);
  return it == sweep.run_counts().end() ? 0 : it->second;
}

}  // namespace

std::vector<int64_t> WatchView::Apply(const xmod::v1::WatchSweepEvent& event) {
  if (event.snapshot()) {
    runs_.clear();
    last_line_.clear();
  }
  if (event.has_sweep()) sweep_ = event.sweep();
  for (const auto& run : event.runs()) runs_[run.id()] = run;
  // Names are padded to the longest, so a new long name changes every line.
  std::vector<int64_t> changed;
  for (const auto& [id, run] : runs_) {
    std::string line = RunLine(id);
    auto it = last_line_.find(id);
    if (it == last_line_.end() || it->second != line) {
      last_line_[id] = line;
      changed.push_back(id);
    }
  }
  return changed;
}

std::string WatchView::RunLine(int64_t run_id) const {
  auto it = runs_.find(run_id);
  if (it == runs_.end()) return "";
  const xmod::v1::Run& run = it->second;
  size_t name_width = 0;
  for (const auto& [id, r] : runs_) name_width = std::max(name_width, r.name().size());
  const auto& p = run.progress();
  double budget = RunBudget(run);
  double fraction = budget > 0 ? p.flops() / budget : 0;
  if (run.state() == xmod::v1::SUCCEEDED) fraction = 1;
  std::string line =
      absl::StrFormat("%-*s  %-9s  %s %4s  step %6d  loss %7s  val %7s", name_width, run.name(),
                      RunStateName(run.state()), Bar(fraction), FormatPercent(fraction), p.step(),
                      FormatLoss(p.train_loss()), FormatLoss(p.val_loss()));
  if (p.has_live_delta()) {
    absl::StrAppend(&line, absl::StrFormat("  Δ %+.4f @%s", p.live_delta(),
                                           FormatFlops(p.live_delta_flops())));
  }
  if (run.censored()) absl::StrAppend(&line, "  stopped early");
  if (run.state() == xmod::v1::RUNNING && p.tokens_per_second() > 0) {
    absl::StrAppend(&line, "  ", FormatRate(p.tokens_per_second()), " tok/s");
  }
  if ((run.state() == xmod::v1::FAILED || run.state() == xmod::v1::QUEUED) &&
      !run.error().empty()) {
    std::string error = run.error().substr(0, run.error().find('\n'));
    absl::StrAppend(&line, "  error: ", error.substr(0, 80));
  }
  return line;
}

std::string WatchView::SummaryLine() const {
  return absl::StrFormat(
      "sweep %d %s: %s  %d running  %d queued  %d succeeded  %d failed  %d cancelled", sweep_.id(),
      sweep_.name(), SweepStateName(sweep_.state()), Count(sweep_, "RUNNING"),
      Count(sweep_, "QUEUED"), Count(sweep_, "SUCCEEDED"), Count(sweep_, "FAILED"),
      Count(sweep_, "CANCELLED"));
}

std::vector<std::string> WatchView::Lines() const {
  std::vector<std::string> lines = {SummaryLine()};
  for (const auto& [id, run] : runs_) lines.push_back(RunLine(id));
  return lines;
}

bool WatchView::Ended() const {
  return sweep_.state() == xmod::v1::SWEEP_DONE || sweep_.state() == xmod::v1::SWEEP_FAILED ||
         sweep_.state() == xmod::v1::SWEEP_CANCELLED;
}

void WatchPrinter::Print(const WatchView& view, const std::vector<int64_t>& changed,
                         bool snapshot) {
  if (tty_) {
    // Move to the top of the block drawn last time, then redraw every line (clearing it).
    if (drawn_lines_ > 0) *out_ << "\x1b[" << drawn_lines_ << "A";
    std::vector<std::string> lines = view.Lines();
    for (const auto& line : lines) *out_ << "\r\x1b[2K" << Fit(line, columns_) << "\n";
    drawn_lines_ = lines.size();
    out_->flush();
    return;
  }
  std::string summary = view.SummaryLine();
  if (snapshot || summary != last_summary_) {
    *out_ << summary << "\n";
    last_summary_ = summary;
  }
  for (int64_t id : changed) *out_ << view.RunLine(id) << "\n";
  out_->flush();
}

void WatchPrinter::Finish(const WatchView& view) {
  if (tty_) return;
  std::string summary = view.SummaryLine();
  if (summary != last_summary_) *out_ << summary << "\n";
  out_->flush();
}

}  // namespace xmod::cli
