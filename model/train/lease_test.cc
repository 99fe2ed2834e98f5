// Tests of the trainer's lease watchdog: control messages move the deadline forward only,
// the lapse fires once the (injected) clock passes it, and a closed control pipe freezes it.
#include "model/train/lease.h"

#include <unistd.h>

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/delimited_message_util.h"
#include "gtest/gtest.h"
#include "xmod/v1/trainer.pb.h"

namespace xmod {
namespace {

// Writes TrainerControl{deadline} to `fd` in the worker's framing, in two pieces to exercise
// partial reads.
void SendDeadline(int fd, int64_t deadline_ms) {
  v1::TrainerControl control;
  control.set_lease_deadline_ms(deadline_ms);
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  ASSERT_TRUE(google::protobuf::util::SerializeDelimitedToZeroCopyStream(control, &stream));
  const size_t half = bytes.size() / 2;
  ASSERT_EQ(::write(fd, bytes.data(), half), static_cast<ssize_t>(half));
  ASSERT_EQ(::write(fd, bytes.data() + half, bytes.size() - half),
            static_cast<ssize_t>(bytes.size() - half));
}

// Waits (bounded) until `watchdog` holds `deadline_ms`.
bool WaitForDeadline(const LeaseWatchdog& watchdog, int64_t deadline_ms) {
  for (int i = 0; i < 3000 && watchdog.deadline_ms() != deadline_ms; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  return watchdog.deadline_ms() == deadline_ms;
}

class LeaseTest : public ::testing::Test {
 protected:
  LeaseTest() { EXPECT_EQ(::pipe(fds_), 0); }
  ~LeaseTest() override {
    if (fds_[0] >= 0) ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  std::unique_ptr<LeaseWatchdog> Watch(int64_t deadline_ms) {
    return std::make_unique<LeaseWatchdog>(
        deadline_ms, fds_[0], [this] { return now_.load(); },
        [this](int64_t deadline) {
          lapsed_at_ = deadline;
          lapsed_.Notify();
        });
  }

  int fds_[2] = {-1, -1};
  std::atomic<int64_t> now_{100};
  int64_t lapsed_at_ = 0;
  absl::Notification lapsed_;
};

TEST_F(LeaseTest, ExtensionsMoveTheDeadlineForwardOnly) {
  std::unique_ptr<LeaseWatchdog> watchdog = Watch(1000);
  EXPECT_FALSE(watchdog->Lapsed());
  SendDeadline(fds_[1], 2000);
  ASSERT_TRUE(WaitForDeadline(*watchdog, 2000));
  SendDeadline(fds_[1], 1500);  // late or reordered: ignored
  SendDeadline(fds_[1], 2500);
  ASSERT_TRUE(WaitForDeadline(*watchdog, 2500));
  now_ = 2400;
  EXPECT_FALSE(watchdog->Lapsed());
  EXPECT_FALSE(lapsed_.HasBeenNotified());
  now_ = 2500;
  EXPECT_TRUE(watchdog->Lapsed());
  ASSERT_TRUE(lapsed_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(lapsed_at_, 2500);
}

TEST_F(LeaseTest, AClosedControlPipeFreezesTheDeadline) {
  std::unique_ptr<LeaseWatchdog> watchdog = Watch(1000);
  SendDeadline(fds_[1], 1200);
  ASSERT_TRUE(WaitForDeadline(*watchdog, 1200));
  ::close(fds_[1]);  // the worker died
  fds_[1] = -1;
  now_ = 1200;
  ASSERT_TRUE(lapsed_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(lapsed_at_, 1200);
}

TEST_F(LeaseTest, APassedDeadlineLapsesAtOnceAndStoppingDoesNot) {
  now_ = 5000;
  std::unique_ptr<LeaseWatchdog> watchdog = Watch(1000);
  ASSERT_TRUE(lapsed_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  watchdog.reset();

  absl::Notification never;
  {
    LeaseWatchdog alive(
        10'000, -1, [] { return int64_t{0}; }, [&never](int64_t) { never.Notify(); });
    EXPECT_FALSE(alive.Lapsed());
  }
  EXPECT_FALSE(never.HasBeenNotified());
}

}  // namespace
}  // namespace xmod
