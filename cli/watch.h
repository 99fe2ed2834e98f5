// Live view of a sweep for `xmodctl sweep watch`: WatchView folds the WatchSweep server
// stream (a snapshot, then changed runs) into per-run progress lines; WatchPrinter draws them,
// redrawing in place with ANSI escapes on a terminal and appending plain lines otherwise.
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

  // True once the sweep reached done, failed or cancelled.
  bool Ended() const;
  const xmod::v1::Sweep& sweep() const { return sweep_; }
  const std::map<int64_t, xmod::v1::Run>& runs() const { return runs_; }

 private:
  xmod::v1::Sweep sweep_;
  std::map<int64_t, xmod::v1::Run> runs_;
  std::map<int64_t, std::string> last_line_;
};

class WatchPrinter {
 public:
  // `tty`: redraw the whole block in place, each line cut to `columns` - 1 characters when
  // `columns` > 0 (a wrapped line would break the redraw); otherwise print the changed runs'
  // lines.
  WatchPrinter(std::ostream* out, bool tty, int columns = 0)
      : out_(out), tty_(tty), columns_(columns) {}

  // Prints after `view` applied an event that changed `changed`.
  void Print(const WatchView& view, const std::vector<int64_t>& changed, bool snapshot);
  // Final summary line (plain mode; in tty mode the block already shows it).
  void Finish(const WatchView& view);

 private:
  std::ostream* out_;
  bool tty_;
  int columns_;
  size_t drawn_lines_ = 0;
  std::string last_summary_;
};

// The width of the progress bar between the brackets.
inline constexpr int kWatchBarWidth = 20;

}  // namespace xmod::cli

#endif  // XMOD_CLI_WATCH_H_
