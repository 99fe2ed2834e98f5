// Live view of a sweep for `xmodctl sweep watch`: WatchView folds the WatchSweep server
// stream (a snapshot, then changed runs) into per-run progress lines and into a table frame;
// WatchPrinter draws them: on a terminal it redraws the table in place with ANSI cursor
// movement (as `kubectl get -w` or htop do; RedrawBytes, a pure function), otherwise, or
// with --no_redraw, it appends one plain line per change (the line log).
// Thread-compatible (one stream reader).
#ifndef XMOD_CLI_WATCH_H_
#define XMOD_CLI_WATCH_H_

#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "xmod/v1/coordinator.pb.h"

namespace xmod::cli {

class WatchView {
 public:
  // Folds one stream message in (a snapshot replaces every run); returns the ids of runs
  // whose line changed, in id order.
  std::vector<int64_t> Apply(const xmod::v1::WatchSweepEvent& event);

  // "NAME  STATE  [#####.....]  45%  step 120  loss 3.1234  val 3.2345  12.3k tok/s",
  // names padded to the longest name.
  std::string RunLine(int64_t run_id) const;
  // "sweep 3 demo: active  2 running  5 queued  2 succeeded  0 failed".
  std::string SummaryLine() const;
  // The summary line, then one line per run in id order.
  std::vector<std::string> Lines() const;
  // The table a terminal of `rows` lines shows (rows <= 0: no limit): the summary line, a
  // header and one row per run in id order; when those do not fit, one row per state (runs,
  // mean progress) and then the running runs that fit, with a line saying how many are not
  // shown.
  std::vector<std::string> Frame(int rows) const;

  // True once the sweep reached done, failed or cancelled.
  bool Ended() const;
  const xmod::v1::Sweep& sweep() const { return sweep_; }
  const std::map<int64_t, xmod::v1::Run>& runs() const { return runs_; }

 private:
  xmod::v1::Sweep sweep_;
  std::map<int64_t, xmod::v1::Run> runs_;
  std::map<int64_t, std::string> last_line_;
};

// The bytes that turn `previous` (the frame on screen, the cursor at the start of the line
// below it; empty: nothing drawn yet) into `next`, each line of `next` cut to `columns` - 1
// characters when `columns` > 0 (a wrapped line would break the redraw): the cursor up to
// the frame's first line, each line that differs cleared and rewritten, each equal one
// stepped over, and what remains of a longer `previous` cleared. The cursor ends below `next`.
std::string RedrawBytes(const std::vector<std::string>& previous,
                        const std::vector<std::string>& next, int columns);

// A line cut to `columns` - 1 code points (UTF-8 aware); whole when columns <= 1.
std::string FitToWidth(const std::string& line, int columns);

class WatchPrinter {
 public:
  // `tty`: redraw the table (WatchView::Frame for `rows` lines) in place, lines cut to
  // `columns`; otherwise print the changed runs' lines.
  WatchPrinter(std::ostream* out, bool tty, int columns = 0, int rows = 0)
      : out_(out), tty_(tty), columns_(columns), rows_(rows) {}

  // The terminal is now `columns` x `rows`: when that differs, the next Print clears the old
  // table and draws the new one whole, fitted to the new size.
  void Resize(int columns, int rows);
  // Prints after `view` applied an event that changed `changed`.
  void Print(const WatchView& view, const std::vector<int64_t>& changed, bool snapshot);
  // Final summary line (plain mode; in tty mode the block already shows it).
  void Finish(const WatchView& view);

 private:
  std::ostream* out_;
  bool tty_;
  int columns_;
  int rows_;
  std::vector<std::string> drawn_;  // the frame on screen, lines as cut
  bool resized_ = false;            // since drawn_ was drawn
  std::string last_summary_;
};

// The width of the progress bar between the brackets.
inline constexpr int kWatchBarWidth = 20;

}  // namespace xmod::cli

#endif  // XMOD_CLI_WATCH_H_
