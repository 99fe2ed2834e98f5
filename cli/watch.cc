// Live sweep view (see watch.h).
#include "cli/watch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

int Count(const xmod::v1::Sweep& sweep, const char* state) {
  auto it = sweep.run_counts().find(state);
  return it == sweep.run_counts().end() ? 0 : it->second;
}

size_t NameWidth(const std::map<int64_t, xmod::v1::Run>& runs) {
  size_t width = 4;  // "NAME"
  for (const auto& [id, run] : runs) width = std::max(width, run.name().size());
  return width;
}

// "[####......]  45%": the bar and the percentage of a fraction.
std::string ProgressCell(double fraction) {
  return absl::StrCat(Bar(fraction), " ", absl::StrFormat("%4s", FormatPercent(fraction)));
}

// What a row ends with: live Δ, early stop, rate, error.
std::string RunNotes(const xmod::v1::Run& run) {
  const auto& p = run.progress();
  std::vector<std::string> notes;
  if (p.has_live_delta()) {
    notes.push_back(
        absl::StrFormat("Δ %+.4f @%s", p.live_delta(), FormatFlops(p.live_delta_flops())));
  }
  if (run.censored()) notes.push_back("stopped early");
  if (run.state() == xmod::v1::RUNNING && p.tokens_per_second() > 0) {
    notes.push_back(absl::StrCat(FormatRate(p.tokens_per_second()), " tok/s"));
  }
  if ((run.state() == xmod::v1::FAILED || run.state() == xmod::v1::QUEUED) &&
      !run.error().empty()) {
    std::string error = run.error().substr(0, run.error().find('\n'));
    notes.push_back(absl::StrCat("error: ", error.substr(0, 80)));
  }
  return absl::StrJoin(notes, "  ");
}

std::string TableRow(size_t name_width, const xmod::v1::Run& run) {
  const auto& p = run.progress();
  return absl::StrFormat("%-*s  %-9s  %s  %7d  %7s  %7s  %s", name_width, run.name(),
                         RunStateName(run.state()), ProgressCell(p.fraction()), p.step(),
                         FormatLoss(p.train_loss()), FormatLoss(p.val_loss()), RunNotes(run));
}

std::string TableHeader(size_t name_width) {
  return absl::StrFormat("%-*s  %-9s  %-*s  %7s  %7s  %7s  %s", name_width, "NAME", "STATE",
                         kWatchBarWidth + 7, "PROGRESS", "STEP", "LOSS", "VAL", "NOTES");
}

// One row per state with runs: how many and their mean progress.
std::vector<std::string> StateRows(const std::map<int64_t, xmod::v1::Run>& runs) {
  std::map<int, std::pair<int, double>> by_state;  // state -> runs, sum of fractions
  for (const auto& [id, run] : runs) {
    auto& [count, sum] = by_state[run.state()];
    ++count;
    sum += run.progress().fraction();
  }
  std::vector<std::string> rows = {
      absl::StrFormat("%-9s  %7s  %s", "STATE", "RUNS", "MEAN PROGRESS")};
  for (const auto& [state, entry] : by_state) {
    rows.push_back(absl::StrFormat("%-9s  %7d  %s",
                                   RunStateName(static_cast<xmod::v1::RunState>(state)),
                                   entry.first, ProgressCell(entry.second / entry.first)));
  }
  return rows;
}

}  // namespace

std::string FitToWidth(const std::string& line, int columns) {
  if (columns <= 1) return line;
  int seen = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80 && ++seen == columns) {
      return line.substr(0, i);
    }
  }
  return line;
}

std::string RedrawBytes(const std::vector<std::string>& previous,
                        const std::vector<std::string>& next, int columns) {
  std::string out;
  if (!previous.empty()) absl::StrAppend(&out, "\x1b[", previous.size(), "A");
  for (size_t i = 0; i < next.size(); ++i) {
    const std::string line = FitToWidth(next[i], columns);
    if (i < previous.size() && previous[i] == line) {
      absl::StrAppend(&out, "\x1b[1B");  // unchanged: step over it
    } else {
      absl::StrAppend(&out, "\r\x1b[2K", line, "\n");
    }
  }
  if (previous.size() > next.size()) absl::StrAppend(&out, "\x1b[J");  // the rest of the old frame
  return out;
}

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
  std::string line =
      absl::StrFormat("%-*s  %-9s  %s  step %6d  loss %7s  val %7s", name_width, run.name(),
                      RunStateName(run.state()), ProgressCell(p.fraction()), p.step(),
                      FormatLoss(p.train_loss()), FormatLoss(p.val_loss()));
  if (std::string notes = RunNotes(run); !notes.empty()) absl::StrAppend(&line, "  ", notes);
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

std::vector<std::string> WatchView::Frame(int rows) const {
  const size_t name_width = NameWidth(runs_);
  std::vector<std::string> frame = {SummaryLine(), TableHeader(name_width)};
  // The cursor rests on the line below the frame, so a frame fills at most rows - 1 lines.
  const size_t room = rows > 0 ? static_cast<size_t>(rows - 1) : SIZE_MAX;
  if (runs_.size() + frame.size() <= room) {
    for (const auto& [id, run] : runs_) frame.push_back(TableRow(name_width, run));
    return frame;
  }
  frame = {SummaryLine()};
  for (std::string& row : StateRows(runs_)) frame.push_back(std::move(row));
  std::vector<const xmod::v1::Run*> running;
  for (const auto& [id, run] : runs_) {
    if (run.state() == xmod::v1::RUNNING) running.push_back(&run);
  }
  // The running runs below a header, and a last line for those that do not fit.
  if (running.empty() || frame.size() + 3 > room) return frame;
  frame.push_back(TableHeader(name_width));
  const size_t shown =
      std::min(running.size(), room - frame.size() - (running.size() > room - frame.size()));
  for (size_t i = 0; i < shown; ++i) frame.push_back(TableRow(name_width, *running[i]));
  if (shown < running.size()) {
    frame.push_back(absl::StrCat("... ", running.size() - shown, " more running runs"));
  }
  return frame;
}

bool WatchView::Ended() const {
  return sweep_.state() == xmod::v1::SWEEP_DONE || sweep_.state() == xmod::v1::SWEEP_FAILED ||
         sweep_.state() == xmod::v1::SWEEP_CANCELLED;
}

void WatchPrinter::Print(const WatchView& view, const std::vector<int64_t>& changed,
                         bool snapshot) {
  if (tty_) {
    std::vector<std::string> frame = view.Frame(rows_);
    for (std::string& line : frame) line = FitToWidth(line, columns_);
    if (resized_ && !drawn_.empty()) {
      // Up to the old table's first line and clear from there down: it was cut to the old size.
      *out_ << "\x1b[" << drawn_.size() << "A\r\x1b[J";
      drawn_.clear();
    }
    resized_ = false;
    *out_ << RedrawBytes(drawn_, frame, columns_);
    drawn_ = std::move(frame);
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

void WatchPrinter::Resize(int columns, int rows) {
  if (columns == columns_ && rows == rows_) return;
  columns_ = columns;
  rows_ = rows;
  resized_ = true;
}

void WatchPrinter::Finish(const WatchView& view) {
  if (tty_) return;
  std::string summary = view.SummaryLine();
  if (summary != last_summary_) *out_ << summary << "\n";
  out_->flush();
}

}  // namespace xmod::cli
