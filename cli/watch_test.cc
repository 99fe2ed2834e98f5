// The sweep-watch table as pure functions: frames in, bytes out (RedrawBytes), and the frame
// a terminal of a given height shows (WatchView::Frame: a row per run, or per state).
#include "cli/watch.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace xmod::cli {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(RedrawBytesTest, FirstFrameIsDrawnWithoutMovingUp) {
  EXPECT_EQ(RedrawBytes({}, {"a", "b"}, 0), "\r\x1b[2Ka\n\r\x1b[2Kb\n");
}

TEST(RedrawBytesTest, OnlyChangedLinesAreRewritten) {
  EXPECT_EQ(RedrawBytes({"head", "x 1", "y 1"}, {"head", "x 2", "y 1"}, 0),
            "\x1b[3A\x1b[1B\r\x1b[2Kx 2\n\x1b[1B");
}

TEST(RedrawBytesTest, GrowingAndShrinkingFrames) {
  EXPECT_EQ(RedrawBytes({"a"}, {"a", "b"}, 0), "\x1b[1A\x1b[1B\r\x1b[2Kb\n");
  // The old frame's last line is cleared from the cursor down.
  EXPECT_EQ(RedrawBytes({"a", "b"}, {"c"}, 0), "\x1b[2A\r\x1b[2Kc\n\x1b[J");
}

TEST(RedrawBytesTest, LinesAreCutToTheWidthInCodePoints) {
  EXPECT_EQ(RedrawBytes({}, {"Δ 12345"}, 5), "\r\x1b[2KΔ 12\n");
  EXPECT_EQ(FitToWidth("abcdef", 4), "abc");
  EXPECT_EQ(FitToWidth("abcdef", 0), "abcdef");
}

xmod::v1::Run RunOf(int64_t id, xmod::v1::RunState state, double fraction) {
  xmod::v1::Run run;
  run.set_id(id);
  run.set_name(absl::StrCat("xmod-K", id));
  run.set_state(state);
  run.mutable_progress()->set_fraction(fraction);
  run.mutable_progress()->set_step(static_cast<int64_t>(fraction * 400));
  return run;
}

WatchView ViewOf(const std::vector<xmod::v1::Run>& runs) {
  xmod::v1::WatchSweepEvent event;
  event.set_snapshot(true);
  event.mutable_sweep()->set_id(3);
  event.mutable_sweep()->set_name("demo");
  for (const auto& run : runs) *event.add_runs() = run;
  WatchView view;
  view.Apply(event);
  return view;
}

TEST(WatchFrameTest, OneRowPerRunUnderAHeaderWhenTheyFit) {
  const WatchView view =
      ViewOf({RunOf(1, xmod::v1::SUCCEEDED, 1), RunOf(2, xmod::v1::RUNNING, 0.5)});
  const std::vector<std::string> frame = view.Frame(/*rows=*/24);
  ASSERT_EQ(frame.size(), 4u);
  EXPECT_THAT(frame[0], StartsWith("sweep 3 demo:"));
  EXPECT_THAT(frame[1], StartsWith("NAME     STATE      PROGRESS"));
  EXPECT_THAT(frame[2], StartsWith("xmod-K1  succeeded  [####################] 100%      400"));
  EXPECT_THAT(frame[3], StartsWith("xmod-K2  running    [##########..........]  50%      200"));
  EXPECT_EQ(view.Frame(0).size(), 4u);  // unknown height: every run
}

TEST(WatchFrameTest, RowsPerStateWhenTheRunsDoNotFit) {
  std::vector<xmod::v1::Run> runs;
  for (int i = 1; i <= 30; ++i) {
    runs.push_back(RunOf(i,
                         i <= 10   ? xmod::v1::SUCCEEDED
                         : i <= 15 ? xmod::v1::RUNNING
                                   : xmod::v1::QUEUED,
                         i <= 10   ? 1
                         : i <= 15 ? 0.5
                                   : 0));
  }
  const WatchView view = ViewOf(runs);
  const std::vector<std::string> frame = view.Frame(/*rows=*/10);
  EXPECT_LE(frame.size(), 9u);  // the cursor's line stays free
  ASSERT_GE(frame.size(), 5u);
  EXPECT_THAT(frame[1], StartsWith("STATE         RUNS  MEAN PROGRESS"));
  EXPECT_THAT(frame[2], StartsWith("queued          15  [....................]   0%"));
  EXPECT_THAT(frame[3], StartsWith("running          5  [##########..........]  50%"));
  EXPECT_THAT(frame[4], StartsWith("succeeded       10  [####################] 100%"));
  // Then the running runs that fit, and how many did not.
  EXPECT_THAT(frame[5], StartsWith("NAME"));
  EXPECT_THAT(frame[6], StartsWith("xmod-K11 "));
  EXPECT_THAT(frame.back(), HasSubstr("more running runs"));
}

}  // namespace
}  // namespace xmod::cli
